"""How far an LLM judge agrees with people: Cohen's kappa and the confusion table.

Measured on the pairs both judged (retrieval.data.judgment_merge.LLMCheck): the grade people
(or the dataset's own files) gave against the model's, on the graded scale and on the binary one
the figures read (relevant from `relevant_grade` on). Kappa is (p_o - p_e) / (1 - p_e): observed
agreement corrected for the agreement the two sides' grade frequencies give by chance (Cohen,
1960); 1 is full agreement, 0 chance, below 0 worse than chance. Undefined (None) when both sides
give one and the same grade to every pair: there is no chance agreement to correct.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from retrieval.data.judgment_merge import LLMCheck

__all__ = ["Agreement", "agreements", "cohen_kappa", "confusion"]


def cohen_kappa(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Cohen's kappa of (first rater's grade, second rater's grade) pairs; None when undefined."""
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    rows, columns = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(rows[g] * columns[g] for g in rows) / (n * n)
    if chance == 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


def confusion(pairs: Iterable[tuple[int, int]]) -> dict[int, dict[int, int]]:
    """people's grade -> the model's grade -> how many pairs, every grade seen on either side."""
    counted = Counter(pairs)
    grades = sorted({g for pair in counted for g in pair})
    return {a: {b: counted.get((a, b), 0) for b in grades} for a in grades}


@dataclass(frozen=True)
class Agreement:
    """One model's agreement with people on the pairs both judged."""

    model: str
    pairs: int
    kappa: float | None  # on the grades
    binary_kappa: float | None  # relevant (from relevant_grade on) or not
    exact: float  # share of pairs given the same grade
    confusion: dict[int, dict[int, int]]
    relevant_grade: int


def agreements(checks: Iterable[LLMCheck], relevant_grade: int = 1) -> list[Agreement]:
    """One Agreement per model that judged a pair people judged too, by model name."""
    by_model: dict[str, list[tuple[int, int]]] = {}
    for check in checks:
        by_model.setdefault(check.model, []).append((check.people, check.llm))
    out = []
    for model, pairs in sorted(by_model.items()):
        binary = [(int(a >= relevant_grade), int(b >= relevant_grade)) for a, b in pairs]
        out.append(
            Agreement(
                model=model,
                pairs=len(pairs),
                kappa=cohen_kappa(pairs),
                binary_kappa=cohen_kappa(binary),
                exact=sum(a == b for a, b in pairs) / len(pairs),
                confusion=confusion(pairs),
                relevant_grade=relevant_grade,
            )
        )
    return out
