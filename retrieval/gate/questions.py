"""Which questions a run and a baseline entry are compared on after the dataset changed.

Questions are matched by id. Figures are compared on the questions both hold unchanged, and on
the questions edited since the baseline (reworded, relabelled, retyped), scored under the
judgments the baseline kept for them (their old relevant ids and type) on this run's rankings:
rewording a question, or editing its relevant ids, in the pull request that makes the retriever
worse on it does not take it out of the gate. Both sides are recomputed on those questions from
their per-question values. A dataset is another one only when no id is shared.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from retrieval.gate.schema import DEGRADED_QUESTIONS, judged_grades, question_digests, relevant_ids, rounded

if TYPE_CHECKING:  # annotations only: the gate plugin loads this module in every pytest run
    from retrieval.measures.metrics import MethodScores
    from retrieval.run.results import MethodResult, QuestionResult, Run

__all__ = [
    "DataChanges",
    "as_scores",
    "data_changes",
    "on_questions",
    "rank_in",
    "recall_of",
    "run_data_changes",
    "under_judgments",
]


def recall_of(entry: Mapping[str, Any], k: int) -> str:
    """The name of the entry's recall figures: recall@ its own k (`k` for an entry without one)."""
    return f"recall@{entry.get('config', {}).get('k', k)}"


@dataclass(frozen=True)
class DataChanges:
    """How the dataset changed since the baseline, when its figures can still be compared on the
    questions both hold: the questions added, removed and edited, those both hold unchanged, the
    edited ones scored again under the judgments the baseline kept (`rejudged`), and the
    documents' fingerprints ("sha256:a -> sha256:b") when they changed."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    edited: tuple[str, ...]
    common: tuple[str, ...]
    documents: str | None = None
    rejudged: tuple[str, ...] = ()
    # Questions whose judgments only grew (documents the baseline never judged, judged since): the
    # same questions, the baseline's figures of them recomputed under the new judgments
    # (retrieval.gate.unjudged.as_if_judged).
    filled: tuple[str, ...] = ()

    @property
    def questions_changed(self) -> bool:
        return bool(self.added or self.removed or self.edited)

    @property
    def compared_on(self) -> tuple[str, ...]:
        """The questions the figures are compared on: unchanged ones, then edited ones under old judgments."""
        return (*self.common, *self.rejudged)

    @property
    def where(self) -> str:
        """Which questions the figures are compared on, in words."""
        edited = f"the {len(self.rejudged)} edited one(s) under the baseline's judgments"
        if not self.common:
            return edited.replace(" one(s)", " question(s)")
        text = f"the {len(self.common)} questions both hold"
        return f"{text} and {edited}" if self.rejudged else text

    def __str__(self) -> str:
        parts = [
            f"{len(ids)} {what} ({', '.join(ids[:5])}{f' and {len(ids) - 5} more' if len(ids) > 5 else ''})"
            for what, ids in (("added", self.added), ("removed", self.removed), ("edited", self.edited))
            if ids
        ]
        if self.filled:
            shown = ", ".join(self.filled[:5]) + (f" and {len(self.filled) - 5} more" if len(self.filled) > 5 else "")
            parts.append(
                f"judgments added for documents nobody had judged, on {len(self.filled)} question(s) ({shown})"
            )
        if self.documents:
            parts.append(f"the documents changed ({self.documents})")
        return "; ".join(parts) or "no question added, removed or edited (the file's order changed)"


def data_changes(entry: Mapping[str, Any], questions: Mapping[str, str], corpus: str) -> DataChanges | None:
    """How the questions (`questions`: id -> digest, `question_digests`) and the documents
    (`corpus`, their fingerprint) differ from the baseline entry's, when the figures can still be
    compared: matched by id (a reworded question is the same question), at least one question
    unchanged, or one edited (its text, relevant ids or type) whose old judgments the baseline
    kept. None otherwise (no id shared, or only edited questions of a baseline that kept no
    judgments): a new dataset."""
    recorded = entry.get("questions")
    if not isinstance(recorded, dict):
        return None
    common = tuple(q for q, digest in questions.items() if recorded.get(q) == digest)
    edited = tuple(q for q, digest in questions.items() if q in recorded and recorded[q] != digest)
    before = entry.get("judgments")
    kept: Mapping[str, Any] = before if isinstance(before, dict) else {}
    rejudged = tuple(q for q in edited if q in kept)
    if not common and not rejudged:
        return None
    documents = entry.get("corpus")
    return DataChanges(
        added=tuple(q for q in questions if q not in recorded),
        removed=tuple(q for q in recorded if q not in questions),
        edited=edited,
        common=common,
        documents=None if documents == corpus else f"{documents or 'unknown'} -> {corpus or 'unknown'}",
        rejudged=rejudged,
    )


def run_data_changes(entry: Mapping[str, Any], run: Run) -> DataChanges | None:
    """`data_changes` of a run against the baseline entry; None when its dataset is the baseline's."""
    if entry.get("fingerprint") == run.fingerprint:
        return None
    return data_changes(entry, question_digests(run), run.corpus)


def under_judgments(run: Run, entry: Mapping[str, Any], questions: Collection[str]) -> Run:
    """The run with `questions` judged as the baseline judged them (its kept relevant ids, grades
    and type): their rankings are this run's, their figures what the baseline's judgments make of
    them (each method's rank of an old relevant document found again in its ranking)."""
    kept = entry.get("judgments", {})
    wanted = set(questions)

    def judged(result: QuestionResult) -> QuestionResult:
        judgment = kept[result.question.id]
        relevant = relevant_ids(judgment)
        methods = {
            name: replace(m, relevant_ranks={d: rank_in(m, d) for d in relevant}) for name, m in result.methods.items()
        }
        question = replace(result.question, relevant=relevant, type=judgment["type"], grades=judged_grades(judgment))
        return replace(result, question=question, methods=methods)

    return replace(run, results=[judged(r) if r.question.id in wanted else r for r in run.results])


def rank_in(result: MethodResult, doc: str) -> int | None:
    """A document's 1-based rank in a method's ranking: known from the ranking's kept ids, or from
    the ranks the run noted of its own relevant documents; None beyond both."""
    if doc in result.relevant_ranks:
        return result.relevant_ranks[doc]
    try:
        return result.ids.index(doc) + 1
    except ValueError:
        return None


def on_questions(entry: Mapping[str, Any], common: Collection[str], types: Mapping[str, str], k: int) -> dict[str, Any]:
    """The entry with every figure recomputed on the `common` questions from its per-question
    values (rounded as committed): how both sides are compared after questions changed."""
    keep, recall = set(common), recall_of(entry, k)

    def mean(values: Sequence[float]) -> float:
        return rounded(sum(values) / len(values))

    methods = {}
    for method, figures in entry.get("methods", {}).items():
        rc = {q: v for q, v in figures.get("recall_per_question", {}).items() if q in keep}
        rr = {q: v for q, v in figures.get("reciprocal_ranks", {}).items() if q in keep}
        if not rc or not rr:
            continue  # its figures cannot be recomputed: reported as not compared
        by_type: dict[str, list[float]] = {}
        for q, v in rc.items():
            by_type.setdefault(types.get(q, ""), []).append(v)
        methods[method] = {
            **_degraded_on(figures, keep),
            recall: mean(list(rc.values())),
            "mrr": mean(list(rr.values())),
            "by_type": {t: {recall: mean(v)} for t, v in sorted(by_type.items()) if t in figures.get("by_type", {})},
            "reciprocal_ranks": rr,
            "recall_per_question": rc,
        }
    return {**entry, "methods": methods}


def _degraded_on(figures: Mapping[str, Any], keep: Collection[str]) -> dict[str, Any]:
    """A method's degraded count on the `keep` questions. A baseline written before the
    questions were kept holds only a count: it stays whole unless it is 0."""
    if "degraded" not in figures:
        return {}
    if DEGRADED_QUESTIONS not in figures and figures["degraded"]:
        return {"degraded": figures["degraded"]}
    fell_back = [q for q in figures.get(DEGRADED_QUESTIONS, []) if q in keep]
    return {"degraded": len(fell_back), **({DEGRADED_QUESTIONS: fell_back} if fell_back else {})}


def as_scores(entry: Mapping[str, Any], k: int) -> dict[str, MethodScores]:
    """An entry's figures as the scores `compare` reads (per method: overall, per type, per question)."""
    from retrieval.measures.metrics import MethodScores

    recall = recall_of(entry, k)
    return {
        method: MethodScores(
            overall={recall: f[recall], "mrr": f["mrr"]},
            by_type={t: dict(v) for t, v in f.get("by_type", {}).items()},
            per_question={q: {recall: v, "mrr": f["reciprocal_ranks"][q]} for q, v in f["recall_per_question"].items()},
        )
        for method, f in entry.get("methods", {}).items()
    }
