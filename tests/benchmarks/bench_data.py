"""Data for the speed benchmarks: a synthetic corpus, analysed and ranked once.

The corpus comes from benchmarks/scale.py (the scale script), at a size that keeps the
whole suite to a couple of minutes; the script itself runs the full 1,000 questions x
100,000 documents.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from retrieval.data.analyzer import analyze, analyze_many
from retrieval.data.dataset import Dataset
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.vector import VectorMethod
from retrieval.run.ranking import Ranking

ROOT = Path(__file__).resolve().parents[2]

N_DOCUMENTS = 20_000
N_QUESTIONS = 200
DIM = 384
DEPTH = 1000  # the tool's default ranking depth


def load_scale_script() -> ModuleType:
    """benchmarks/scale.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("scale_script", ROOT / "benchmarks" / "scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Workload:
    """A synthetic dataset, its embeddings, its analysed text and its first rankings."""

    dataset: Dataset
    context: Context
    corpus_tokens: list[list[str]]
    query_tokens: list[list[str]]
    bm25: list[Ranking]
    vector: list[Ranking]


def build_workload() -> Workload:
    """The synthetic workload: N_DOCUMENTS x N_QUESTIONS, seed 0."""
    synthetic = load_scale_script().generate(N_DOCUMENTS, N_QUESTIONS, DIM, seed=0)
    dataset = synthetic.dataset
    context = Context(
        dataset=dataset,
        depth=DEPTH,
        question_vectors=synthetic.question_vectors,
        document_vectors=synthetic.document_vectors,
    )
    return Workload(
        dataset=dataset,
        context=context,
        corpus_tokens=analyze_many(d.content for d in dataset.documents),
        query_tokens=[analyze(q.text) for q in dataset.questions],
        bm25=BM25Method().rank(context),
        vector=VectorMethod().rank(context),
    )
