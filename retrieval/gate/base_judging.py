"""The run as the base branch judges it: its own settings (relevant_grade, accept_llm_judgments,
k) and the questions it gates decide what is compared against it, not the pull request's.

A pull request's rankings are judged twice: as its own project file judges them (its figures,
its own baseline) and as the base branch's does (what `--baseline-ref` compares). So raising
`relevant_grade`, or judging a question's only answer 0 in judgments.jsonl, cannot take a question
out of what the base gates, and raising `k` cannot lift its recall@k (its figures are computed at
its own k, the rankings kept that deep: `base_cut_off`): the run evaluates every question either
side measures, with every document either counts relevant (so each one's rank is known), and each
side reads its own view.
When the two differ, the run's usage counts the questions evaluated for the base branch too, and
its tie summaries are of the documents either side counts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from retrieval.data.dataset import Dataset, load_dataset
from retrieval.gate.questions import rank_in
from retrieval.gate.schema import relevant_ids

if TYPE_CHECKING:
    from retrieval.config import Settings
    from retrieval.data.judgments import Question
    from retrieval.gate.reference import BaseBranch
    from retrieval.run.results import QuestionResult, Run

__all__ = ["Judging", "base_cut_off", "evaluated_questions", "judged_as", "judging"]


@dataclass(frozen=True)
class Judging:
    """How a run is judged on each side: `own` (this project file's dataset), `theirs` (the same
    files as the base branch's settings load them; `own` when they are the same), `held` (the
    questions the base gates that `theirs` leaves with no relevant document) and `evaluated` (what
    the run evaluates: `evaluated_questions`)."""

    own: Dataset
    theirs: Dataset
    held: frozenset[str]
    evaluated: Dataset

    def views(self, run: Run, branch: BaseBranch | None) -> tuple[Run, Run | None]:
        """The evaluated run as this project judges it, and as the base branch does (None: the same)."""
        base = None
        other_k = branch is not None and branch.entry is not None and branch.k != run.config.get("k")
        if branch is not None and (self.theirs is not self.own or self.held or other_k):
            base = judged_as(run, self.theirs, _judged_config(run.config, branch), self.held)
        own = judged_as(run, self.own, run.config) if self.evaluated is not self.own else run
        return own, base


def base_cut_off(branch: BaseBranch | None) -> int:
    """The k the base branch's figures are computed at (0: it gates nothing, any k does)."""
    return branch.k if branch is not None and branch.entry is not None else 0


def judging(settings: Settings, own: Dataset, branch: BaseBranch | None) -> Judging:
    """How a run of `own` (loaded with `settings`) is judged against `branch`, read from its settings and entry."""
    if branch is None or branch.entry is None:
        return Judging(own, own, frozenset(), own)
    theirs = own
    if (branch.relevant_grade, branch.accept_llm_judgments) != (settings.relevant_grade, settings.accept_llm_judgments):
        theirs = load_dataset(
            settings.dataset, settings.split, branch.relevant_grade, accept_llm=branch.accept_llm_judgments
        )
    kept = branch.entry.get("judgments") or {}
    held = frozenset(q.id for q in theirs.left_out if q.id in kept)
    return Judging(own, theirs, held, evaluated_questions(own, theirs, kept, held))


def _judged_config(config: Mapping[str, Any], branch: BaseBranch) -> dict[str, Any]:
    """The run's configuration with the base branch's judging settings and k (as Settings.describe writes them)."""
    own = {k: v for k, v in config.items() if k not in ("relevant_grade", "accept_llm_judgments")}
    return {
        **own,
        "k": branch.k,
        **({"relevant_grade": branch.relevant_grade} if branch.relevant_grade != 1 else {}),
        **({"accept_llm_judgments": True} if branch.accept_llm_judgments else {}),
    }


def judged_as(run: Run, dataset: Dataset, config: Mapping[str, Any], held: Collection[str] = ()) -> Run:
    """The run's rankings judged as `dataset` judges them: the same files loaded with another
    side's settings (a base branch's relevant_grade and accept_llm_judgments), `config` the run's
    configuration under them. Its questions, each relevant document's rank known (the run was
    evaluated on at least every document either side counts: `evaluated_questions`); a question
    `dataset` leaves out is left out, but for those of `held`, kept with their `relevant` empty: a
    baseline gates them, and scores them under the judgments it kept (they are edited questions)."""
    questions = {q.id: q for q in dataset.questions}
    questions.update({q.id: q for q in dataset.left_out if q.id in held})

    def judged(result: QuestionResult) -> QuestionResult:
        question = questions[result.question.id]
        methods = {
            name: replace(m, relevant_ranks={d: rank_in(m, d) for d in question.relevant})
            for name, m in result.methods.items()
        }
        return replace(result, question=question, methods=methods)

    results = [judged(r) for r in run.results if r.question.id in questions]
    return replace(run, fingerprint=dataset.fingerprint, config=dict(config), results=results)


def evaluated_questions(own: Dataset, theirs: Dataset, kept: Mapping[str, Any], held: Collection[str]) -> Dataset:
    """What a run compared with a base branch evaluates: `own` (the pull request's dataset) with
    the questions and relevant documents `theirs` (the same files as the base branch's settings
    load them) counts besides, and the `held` questions (that neither counts, and the base's
    baseline gates) with the relevant documents it `kept`: every question either side measures,
    every document either counts relevant, so that `judged_as` knows each one's rank. `own`
    itself when it holds them all already."""
    corpus = own.positions
    wanted: dict[str, set[str]] = {}
    found: dict[str, Question] = {}
    for q in (*own.questions, *theirs.questions):
        found.setdefault(q.id, q)
        wanted.setdefault(q.id, set()).update(q.relevant)
    for q in theirs.left_out:
        relevant = {d for d in relevant_ids(kept.get(q.id, {})) if d in corpus}
        if q.id in held and relevant:  # no relevant document left in the corpus: no ranking can be scored
            found.setdefault(q.id, q)
            wanted.setdefault(q.id, set()).update(relevant)
    questions = tuple(
        replace(q, relevant=tuple(dict.fromkeys([*q.relevant, *sorted(wanted[q.id] - set(q.relevant))])))
        for q in found.values()
    )
    if questions == own.questions:
        return own
    return replace(own, questions=questions)
