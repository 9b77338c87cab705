"""The demo evaluated in replay mode from the committed cassettes, with rankings kept deep.

Stands for the change proposed to the lead: the Run keeps first-stage rankings (and the
reranker's candidate source) deeper than today's top 20. Here the evaluator's keep depth
is raised for the duration of the evaluation; with 64 documents, 100 keeps them all.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

import pytest

from retrieval.config import load_settings
from retrieval.dataset import Dataset, load_dataset
from retrieval.evaluate import evaluate
from retrieval.run import Run
from retrieval.sweeps import FusionSettings, Setup

ROOT = Path(__file__).resolve().parents[2]
# The built-in methods' declarations (method contract, issue 10), as plain data.
REQUIRES = {"bm25": (), "vector": (), "hybrid": ("bm25", "vector"), "rerank": ("hybrid",)}
CANDIDATE_SOURCES = {"rerank": "hybrid"}


@cache
def demo_run(kept: int) -> tuple[Dataset, Run, Setup]:
    """The demo run (replay, local profile) with every ranking kept to `kept`, and its Setup.

    Cached: the tests only read it."""
    evaluate_module = importlib.import_module("retrieval.evaluate")
    settings = load_settings(ROOT, environ={})
    dataset = load_dataset(ROOT / "data/demo")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        patch.setattr(evaluate_module, "LOG_DEPTH", kept)
        run = evaluate(dataset, settings)
    setup = Setup(
        requires=REQUIRES,
        candidate_sources=CANDIDATE_SOURCES,
        documents={d.id: (d.title, d.text) for d in dataset.documents},
        candidates=settings.candidates,
        fusion={"hybrid": FusionSettings(settings.rrf_k)},
        kept={m: kept for m in run.methods},
        depth=settings.depth,
        k=settings.k,
    )
    return dataset, run, setup
