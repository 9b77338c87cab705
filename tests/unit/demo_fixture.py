"""FIXTURE: the demo as the unit tests know it, in tests/unit/fixtures/demo/.

A small project of its own (retrieval.toml, data/demo, cassettes/local, baselines/metrics.json):
frozen copies of the repository's demo, of the local profile's real recording and of the baseline
computed from it. The repository's own copies belong to the gate: re-recording them on another
machine, changing rrf_k or pointing `dataset` elsewhere must move the gate, not the unit tests
(issue 9), so the figures these tests pin come from here.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from retrieval.config import Settings, load_settings
from retrieval.data.dataset import Dataset, load_dataset

DEMO_PROJECT = Path(__file__).resolve().with_name("fixtures") / "demo"
DEMO_DATA = DEMO_PROJECT / "data" / "demo"
DEMO_CASSETTES = DEMO_PROJECT / "cassettes"
DEMO_BASELINE = DEMO_PROJECT / "baselines" / "metrics.json"


def demo_settings(**changes: Any) -> Settings:
    """The fixture project's settings (package defaults, its retrieval.toml, no environment
    variable), with `changes` applied. Replays never write the cache; a test that records or
    runs live passes `cache=` a folder of its own."""
    return replace(load_settings(DEMO_PROJECT, environ={}), **changes)


@cache
def demo_dataset() -> Dataset:
    """The fixture's demo dataset, loaded once (a Dataset is frozen: tests derive copies with replace)."""
    return load_dataset(DEMO_DATA)
