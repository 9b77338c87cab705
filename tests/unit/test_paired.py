"""Paired comparisons: the vectorised bootstrap against a plain-Python reference drawing the
same resamples, counts, pairs derived from `requires`, renderers, and the demo's baseline."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from demo_fixture import DEMO_BASELINE, demo_dataset, demo_settings

from retrieval.measures.paired import (
    RESAMPLES,
    SEED,
    PairedComparison,
    bootstrap_draws,
    bootstrap_interval,
    compare,
    comparison_pairs,
    comparisons_to_dicts,
    render_comparisons,
    summary_line,
)


def _reference_interval(differences: list[float], resamples: int, seed: int) -> tuple[float, float]:
    """Plain Python: the same resampled positions, one exact mean per resample, sorted, and the
    2.5 % and 97.5 % quantiles by linear interpolation between the two nearest means."""
    n = len(differences)
    means: list[float] = []
    for chunk in bootstrap_draws(n, resamples, seed):
        for row in chunk.tolist():
            means.append(math.fsum(differences[i] for i in row) / n)
    means.sort()

    def quantile(q: float) -> float:
        position = q * (len(means) - 1)
        below = math.floor(position)
        above = min(below + 1, len(means) - 1)
        return means[below] + (means[above] - means[below]) * (position - below)

    return quantile(0.025), quantile(0.975)


@pytest.mark.parametrize(("n", "resamples", "seed"), [(25, 2_000, SEED), (7, 1_500, 3), (200, 1_000, 0), (1, 10, 5)])
def test_bootstrap_matches_the_plain_reference(n: int, resamples: int, seed: int) -> None:
    rng = random.Random(n)
    # Differences as recall and reciprocal ranks give them: multiples of 1/2, 1/3, 1/k.
    differences = [rng.choice([0, 0, 0, 1, -1, 0.5, -0.5, 1 / 3, -0.25]) for _ in range(n)]
    low, high = bootstrap_interval(differences, resamples, seed)
    ref_low, ref_high = _reference_interval(differences, resamples, seed)
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)
    assert low <= sum(differences) / n <= high


def test_draws_are_seeded_bounded_and_chunked() -> None:
    first = np.concatenate(list(bootstrap_draws(30, 2_500, 4)))
    again = np.concatenate(list(bootstrap_draws(30, 2_500, 4)))
    other = np.concatenate(list(bootstrap_draws(30, 2_500, 5)))
    assert first.shape == (2_500, 30)
    assert [len(c) for c in bootstrap_draws(30, 2_500, 4)] == [1_000, 1_000, 500]
    assert (first == again).all()
    assert not (first == other).all()
    assert first.min() == 0 and first.max() == 29
    # Every question is drawn about equally often: 75,000 draws, 2,500 expected per question.
    counts = np.bincount(first.ravel(), minlength=30)
    assert counts.min() > 2_200 and counts.max() < 2_800


def test_constant_differences_give_a_point_interval() -> None:
    assert bootstrap_interval([0.25] * 40) == (0.25, 0.25)
    assert bootstrap_interval([0.0] * 3) == (0.0, 0.0)


def test_compare_counts_and_means() -> None:
    reference = {"q1": 1.0, "q2": 0.5, "q3": 0.0, "q4": 1.0}
    candidate = {"q4": 1.0, "q3": 0.25, "q2": 1.0, "q1": 0.0}  # another key order: same result
    c = compare(reference, candidate, "mrr", "vector", "hybrid", resamples=1_000)
    assert (c.better, c.worse, c.same, c.questions) == (2, 1, 1, 4)
    assert (c.mean_reference, c.mean_candidate, c.difference) == (0.625, 0.5625, -0.0625)
    assert (c.low, c.high) == bootstrap_interval([-1.0, 0.5, 0.25, 0.0], 1_000)
    assert c.moved
    assert not compare(reference, reference, "mrr", "a", "b", resamples=10).moved


def test_compare_refuses_different_questions() -> None:
    with pytest.raises(ValueError) as caught:
        compare({"q1": 1.0, "q2": 0.0}, {"q1": 1.0, "q3": 0.0}, "recall@5", "baseline", "bm25")
    assert (
        str(caught.value)
        == "bm25 vs baseline recall@5: not the same questions (only in baseline: q2; only in bm25: q3)"
    )
    with pytest.raises(ValueError) as caught:
        compare({}, {}, "mrr", "baseline", "bm25")
    assert str(caught.value) == "bm25 vs baseline mrr: no question to compare"


def test_bad_bootstrap_arguments_are_refused() -> None:
    for args, message in [
        (([],), "bootstrap: need at least one paired difference"),
        (([1.0], 0), "bootstrap: resamples must be >= 1, got 0"),
        (([1.0], 10, 0, 1.0), "bootstrap: confidence must be between 0 and 1, got 1.0"),
    ]:
        with pytest.raises(ValueError) as caught:
            bootstrap_interval(*args)  # type: ignore[arg-type]
        assert str(caught.value) == message


def test_pairs_come_from_requires_not_from_names() -> None:
    requires = {"bm25": (), "vector": (), "hybrid": ("bm25", "vector"), "rerank": ("hybrid",), "mine": ("bm25",)}
    assert comparison_pairs(requires, baseline=["bm25", "vector", "hybrid"]) == [
        ("baseline", "bm25"),
        ("baseline", "vector"),
        ("baseline", "hybrid"),
        ("bm25", "hybrid"),
        ("vector", "hybrid"),
        ("hybrid", "rerank"),
        ("bm25", "mine"),
    ]
    # A requirement that was not run (skipped) has nothing to compare with.
    assert comparison_pairs({"dense": (), "fused": ("sparse", "dense")}) == [("dense", "fused")]


def _comparison(**changes: object) -> PairedComparison:
    fields: dict[str, object] = {
        "metric": "mrr",
        "reference": "baseline",
        "candidate": "hybrid",
        "questions": 25,
        "better": 3,
        "worse": 1,
        "same": 21,
        "mean_reference": 0.6124,
        "mean_candidate": 0.6431,
        "difference": 0.0307,
        "low": -0.0083,
        "high": 0.0716,
        "resamples": RESAMPLES,
        "seed": SEED,
    }
    fields.update(changes)
    return PairedComparison(**fields)  # type: ignore[arg-type]


def test_summary_line_and_table() -> None:
    against_baseline = _comparison()
    between_methods = _comparison(reference="vector", metric="recall@5", difference=-0.22, low=-0.4, high=-0.08)
    assert summary_line(against_baseline) == (
        "hybrid mrr 0.61 -> 0.64 (+0.03, 95 % CI -0.01..+0.07; 3 better, 1 worse, 21 same)"
    )
    assert summary_line(between_methods) == (
        "hybrid vs vector recall@5 0.61 -> 0.64 (-0.22, 95 % CI -0.40..-0.08; 3 better, 1 worse, 21 same)"
    )
    assert render_comparisons([against_baseline, between_methods]) == [
        "### Paired comparisons",
        "",
        "Question by question; the interval is a paired bootstrap 95 % interval of the mean difference "
        "(10,000 resamples, seed 11). An interval that contains 0 means the questions cannot tell this "
        "change from chance.",
        "",
        "| Candidate | Against | Metric | Before | After | Difference | 95 % interval | Better | Worse | Same |",
        "|---|---|---|---|---|---|---|---|---|---|",
        "| hybrid | baseline | mrr | 0.61 | 0.64 | +0.03 | -0.01..+0.07 | 3 | 1 | 21 |",
        "| hybrid | vector | recall@5 | 0.61 | 0.64 | -0.22 | -0.40..-0.08 | 3 | 1 | 21 |",
        "",
    ]
    assert render_comparisons([]) == []
    [as_dict] = comparisons_to_dicts([against_baseline])
    assert as_dict["low"] == -0.0083 and as_dict["better"] == 3 and as_dict["reference"] == "baseline"
    assert json.loads(json.dumps(as_dict)) == as_dict


def test_demo_hybrid_against_vector_from_the_fixture_baseline() -> None:
    methods = json.loads(DEMO_BASELINE.read_text(encoding="utf-8"))["profiles"]["local"]["methods"]
    recall = compare(
        methods["vector"]["recall_per_question"],
        methods["hybrid"]["recall_per_question"],
        "recall@5",
        "vector",
        "hybrid",
    )
    mrr = compare(
        methods["vector"]["reciprocal_ranks"], methods["hybrid"]["reciprocal_ranks"], "mrr", "vector", "hybrid"
    )
    assert summary_line(recall) == (
        "hybrid vs vector recall@5 0.86 -> 0.64 (-0.22, 95 % CI -0.40..-0.08; 0 better, 6 worse, 19 same)"
    )
    assert summary_line(mrr) == (
        "hybrid vs vector mrr 0.75 -> 0.61 (-0.13, 95 % CI -0.24..-0.03; 1 better, 9 worse, 15 same)"
    )


def test_a_replayed_run_against_its_baseline_needs_its_rounding() -> None:

    from retrieval.evaluation.evaluate import evaluate
    from retrieval.measures.metrics import score_run

    settings = demo_settings()
    run = evaluate(demo_dataset(), settings, mode="replay", methods=["vector"])
    current = {q: v["mrr"] for q, v in score_run(run)["vector"].per_question.items()}
    baseline = json.loads(DEMO_BASELINE.read_text(encoding="utf-8"))
    recorded = baseline["profiles"]["local"]["methods"]["vector"]["reciprocal_ranks"]
    # Unrounded, q13, q14 and q18 (rank 3: 1/3 against 0.3333) and q11 (1/7 against 0.1429) "move".
    raw = compare(recorded, current, "mrr", "baseline", "vector", resamples=100)
    assert (raw.better, raw.worse, raw.same) == (3, 1, 21)
    same = compare(recorded, current, "mrr", "baseline", "vector", resamples=100, decimals=4)
    assert (same.better, same.worse, same.same, same.difference, same.low, same.high) == (0, 0, 25, 0.0, 0.0, 0.0)


def test_a_small_change_is_shown_with_four_decimals() -> None:
    # The re-recording drift of the demo's vector mrr (0.7424 -> 0.7457, one question moved):
    # at two decimals it would read "+0.00" although a question moved.
    small = _comparison(
        metric="mrr",
        candidate="vector",
        better=1,
        worse=0,
        same=24,
        mean_reference=0.7423809523809524,
        mean_candidate=0.7457142857142859,
        difference=0.0033333333333333327,
        low=0.0,
        high=0.009999999999999998,
    )
    assert summary_line(small) == (
        "vector mrr 0.7424 -> 0.7457 (+0.0033, 95 % CI +0.0000..+0.0100; 1 better, 0 worse, 24 same)"
    )
    assert (
        render_comparisons([small])[-2]
        == "| vector | baseline | mrr | 0.7424 | 0.7457 | +0.0033 | +0.0000..+0.0100 | 1 | 0 | 24 |"
    )


def test_scipy_bootstrap_gives_the_figures_of_the_former_numpy_interval() -> None:
    # The interval was computed here with numpy (the same draws, np.quantile); it is scipy's now.
    # On 200 seeded inputs the two agree to the last bit (159) or within 2.2e-16 (scipy
    # interpolates at the percentile 100 * alpha), so no figure printed with 4 decimals moves.
    rng = np.random.default_rng(0)
    identical = 0
    draws: dict[int, list[np.ndarray]] = {}  # the seeded draws depend on n alone: drawn once per n
    for _ in range(200):
        n = int(rng.integers(2, 60))
        differences = np.round(rng.normal(size=n) * (rng.random() < 0.5) + rng.integers(-1, 2, size=n), 4)
        if n not in draws:
            draws[n] = list(bootstrap_draws(n, RESAMPLES, SEED))
        means = np.concatenate([differences[d].mean(axis=1) for d in draws[n]])
        tail = (1 - 0.95) / 2  # as the former code computed it
        former = tuple(float(x) for x in np.quantile(means, [tail, 1 - tail]))
        now = bootstrap_interval(differences)
        assert now == pytest.approx(former, abs=2.3e-16, rel=0)
        identical += now == former
    assert identical > 100  # 159 with numpy 2 and scipy 1.17
