"""Paired comparisons: how much of a change in a figure the question sample can show.

Two sets of per-question values of one metric (question id -> value), from two methods
or from a method and the baseline, compared question by question: how many questions got
better, worse or stayed the same, and a paired bootstrap 95 % interval of the mean
difference (candidate - reference). With 25 questions one question moves recall by 0.04;
an interval that straddles 0 says the sample cannot tell the change from chance. The gate
stays exact: this tells a reviewer how much to read into a change, it decides nothing.

The bootstrap is scipy's (`scipy.stats.bootstrap`, percentile method), seeded and
deterministic: resample the questions with replacement `resamples` times (draws from numpy's
default Generator, RESAMPLE_CHUNK resamples per call, so memory stays bounded), take each
resample's mean difference, and return the 2.5 % and 97.5 % percentiles (linear
interpolation). Questions are sorted by id first, so the interval does not depend on the
order of the maps. Pure: numpy and scipy only.

With the scipy releases whose computation it repeats (REPEATED: the same draws, means, sort
and interpolation, to the last bit), `bootstrap_interval` computes it here with numpy: importing
scipy.stats took a third of a second of every `--gate` command, and its checks about a
millisecond of every comparison. Any other release, or a value that is not finite, is scipy's own.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = [
    "BASELINE",
    "RESAMPLES",
    "SEED",
    "PairedComparison",
    "bootstrap_draws",
    "bootstrap_interval",
    "compare",
    "comparison_pairs",
    "comparisons_to_dicts",
    "render_comparisons",
    "summary_line",
]

RESAMPLES = 10_000
SEED = 11  # fixed: the same values always give the same interval
CONFIDENCE = 0.95
RESAMPLE_CHUNK = 1_000  # resamples drawn per call: bounds the index block at 1,000 x n questions
BASELINE = "baseline"
# The scipy releases (major.minor) whose percentile bootstrap `_repeated_interval` computes as they do.
REPEATED = ("1.17",)


def bootstrap_draws(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> Iterator[np.ndarray]:
    """The resampled question positions, RESAMPLE_CHUNK resamples (rows) at a time, each row
    `n` draws in 0..n-1: the one definition of the draws, shared with the reference test."""
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, RESAMPLE_CHUNK):
        yield rng.integers(0, n, size=(min(RESAMPLE_CHUNK, resamples - start), n))


def bootstrap_interval(
    differences: Sequence[float] | np.ndarray,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of paired differences."""
    values = np.asarray(differences, dtype=np.float64)
    if values.ndim != 1 or len(values) == 0:
        raise ValueError("bootstrap: need at least one paired difference")
    if resamples < 1:
        raise ValueError(f"bootstrap: resamples must be >= 1, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"bootstrap: confidence must be between 0 and 1, got {confidence}")
    if len(values) == 1:
        return float(values[0]), float(values[0])  # every resample is that one value (scipy needs two)
    if resamples > 1 and _scipy_release() in REPEATED:  # scipy warns of one resample's standard error
        repeated = _repeated_interval(values, resamples, seed, confidence)
        if repeated is not None:
            return repeated
    from scipy.stats import bootstrap  # here: scipy.stats takes a third of a second to import

    # batch=RESAMPLE_CHUNK: scipy draws rng.integers(0, n, (batch, n)) per batch from the seeded
    # Generator, exactly the rows of bootstrap_draws, so the draws are the same.
    result = bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        batch=RESAMPLE_CHUNK,
        vectorized=True,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


@functools.cache
def _scipy_release() -> str:
    """The installed scipy's major.minor, read from its metadata (scipy itself is not imported)."""
    try:
        return ".".join(importlib.metadata.version("scipy").split(".")[:2])
    except importlib.metadata.PackageNotFoundError:
        return ""


def _repeated_interval(values: np.ndarray, resamples: int, seed: int, confidence: float) -> tuple[float, float] | None:
    """scipy.stats.bootstrap's percentile interval of the mean as scipy 1.17 computes it
    (`bootstrap(..., batch=RESAMPLE_CHUNK, vectorized=True)`, then `stats.quantile`'s "linear"
    method), step for step; None when a resampled mean is not finite (scipy's NaN and warning)."""
    rng = np.random.default_rng(seed)
    n = values.shape[-1]
    means = []
    for start in range(0, resamples, RESAMPLE_CHUNK):
        draws = rng.integers(0, n, (min(RESAMPLE_CHUNK, resamples - start), n))
        # values is 1-D: values[draws] is scipy's values[..., draws] without the cost of the
        # general index (an interval over 300 questions: 14 ms against 19.5 ms).
        means.append(np.mean(values[draws], axis=-1))
    theta = np.concatenate(means, axis=-1)
    if not np.isfinite(theta).all():
        return None
    alpha = np.asarray((1 - confidence) / 2, dtype=theta.dtype)
    p = np.stack((alpha, 1 - alpha), axis=-1)
    y = np.sort(theta, axis=-1)
    count = np.asarray(y.shape[-1], dtype=y.dtype)
    jg = p * count + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = np.where(j < 0, 0, jg % 1)
    j, jp1 = np.clip(j, 0.0, count - 1), np.clip(jp1, 0.0, count - 1)
    low, high = (1 - g) * y[j.astype(np.int64)] + g * y[jp1.astype(np.int64)]
    return float(low), float(high)


@dataclass(frozen=True)
class PairedComparison:
    """One metric, `candidate` against `reference` (a method, or BASELINE), question by question.

    `difference` = mean_candidate - mean_reference; [low, high] its bootstrap interval.
    """

    metric: str
    reference: str
    candidate: str
    questions: int
    better: int
    worse: int
    same: int
    mean_reference: float
    mean_candidate: float
    difference: float
    low: float
    high: float
    resamples: int
    seed: int

    @property
    def moved(self) -> bool:
        """True when at least one question's value changed."""
        return self.better + self.worse > 0


def compare(
    reference: Mapping[str, float],
    candidate: Mapping[str, float],
    metric: str,
    reference_name: str,
    candidate_name: str,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    decimals: int | None = None,
) -> PairedComparison:
    """Compare two question id -> value maps of one metric over the same questions.

    `decimals` rounds both sides first: the baseline keeps per-question values rounded to 4
    decimals (retrieval.measures.figures.DIGITS), so compare a run against it with decimals=4, or an
    unchanged reciprocal rank of 1/3 would count as better than the baseline's 0.3333.
    Raises ValueError when the maps do not hold the same questions (a comparison over
    different samples would not be paired), naming up to five ids missing on each side.
    """
    if set(reference) != set(candidate):
        only_ref = sorted(set(reference) - set(candidate))
        only_cand = sorted(set(candidate) - set(reference))
        raise ValueError(
            f"{candidate_name} vs {reference_name} {metric}: not the same questions "
            f"(only in {reference_name}: {', '.join(only_ref[:5]) or 'none'}; "
            f"only in {candidate_name}: {', '.join(only_cand[:5]) or 'none'})"
        )
    if not reference:
        raise ValueError(f"{candidate_name} vs {reference_name} {metric}: no question to compare")
    qids = sorted(reference)
    ref = np.array([reference[q] for q in qids], dtype=np.float64)
    cand = np.array([candidate[q] for q in qids], dtype=np.float64)
    if decimals is not None:
        ref, cand = np.round(ref, decimals), np.round(cand, decimals)
    differences = cand - ref
    low, high = bootstrap_interval(differences, resamples, seed)
    return PairedComparison(
        metric=metric,
        reference=reference_name,
        candidate=candidate_name,
        questions=len(qids),
        better=int((differences > 0).sum()),
        worse=int((differences < 0).sum()),
        same=int((differences == 0).sum()),
        mean_reference=float(ref.mean()),
        mean_candidate=float(cand.mean()),
        difference=float(differences.mean()),
        low=low,
        high=high,
        resamples=resamples,
        seed=seed,
    )


def comparison_pairs(requires: Mapping[str, Sequence[str]], baseline: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(reference, candidate) pairs to compare: each method against the baseline's figures for it
    (when `baseline` lists it), then each method against each method it requires (read from
    `requires`, method name -> the names it requires: hybrid against bm25 and vector, rerank
    against hybrid), in the order of `requires`."""
    pairs = [(BASELINE, method) for method in requires if method in baseline]
    pairs += [(needed, method) for method, needs in requires.items() for needed in needs if needed in requires]
    return pairs


def _digits(c: PairedComparison) -> int:
    # Two decimals, unless the change would read "+0.00" although questions moved.
    return 4 if c.difference != 0 and abs(c.difference) < 0.005 else 2


def _signed(value: float, digits: int) -> str:
    return f"{value:+.{digits}f}"


def summary_line(c: PairedComparison) -> str:
    """The PR summary's compact form: 'hybrid mrr 0.61 -> 0.64 (+0.03, 95 % CI -0.01..+0.07;
    3 better, 1 worse, 21 same)'; 'hybrid vs vector mrr ...' between two methods. Figures have
    two decimals, four when the difference is not 0 but smaller than 0.005."""
    who = c.candidate if c.reference == BASELINE else f"{c.candidate} vs {c.reference}"
    d = _digits(c)
    return (
        f"{who} {c.metric} {c.mean_reference:.{d}f} -> {c.mean_candidate:.{d}f} "
        f"({_signed(c.difference, d)}, 95 % CI {_signed(c.low, d)}..{_signed(c.high, d)}; "
        f"{c.better} better, {c.worse} worse, {c.same} same)"
    )


def render_comparisons(comparisons: Sequence[PairedComparison]) -> list[str]:
    """The report's Markdown section: one table row per comparison (decimals as in `summary_line`).
    Empty without comparisons."""
    if not comparisons:
        return []
    first = comparisons[0]
    lines = [
        "### Paired comparisons",
        "",
        f"Question by question; the interval is a paired bootstrap 95 % interval of the mean difference "
        f"({first.resamples:,} resamples, seed {first.seed}). An interval that contains 0 means the "
        "questions cannot tell this change from chance.",
        "",
        "| Candidate | Against | Metric | Before | After | Difference | 95 % interval | Better | Worse | Same |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        d = _digits(c)
        lines.append(
            f"| {c.candidate} | {c.reference} | {c.metric} | {c.mean_reference:.{d}f} | {c.mean_candidate:.{d}f} "
            f"| {_signed(c.difference, d)} | {_signed(c.low, d)}..{_signed(c.high, d)} "
            f"| {c.better} | {c.worse} | {c.same} |"
        )
    lines.append("")
    return lines


def comparisons_to_dicts(comparisons: Sequence[PairedComparison]) -> list[dict[str, object]]:
    """JSON-ready: one dict per comparison, unrounded."""
    return [asdict(c) for c in comparisons]
