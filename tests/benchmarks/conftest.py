"""Fixtures for the speed benchmarks: the demo set and a synthetic workload (bench_data.py).

Both are built on first use: the default test run skips every benchmark before setup,
so it never pays for them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_data import Workload, build_workload

from retrieval.data.dataset import Dataset, load_dataset

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"


@pytest.fixture(scope="session")
def workload() -> Workload:
    return build_workload()


@pytest.fixture(scope="session")
def demo() -> Dataset:
    if not (DEMO / "corpus.jsonl").is_file():
        pytest.skip("data/demo not written yet")
    return load_dataset(DEMO)
