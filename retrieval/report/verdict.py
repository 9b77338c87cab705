"""The gate's verdicts as immutable values: the one model every output of the gate renders.

The gate (retrieval.gate.verdicts) builds one `GateVerdict` per run from its evaluation and its
baselines; the pytest plugin raises each failed item's words, `python -m retrieval --gate` prints
them, and the Markdown job summary and pull-request comment (retrieval.report.gate_summary) render
the same values, with the same rounding (`figure_text`). Nothing here computes a verdict: a value
says what was decided, so no output can say otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.measures.figures import DIGITS, kind_of

__all__ = [
    "AcceptedDrop",
    "Comparison",
    "Dropped",
    "EditedQuestion",
    "GateVerdict",
    "ItemVerdict",
    "Place",
    "WorseQuestion",
    "figure_text",
]


def figure_text(metric: str, value: float, sign: str = "") -> str:
    """A figure as every output of the gate shows it: a count whole, a rate to the baseline's 4
    decimals (`sign="+"` for a delta). The one rounding of the gate's words and its summaries."""
    return f"{value:{sign}.0f}" if kind_of(metric).count else f"{value:{sign}.{DIGITS}f}"


@dataclass(frozen=True)
class Place:
    """Where one relevant document of a question stood: in the baseline's ranking and in this run's
    (1-based ranks; None: not in the baseline's top 10, or beyond what this run kept)."""

    doc: str
    was: int | None
    now: int | None


@dataclass(frozen=True)
class WorseQuestion:
    """A question whose value fell under one method: its text, its relevant documents (as the
    baseline judged them) with their old and new ranks, and the failure class of that method
    ("recall": no relevant document reached its candidate pool; "ranking": one did, not first)."""

    id: str
    text: str
    metric: str
    was: float
    now: float
    places: tuple[Place, ...]
    failure: str
    where: str  # the same in words: "d2 at rank 2: a ranking failure, within table top 20"
    pool: str = ""  # the candidate pool the failure class is of: "table top 20"

    def line(self) -> str:
        """The question as the gate's failure lists it (a count, `degraded`, by its id alone)."""
        if kind_of(self.metric).count:
            return self.id
        values = f"{figure_text(self.metric, self.was)} -> {figure_text(self.metric, self.now)}"
        return f"{self.id} ({values}{f'; {self.where}' if self.where else ''})"


@dataclass(frozen=True)
class Comparison:
    """One figure against one baseline: the pull request's own (`against` None) or a git ref's."""

    against: str | None
    was: float
    now: float
    tolerance: float
    held: bool
    accepted: str | None = None  # the reason the pull request records for accepting this drop
    worse: tuple[WorseQuestion, ...] = ()
    # The figure with the unjudged documents that entered the method's top k counted as relevant
    # (was, now), when it fell; and those documents (question, document, rank in this run).
    if_relevant: tuple[float, float] | None = None
    unjudged: tuple[tuple[str, str, int], ...] = ()
    # A drop that holds only while they count as not relevant, and the project lets it pass
    # (`unjudged = "warn"`).
    warned: bool = False

    @property
    def undecided(self) -> bool:
        """It fell, and would not have with the unjudged documents relevant: nobody can tell yet."""
        return not self.held and self.if_relevant is not None and self.accepted is None

    @property
    def ok(self) -> bool:
        return self.held or self.accepted is not None or (self.undecided and self.warned)

    @property
    def delta(self) -> float:
        return round(self.now - self.was, DIGITS)


@dataclass(frozen=True)
class ItemVerdict:
    """The verdict of one gate item: `failure` is its words, None when it holds. Every item has
    one; `note` says why an item that holds had nothing of its own to compare."""

    name: str
    kind: str  # problem | secrets | digests | integrity | coverage | figure | snapshot | base
    failure: str | None = None
    method: str | None = None
    metric: str | None = None
    comparisons: tuple[Comparison, ...] = ()
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class Dropped:
    """What the base branch (or the baseline) gates that this run no longer produces."""

    what: str  # method | profile | dataset | project
    name: str
    detail: str


@dataclass(frozen=True)
class EditedQuestion:
    """A question kept by id whose text, relevant documents or type changed (old -> new); the old
    text is None when the baseline's dataset could not be read (a digest is all it keeps)."""

    id: str
    old_text: str | None
    new_text: str
    old_relevant: tuple[str, ...]
    new_relevant: tuple[str, ...]
    old_type: str
    new_type: str


@dataclass(frozen=True)
class AcceptedDrop:
    """A drop the pull request's baseline accepts, with its recorded reason."""

    figure: str
    was: float | None
    now: float | None
    reason: str
    against: str | None = None  # the ref the drop is against, when the gate compared with one


@dataclass(frozen=True)
class GateVerdict:
    """One gate run's verdicts and what a reviewer needs beside them."""

    where: str  # "profile local, dataset faq"
    items: tuple[ItemVerdict, ...]
    problem: str | None = None  # what stopped the comparison, in one line with its fix
    reference: str | None = None  # the base branch's ref, when compared with it
    methods: int = 0
    k: int = 5
    notes: tuple[str, ...] = ()  # what the summary line says after its counts
    dropped: tuple[Dropped, ...] = ()
    edited: tuple[EditedQuestion, ...] = ()
    accepted: tuple[AcceptedDrop, ...] = ()
    unjudged: tuple[tuple[str, int, int], ...] = ()  # method, documents, questions: new in its top k, unjudged
    touched: tuple[str, ...] = ()  # the files deciding the gate this pull request edits

    @property
    def failed(self) -> tuple[ItemVerdict, ...]:
        return tuple(item for item in self.items if not item.ok)

    @property
    def passed(self) -> bool:
        return self.problem is None and not self.failed

    def item(self, name: str) -> ItemVerdict:
        """The verdict of item `name`; an item the gate gave none fails (never passes unchecked)."""
        for item in self.items:
            if item.name == name:
                return item
        return ItemVerdict(name, "problem", f"no verdict for this item: the gate compared nothing for {name}")
