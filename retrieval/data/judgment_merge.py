"""The merge rule: which judgment gives a (question, document) pair its grade.

A pair may be judged by several sources: the dataset's own files (`relevant` in questions.jsonl,
BEIR's qrels: provenance `import:<file>`, no date) and the lines of judgments.jsonl (`human:`,
`llm:`, `import:`, each dated). One of them gives the grade the figures read:

1. A judgment by a person or a file (human:, import:, the dataset's own) always wins over an LLM's:
   an LLM fills holes, it never overrules anyone.
2. Among those, the latest date wins; the dataset's own judgments are older than any dated line.
   On the same date a person's wins over a file's, then the source that sorts last.
3. LLM judgments count only when the project accepts them (`accept_llm_judgments = true`), and
   only for a pair no person or file judged; the latest of them wins. Refused, the pair stays
   unjudged: it is still a hole, measured as such and offered to the judging page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from retrieval.data.judgment_file import Judgment

__all__ = ["LLMCheck", "PairJudgments", "by_question", "llm_checks", "merged_grades", "winner"]

_KIND_ORDER = {"import": 0, "human": 1}


def _rank(judgment: Judgment) -> tuple[bool, str, int, str]:
    return (judgment.kind != "llm", judgment.date, _KIND_ORDER.get(judgment.kind, -1), judgment.source)


def winner(judgments: Iterable[Judgment], accept_llm: bool) -> Judgment | None:
    """The judgment that gives a pair its grade, among its judgments (rules above); None when
    none counts (no judgment, or only LLM ones that the project refuses)."""
    counted = [j for j in judgments if accept_llm or j.kind != "llm"]
    return max(counted, key=_rank) if counted else None


# question id -> document id -> every judgment of the pair in judgments.jsonl
PairJudgments = Mapping[str, Mapping[str, list[Judgment]]]


def by_question(judgments: Iterable[Judgment]) -> dict[str, dict[str, list[Judgment]]]:
    """The file's judgments grouped by question, then document."""
    out: dict[str, dict[str, list[Judgment]]] = {}
    for j in judgments:
        out.setdefault(j.question, {}).setdefault(j.document, []).append(j)
    return out


def merged_grades(
    own: Mapping[str, int], lines: Mapping[str, list[Judgment]], accept_llm: bool, own_source: str
) -> tuple[dict[str, int], set[str]]:
    """One question's grades: its own judgments (`own`: document -> grade, from the dataset's
    files, provenance `own_source`) merged with its lines of judgments.jsonl (`lines`); and the
    documents whose grade is an LLM's (accepted, filling a hole)."""
    grades = dict(own)
    by_llm = set()
    for document, judgments in lines.items():
        base = [Judgment("", document, own[document], own_source)] if document in own else []
        chosen = winner([*base, *judgments], accept_llm)
        if chosen is not None:
            grades[document] = chosen.grade
            if chosen.kind == "llm":
                by_llm.add(document)
    return grades, by_llm


@dataclass(frozen=True)
class LLMCheck:
    """A pair judged by an LLM and by a person or a file: what agreement is measured on."""

    question: str
    document: str
    model: str
    people: int  # the grade the non-LLM judgments give (rules 1-2)
    llm: int  # the model's latest grade


def llm_checks(
    own: Mapping[str, int], question: str, lines: Mapping[str, list[Judgment]], own_source: str
) -> list[LLMCheck]:
    """The pairs of one question that an LLM and a person (or a file) both judged, per model."""
    out = []
    for document, judgments in lines.items():
        base = [Judgment(question, document, own[document], own_source)] if document in own else []
        people = winner([*base, *(j for j in judgments if j.kind != "llm")], accept_llm=False)
        if people is None:
            continue
        latest: dict[str, Judgment] = {}
        for j in judgments:
            if j.kind == "llm" and (j.name not in latest or _rank(j) > _rank(latest[j.name])):
                latest[j.name] = j
        out += [LLMCheck(question, document, model, people.grade, j.grade) for model, j in sorted(latest.items())]
    return out
