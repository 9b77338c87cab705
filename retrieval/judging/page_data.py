"""What the judging page shows of one pooled pair: the question, its type and analysed terms, the
documents already judged relevant, the candidate's title and text cut into segments where the
words that meet the question's terms (as BM25 meets them: the project's analyzer, in the run's
language) are marked, and the methods and ranks that retrieved it.

Segments, not offsets: the page puts each one in a text node (never HTML), and JavaScript counts
string positions in UTF-16 units where Python counts code points.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from retrieval.data.analyzer import analyze, term_spans
from retrieval.data.dataset import Dataset, Question
from retrieval.judging.pool import Candidate

__all__ = ["TEXT_LIMIT", "pair_details", "segments"]

# A candidate's text is shown up to this many characters (the page says it was cut).
TEXT_LIMIT = 20_000


def segments(text: str, wanted: Set[str], language: str) -> list[tuple[str, bool]]:
    """`text` as consecutive (piece, marked) segments: marked where a piece's analysed terms meet
    `wanted`. Joined, the pieces give `text` back."""
    out: list[tuple[str, bool]] = []
    at = 0
    for start, end, terms in term_spans(text, language):
        if wanted.isdisjoint(terms):
            continue
        if start > at:
            out.append((text[at:start], False))
        out.append((text[start:end], True))
        at = end
    if at < len(text) or not out:
        out.append((text[at:], False))
    return out


def pair_details(
    dataset: Dataset, question: Question, candidate: Candidate, language: str, needed: bool
) -> dict[str, Any]:
    """Everything the page shows of one pooled pair (`candidate`, of `question`), as JSON-ready data."""
    index = dataset.positions
    document = dataset.documents[index[candidate.document]]
    question_terms = set(analyze(question.text, language))
    text = document.text[:TEXT_LIMIT]
    shared = set(analyze(f"{document.title}\n{text}", language)) & question_terms
    relevant = []
    for doc_id, grade in sorted(question.judgments.items(), key=lambda x: (-x[1], x[0])):
        if grade >= 1 and doc_id in index:
            relevant.append({"id": doc_id, "title": dataset.documents[index[doc_id]].title, "grade": grade})
    return {
        "question": {
            "id": question.id,
            "type": question.type,
            "segments": segments(question.text, shared, language),
            "terms": sorted(question_terms),
        },
        "relevant": relevant,
        "candidate": {
            "id": document.id,
            "title": segments(document.title, question_terms, language),
            "text": segments(text, question_terms, language),
            "cut": len(document.text) > TEXT_LIMIT,
            "length": len(document.text),
        },
        "hits": [list(hit) for hit in candidate.hits],
        "needed": needed,
        "language": language,
    }
