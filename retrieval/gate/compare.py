"""Comparing a run with a baseline entry: which figures, on which questions, and the checks.

After the dataset changed, figures are compared on the questions both hold unchanged, and
on the questions edited since the baseline, scored again under the judgments the baseline
kept for them (their old relevant ids and type): editing a question's relevant ids in the
pull request that makes the retriever worse on it does not take it out of the gate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retrieval.gate.questions import recall_of, run_data_changes
from retrieval.gate.schema import DIGITS, BaselineError, first_of, flat_figures, rounded
from retrieval.measures.figures import kind_of
from retrieval.recording.cassette_files import record_command
from retrieval.report.verdict import Comparison, WorseQuestion, figure_text

if TYPE_CHECKING:  # annotations only: the gate plugin loads this module in every pytest run
    from retrieval.measures.metrics import MethodScores
    from retrieval.run.results import Run

__all__ = [
    "Check",
    "Describe",
    "accept_command",
    "at_k",
    "compare",
    "config_changes",
    "figure_words",
    "incompatibility",
    "undecided_words",
    "ungated_types",
    "unproduced",
    "unproduced_words",
]


# Describes a question whose value fell: (method, question id, metric, was, now) -> WorseQuestion.
Describe = Callable[[str, str, str, float, float], WorseQuestion]


@dataclass(frozen=True)
class Check:
    """One gated figure: method, metric (e.g. "mrr" or "recall@5[paraphrase]"), baseline and current."""

    method: str
    metric: str
    baseline: float
    current: float
    tolerance: float
    worse: tuple[WorseQuestion, ...] = ()
    # The baseline's name of the figure when it is not `metric`: "recall@5" for a run at k = 3.
    baseline_metric: str | None = None
    # The git ref whose baseline this check compares with ("origin/main"), when not the file's own.
    reference: str | None = None
    # The reason the pull request's baseline records for accepting this drop against `reference`.
    accepted: str | None = None
    # A drop that holds only while the unjudged documents that entered the method's top k count as
    # not relevant (retrieval.gate.unjudged): the figure (baseline, current) with them relevant,
    # those documents (question, document, rank), and whether the project lets it pass
    # (`unjudged = "warn"`). None: it fell either way, or it did not fall.
    if_relevant: tuple[float, float] | None = None
    unjudged: tuple[tuple[str, str, int], ...] = ()
    warned: bool = False

    @property
    def name(self) -> str:
        """The check's name as the gate shows it: "bm25 mrr", "bm25 mrr against origin/main"."""
        return f"{self.method} {self.metric}" + (f" against {self.reference}" if self.reference else "")

    @property
    def baseline_figure(self) -> str:
        """The baseline figure this check compares with ("bm25 recall@5[paraphrase]")."""
        return f"{self.method} {self.baseline_metric or self.metric}"

    @property
    def worse_questions(self) -> list[str]:
        """The questions that got worse, largest fall first, as the failure lists them."""
        return [w.line() for w in self.worse]

    @property
    def higher_is_worse(self) -> bool:
        return kind_of(self.metric).higher_is_worse

    @property
    def delta(self) -> float:
        return round(self.current - self.baseline, DIGITS)

    @property
    def held(self) -> bool:
        """The figure is not worse than the baseline's by more than the tolerance."""
        if self.higher_is_worse:
            return round(self.current, DIGITS) <= round(self.baseline + self.tolerance, DIGITS)
        return round(self.current, DIGITS) >= round(self.baseline - self.tolerance, DIGITS)

    @property
    def undecided(self) -> bool:
        """It fell, and would not have with the unjudged documents relevant: nobody can tell yet."""
        return self.comparison().undecided

    @property
    def ok(self) -> bool:
        """It held, was accepted, or is undecided where the project lets that pass: the verdict's own rule."""
        return self.comparison().ok

    def comparison(self) -> Comparison:
        """The check as the verdict model holds it."""
        return Comparison(
            self.reference,
            self.baseline,
            self.current,
            self.tolerance,
            self.held,
            self.accepted,
            self.worse,
            self.if_relevant,
            self.unjudged,
            self.warned,
        )

    def message(self) -> str:
        """What this check says alone when it fails (`figure_words`)."""
        return figure_words([self])


def _against(reference: str | None) -> str:
    return f"the baseline of {reference}" if reference else "the baseline"


def accept_command(reference: str | None) -> str:
    """The command that records an accepted drop (against `reference` too, when the gate compares with it)."""
    ref = f" --retrieval-baseline-ref {reference}" if reference else ""
    return f'pytest --update-baseline --allow-regression "REASON"{ref}'


JUDGE_COMMAND = "python -m retrieval judge"


def undecided_words(checks: Sequence[Check]) -> str:
    """What a figure whose every drop is undecided adds to its failure: the documents it rests on,
    the range (the figure with them counted as relevant), and the command that judges them."""
    first = checks[0]
    metric, reference = first.metric, next((c.reference for c in checks if c.reference), None)
    documents = dict.fromkeys(d for c in checks for d in c.unjudged)
    high = first.if_relevant or (first.baseline, first.current)
    n = len(documents)
    listed = ", ".join(f"{q} {d} ({first.method} rank {rank})" for q, d, rank in list(documents)[:10])
    more = f" and {n - 10} more" if n > 10 else ""
    ref = f" --baseline-ref {reference}" if reference else ""
    return (
        f"Undecided: judge {n} document(s): the drop rests on the {n} unjudged document(s) that entered its top k, "
        f"counted as not relevant ({figure_text(metric, first.baseline)} -> {figure_text(metric, first.current)}); "
        f"counted as relevant, {figure_text(metric, high[0])} -> {figure_text(metric, high[1])}, which holds: "
        f'{listed}{more}. Judge them with `{JUDGE_COMMAND}{ref}` (the page\'s "only what this pull request needs"), '
        "then run the gate again."
    )


def figure_words(checks: Sequence[Check]) -> str:
    """The one failure of a figure compared with its baselines (the pull request's own, and a git
    ref's): which fell, the values with the same rounding everywhere, the questions that got worse
    (those of the base branch's comparison first: its judgments are what the base gates), the fix."""
    failing = [c for c in checks if not c.ok] or list(checks)
    undecided = f" {undecided_words(failing)}" if all(c.undecided for c in failing) else ""
    first = failing[0]
    metric = first.metric
    moved = "rose above" if first.higher_is_worse else "fell below"
    theirs = f"'s {first.baseline_metric}" if first.baseline_metric else ""
    where = " and ".join(_against(c.reference) for c in failing)

    def value(c: Check, v: float, sign: str = "") -> str:
        return figure_text(metric, v, sign)

    # The second baseline's values only where they differ from the first's (the same base, mostly).
    others = [c for c in failing[1:] if (c.baseline, c.tolerance) != (first.baseline, first.tolerance)]
    head = f"baseline {value(first, first.baseline)}"
    head += "".join(f" ({c.reference}: {value(c, c.baseline)})" for c in others)
    delta = value(first, first.delta, "+") + "".join(f" ({c.reference}: {value(c, c.delta, '+')})" for c in others)
    tolerance = f"tolerance {first.tolerance}" + "".join(
        f"; {c.reference}'s {c.tolerance}" for c in others if c.tolerance != first.tolerance
    )
    listed = next((c for c in reversed(failing) if c.worse), first)
    worse = ", ".join(first_of(listed.worse_questions)) or "none individually (a mean moved)"
    reference = next((c.reference for c in failing if c.reference), None)
    return (
        f"{first.method} {metric} {moved} {where}{theirs}: {head}, current {value(first, first.current)}, "
        f"delta {delta} ({tolerance}). Questions that got worse: {worse}. If this change is intended, accept it "
        f"with `{accept_command(reference)}` (the baseline records the reason; the PR summary shows it).{undecided}"
    )


def unproduced_words(figure: str, references: Sequence[str | None], methods: Sequence[str], why: str = "") -> str:
    """The failure of a figure a baseline gates (the pull request's, a git ref's, or both) that
    this run did not produce; `why` says more (the base branch's questions it no longer holds)."""
    gates = " and ".join(f"{r}'s baseline" if r else "the baseline" for r in references)
    verb = "gate" if len(references) > 1 else "gates"
    reference = next((r for r in references if r), None)
    return (
        f"{gates} {verb} {figure} but this run did not produce it{why} (methods run: {', '.join(methods)}). "
        f"If it was dropped on purpose: `{accept_command(reference)}`, and say why in the PR."
    )


def incompatibility(entry: Mapping[str, Any], run: Run, profile: str) -> str | None:
    """Why a run cannot be compared with the baseline entry (its dataset changed), or None.
    A changed configuration is compared all the same: that is what the gate measures, and so
    is a dataset that kept some questions (on those questions)."""
    if entry.get("fingerprint") != run.fingerprint and run_data_changes(entry, run) is None:
        why = "no question id is in both" if "questions" in entry else "the baseline predates question digests"
        return (
            f"the dataset changed since the baseline was made (fingerprint {entry.get('fingerprint')} -> "
            f"{run.fingerprint}) and {why}: metrics are not comparable. If the change is intended: re-record "
            f"(`{record_command(profile)}`) if questions changed, then `pytest --update-baseline` and commit "
            "baselines/metrics.json."
        )
    return None


def at_k(entry: Mapping[str, Any], k: int) -> dict[str, Any]:
    """The entry with its recall figures named for `k`, as the gate compares them after a change
    of k (the report shows the run's recall@k against the baseline's)."""
    theirs, recall = recall_of(entry, k), f"recall@{k}"

    def renamed(figures: Mapping[str, Any]) -> dict[str, Any]:
        return {recall if name == theirs else name: value for name, value in figures.items()}

    methods = {
        method: {**renamed(figures), "by_type": {t: renamed(v) for t, v in figures.get("by_type", {}).items()}}
        for method, figures in entry.get("methods", {}).items()
    }
    return {**entry, "methods": methods}


def config_changes(entry: Mapping[str, Any], run: Run) -> list[str]:
    """The settings that differ between the baseline entry and the run ("hybrid.rrf_k: 60 -> 5")."""
    before, current = entry.get("config", {}), run.config
    # A method's own settings (`hybrid.rrf_k`) count where the method ran both times; a method
    # added or dropped shows as figures new or no longer produced, not as a configuration change.
    ran_both = {k.split(".")[0] for k in before if "." in k} & {k.split(".")[0] for k in current if "." in k}
    return [
        f"{key}: {before.get(key)!r} -> {current.get(key)!r}"
        for key in sorted(set(before) | set(current))
        if before.get(key) != current.get(key) and ("." not in key or key.split(".")[0] in ran_both)
    ]


def compare(
    entry: Mapping[str, Any],
    scores: Mapping[str, MethodScores],
    k: int,
    types: Mapping[str, str],
    degraded: Mapping[str, Sequence[str]] | None = None,
    source: str = "the baseline",
    describe: Describe | None = None,
    tolerance: float = 0.0,
    reference: str | None = None,
) -> list[Check]:
    """Every gated figure of every method present in both the baseline and the run.

    `types` maps question id -> type, to name the questions behind a per-type drop. `degraded`
    (method -> the question ids where it fell back, `Run.degraded`) gates the degraded count
    of the methods whose baseline records one: it fails when the count rises. `source` names
    the baseline file in the BaselineError raised when a gated figure lacks recall@k. `describe`
    makes each question that got worse (its text, its relevant documents' ranks, the failure
    class). `tolerance` is the project's setting (a count such as degraded has none); `reference`
    the git ref whose baseline `entry` is, if it is not the pull request's own. A dataset of one
    question type gets no per-type check: it is the overall figure again (`flat_figures`).
    """
    recall = f"recall@{k}"
    # At another k (how many documents reach the LLM), the run's recall@k is held to the
    # baseline's: fewer relevant documents in the top k is what such a change costs.
    theirs = recall_of(entry, k)
    renamed = theirs if theirs != recall else None
    checks = []
    for method, base in entry["methods"].items():
        if method not in scores:
            continue
        _require_recall(base, method, theirs, source)
        s = scores[method]
        rr = base.get("reciprocal_ranks", {})
        rc = base.get("recall_per_question", {})

        def worse(
            per_q: Mapping[str, float],
            metric: str,
            qtype: str | None = None,
            s: MethodScores = s,
            method: str = method,
        ) -> tuple[WorseQuestion, ...]:
            fell = [
                (q, v[metric])
                for q, v in s.per_question.items()
                if q in per_q and rounded(v[metric]) < per_q[q] and (qtype is None or types.get(q) == qtype)
            ]
            # Largest fall first: a failure lists the first ten (SHOWN) and counts the rest.
            fell.sort(key=lambda qv: qv[1] - per_q[qv[0]])
            return tuple(
                describe(method, q, metric, per_q[q], rounded(now))
                if describe is not None
                else WorseQuestion(q, "", metric, per_q[q], rounded(now), (), "", "")
                for q, now in fell
            )

        def check(
            metric: str,
            was: float,
            now: float,
            fell: tuple[WorseQuestion, ...],
            named: str | None,
            method: str = method,
        ) -> Check:
            return Check(method, metric, was, now, tolerance, fell, baseline_metric=named, reference=reference)

        checks.append(check(recall, base[theirs], s.overall[recall], worse(rc, recall), renamed))
        checks.append(check("mrr", base["mrr"], s.overall["mrr"], worse(rr, "mrr"), None))
        by_type = base.get("by_type", {})
        for qtype, values in by_type.items() if len(by_type) > 1 else ():
            if qtype in s.by_type:
                named = renamed and f"{renamed}[{qtype}]"
                fell = worse(rc, recall, qtype)
                checks.append(check(f"{recall}[{qtype}]", values[theirs], s.by_type[qtype][recall], fell, named))
        if degraded is not None and "degraded" in base:
            fell_back = tuple(WorseQuestion(q, "", "degraded", 0.0, 1.0, (), "", "") for q in degraded.get(method, ()))
            checks.append(
                Check(method, "degraded", base["degraded"], len(fell_back), 0.0, fell_back, reference=reference)
            )
    return checks


def _require_recall(base: Mapping[str, Any], method: str, recall: str, source: str) -> None:
    """BaselineError naming the file and the entry when the method's figures lack `recall`."""
    missing = [] if recall in base else [f"method {method!r}"]
    missing += [f"method {method!r} by_type[{t}]" for t, v in base.get("by_type", {}).items() if recall not in v]
    if missing:
        raise BaselineError(
            f"{source}: {missing[0]} has no {recall}: the baseline was made with another k or is damaged. "
            f"Restore it with `git checkout -- {source}` or rewrite it with `pytest --update-baseline`."
        )


def unproduced(entry: Mapping[str, Any], checks: list[Check]) -> list[str]:
    """Figures the baseline gates that no check compared ("vector mrr"): a method or a question
    type the run no longer produces. Each one is a gate lowered to nothing, so the gate fails."""
    compared = {c.baseline_figure for c in checks}
    return [name for name in flat_figures(entry.get("methods", {})) if name not in compared]


def ungated_types(entry: Mapping[str, Any], scores: Mapping[str, MethodScores], k: int) -> list[str]:
    """Per-type figures the run produces for a method the baseline gates but the baseline lacks
    ("bm25 recall@5[paraphrase]"): a question type whose figure was deleted is not gated."""
    recall = f"recall@{k}"
    return [
        f"{method} {recall}[{qtype}]"
        for method, figures in entry.get("methods", {}).items()
        if method in scores
        for qtype in sorted(scores[method].by_type)
        if qtype not in figures.get("by_type", {})
    ]
