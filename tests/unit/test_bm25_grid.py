"""scripts/bm25_grid.py: BM25's k1 and b reach the index, and the demo's grid figures
(the measurement behind keeping the defaults k1 = 1.5, b = 0.75)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from demo_fixture import DEMO_DATA

ROOT = Path(__file__).resolve().parents[2]


def test_demo_grid_rows() -> None:
    spec = importlib.util.spec_from_file_location("bm25_grid", ROOT / "scripts" / "bm25_grid.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = module.grid(str(DEMO_DATA), [0.9, 1.5], [0.5, 0.75], 5)
    assert lines == [
        "| k1 | b | recall@5 | mrr | recall@5 identifiant | recall@5 paraphrase | recall@5 mixte |",
        "|---|---|---|---|---|---|---|",
        "| 0.9 | 0.5 | 0.6000 | 0.5080 | 1.0000 | 0.0000 | 1.0000 |",
        "| 0.9 | 0.75 | 0.6000 | 0.5280 | 1.0000 | 0.0000 | 1.0000 |",
        "| 1.5 | 0.5 | 0.6000 | 0.5533 | 1.0000 | 0.0000 | 1.0000 |",
        "| 1.5 (default) | 0.75 | 0.6000 | 0.5533 | 1.0000 | 0.0000 | 1.0000 |",
    ]
