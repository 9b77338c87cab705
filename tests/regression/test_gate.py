"""This repository's retrieval-quality gate (the design card's `tests/regression/`).

The plugin parametrizes `test_gate` with the gate's checks, read from `[tool.retrieval]` in
pyproject.toml and from baselines/ before anything is evaluated: `test_gate[gate]`,
`test_gate[bm25-recall@5]`, `test_gate[hybrid-top-10]`... A failure's node id re-runs it:
`pytest "tests/regression/test_gate.py::test_gate[bm25-recall@5]"`.
"""

from retrieval import test_gate

__all__ = ["test_gate"]
