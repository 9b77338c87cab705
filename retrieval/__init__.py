"""Retrieval-quality regression suite for RAG systems.

The flow: dataset -> pipeline of methods -> Run -> metrics, failures, remedies -> report,
each method's calls recorded in its own cassette and replayed with the network closed.

The names below are the public API (docs/api.md): what an adopter imports, from here. A name
is never removed or renamed without a deprecated alias and a CHANGELOG line; the module paths
of 0.1 are such aliases until 0.3.0 (retrieval.moved).
"""

import sys
import types
from typing import TYPE_CHECKING, Any

from retrieval import moved
from retrieval.version import __version__ as __version__  # re-exported: retrieval.__version__

moved.install()

# The names below load on first use (PEP 562): `import retrieval.x` for one small module, as
# pytest does for the plugin in every run of a repository that installs the package, then
# costs that module alone instead of the whole evaluator (numpy, scipy, the report: ~0.3 s).
_EXPORTS = {
    "Profile": "retrieval.config",
    "Settings": "retrieval.config",
    "load_settings": "retrieval.config",
    "Dataset": "retrieval.data.dataset",
    "DatasetError": "retrieval.data.dataset",
    "Document": "retrieval.data.dataset",
    "Question": "retrieval.data.dataset",
    "load_dataset": "retrieval.data.dataset",
    "evaluate": "retrieval.evaluation.evaluate",
    "Context": "retrieval.methods.base",
    "Method": "retrieval.methods.base",
    "hit_rate_at_k": "retrieval.measures.metrics",
    "ndcg_at_k": "retrieval.measures.metrics",
    "recall_at_k": "retrieval.measures.metrics",
    "reciprocal_rank": "retrieval.measures.metrics",
    "Ranking": "retrieval.run.ranking",
    "RankingError": "retrieval.run.ranking",
    "ranking_from_ids": "retrieval.run.ranking",
    "top_k": "retrieval.run.ranking",
    "Calls": "retrieval.run.declaration",
    "Declaration": "retrieval.run.declaration",
    "DeclarationError": "retrieval.run.declaration",
    "Usage": "retrieval.run.cost",
    "ConfigError": "retrieval.config",
    "test_gate": "retrieval.gate.plugin",
    "RetrievalDeprecationWarning": "retrieval.moved",
    "build_report": "retrieval.report.build",
    "render_markdown": "retrieval.report.sections",
    "Run": "retrieval.run.results",
}

if TYPE_CHECKING:
    from retrieval.config import ConfigError, Profile, Settings, load_settings
    from retrieval.data.dataset import Dataset, DatasetError, Document, Question, load_dataset
    from retrieval.evaluation.evaluate import evaluate
    from retrieval.gate.plugin import test_gate
    from retrieval.measures.metrics import hit_rate_at_k, ndcg_at_k, recall_at_k, reciprocal_rank
    from retrieval.methods.base import Context, Method
    from retrieval.moved import RetrievalDeprecationWarning
    from retrieval.report.build import build_report
    from retrieval.report.sections import render_markdown
    from retrieval.run.cost import Usage
    from retrieval.run.declaration import Calls, Declaration, DeclarationError
    from retrieval.run.ranking import Ranking, RankingError, ranking_from_ids, top_k
    from retrieval.run.results import Run


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'retrieval' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


class _Package(types.ModuleType):
    """This package, whose exported names stay what they name when a submodule of the same
    name loads: the import system sets a loaded submodule as an attribute of its package, and
    0.1's `retrieval.evaluate`, a deprecated alias module (retrieval.moved), would then replace
    the function `retrieval.evaluate`."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "Calls",
    "ConfigError",
    "Context",
    "Dataset",
    "DatasetError",
    "Declaration",
    "DeclarationError",
    "Document",
    "Method",
    "Profile",
    "Question",
    "Ranking",
    "RankingError",
    "RetrievalDeprecationWarning",
    "Run",
    "Settings",
    "Usage",
    "build_report",
    "evaluate",
    "hit_rate_at_k",
    "load_dataset",
    "load_settings",
    "ndcg_at_k",
    "ranking_from_ids",
    "recall_at_k",
    "reciprocal_rank",
    "render_markdown",
    "test_gate",
    "top_k",
]
