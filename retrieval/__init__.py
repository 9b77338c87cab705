"""Retrieval-quality regression suite for RAG systems.

The flow: dataset -> pipeline of methods -> Run -> metrics, failures, remedies -> report,
each method's calls recorded in its own cassette and replayed with the network closed.
"""

from retrieval.config import Profile, Settings, load_settings
from retrieval.dataset import Dataset, DatasetError, Document, Question, load_dataset
from retrieval.evaluate import evaluate
from retrieval.methods.base import Context, Method
from retrieval.metrics import hit_rate_at_k, ndcg_at_k, recall_at_k, reciprocal_rank
from retrieval.ranking import Ranking
from retrieval.report import build_report, render_markdown
from retrieval.run import Run

__all__ = [
    "Context",
    "Dataset",
    "DatasetError",
    "Document",
    "Method",
    "Profile",
    "Question",
    "Ranking",
    "Run",
    "Settings",
    "build_report",
    "evaluate",
    "hit_rate_at_k",
    "load_dataset",
    "load_settings",
    "ndcg_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "render_markdown",
]
