"""The registry of gated figures: what each one measures, its range, and which way is worse.

Every place that decides whether a figure got worse (a check of the gate, the diff of an
update, a comparison with the base branch) and every check of a stored figure's range asks
here, so a new kind of figure is declared once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DIGITS", "FIGURES", "FigureKind", "UnknownFigure", "is_worse", "kind_of"]


# The decimals a baseline keeps of each figure, and compares at.
DIGITS = 4


class UnknownFigure(ValueError):
    """A figure name the registry does not know: never compared silently in either direction."""


@dataclass(frozen=True)
class FigureKind:
    """One kind of figure: a rate in [0, 1] where lower is worse, or a count >= 0 where higher is."""

    name: str
    higher_is_worse: bool
    highest: float  # math.inf for a count
    count: bool = False

    def in_range(self, value: float) -> bool:
        """Whether a stored value is one this kind can take (a count is a whole number)."""
        if self.count and value != int(value):
            return False
        return 0.0 <= value <= self.highest

    @property
    def range_text(self) -> str:
        return "a whole number >= 0" if self.count else f"a number from 0 to {self.highest:g}"


FIGURES: dict[str, FigureKind] = {
    "recall": FigureKind("recall", higher_is_worse=False, highest=1.0),
    "mrr": FigureKind("mrr", higher_is_worse=False, highest=1.0),
    "hit": FigureKind("hit", higher_is_worse=False, highest=1.0),
    "ndcg": FigureKind("ndcg", higher_is_worse=False, highest=1.0),
    # Questions where a method fell back (a reranker's failed calls): worse when it rises.
    "degraded": FigureKind("degraded", higher_is_worse=True, highest=math.inf, count=True),
}


def kind_of(metric: str) -> FigureKind:
    """The kind of a figure named as the baseline names it: "recall@5", "recall@5[paraphrase]",
    "mrr", "degraded", or with its method first ("bm25 mrr")."""
    bare = metric.rsplit(" ", 1)[-1].split("[", 1)[0].split("@", 1)[0]
    try:
        return FIGURES[bare]
    except KeyError:
        raise UnknownFigure(f"{metric!r} is not a known figure (known: {', '.join(FIGURES)})") from None


def is_worse(metric: str, before: float, after: float) -> bool:
    """Whether `after` is worse than `before` for this figure (exact: callers round first)."""
    return after > before if kind_of(metric).higher_is_worse else after < before
