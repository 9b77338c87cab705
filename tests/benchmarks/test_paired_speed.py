"""Speed of the paired bootstrap: 10,000 resamples of 1,000 questions (issue 11's target:
well under a second). Run with:  pytest tests/benchmarks/test_paired_speed.py --benchmark-only
Figures are in docs/performance.md."""

from __future__ import annotations

import numpy as np
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from retrieval.measures.paired import RESAMPLES, compare

pytestmark = pytest.mark.benchmark

QUESTIONS = 1_000


def test_paired_bootstrap_1000_questions(benchmark: BenchmarkFixture) -> None:
    # Per-question values shaped like MRR (reciprocal ranks of 1 to 10, or 0), two methods
    # that agree on most questions: a seeded synthetic workload.
    rng = np.random.default_rng(0)
    ranks = rng.integers(1, 12, size=QUESTIONS)
    reference = {f"q{i:04d}": (1 / r if r <= 10 else 0.0) for i, r in enumerate(ranks)}
    moved = np.where(rng.random(QUESTIONS) < 0.2, rng.integers(1, 12, size=QUESTIONS), ranks)
    candidate = {f"q{i:04d}": (1 / r if r <= 10 else 0.0) for i, r in enumerate(moved)}
    benchmark.group = "paired bootstrap"
    result = benchmark.pedantic(compare, args=(reference, candidate, "mrr", "a", "b"), rounds=10)
    assert result.resamples == RESAMPLES
    assert result.questions == QUESTIONS
    assert result.low <= result.difference <= result.high
