"""The README cannot go stale: its demo table is the committed baseline, its two
fresh-machine commands are the documented ones, and `.ci/run` runs the test command."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

EVALUATE_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && python -m retrieval"
TEST_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && pytest -n auto"


@pytest.fixture(scope="module")
def readme_table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_table", ROOT / "scripts" / "readme_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("readme_table", module)
    spec.loader.exec_module(module)
    return module


def _shell_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```(?:sh|bash|console)\n(.*?)```", text, re.S)]


def test_demo_table_is_the_committed_baseline(readme_table: ModuleType) -> None:
    text = README.read_text(encoding="utf-8")
    start, end = text.find(readme_table.START), text.find(readme_table.END)
    assert 0 <= start < end, "README.md lost its demo-table markers"
    assert text[start : end + len(readme_table.END)] == readme_table.render_block(ROOT), (
        "README.md's demo table differs from baselines/metrics.json: run `python scripts/readme_table.py`"
    )


def test_table_follows_the_seed_layout(readme_table: ModuleType) -> None:
    baseline = {
        "profiles": {
            "local": {
                "dataset": "demo",
                "config": {
                    "k": 5,
                    "hybrid.rrf_k": 60,
                    "candidates": 20,
                    "embedding_model": "e5",
                    "embedding_provider": "openai",
                    "dimensions": 384,
                },
                "methods": {
                    m: {
                        "recall@5": r,
                        "mrr": 0.3333,
                        "by_type": {"mixte": {"recall@5": 1.0}, "paraphrase": {"recall@5": 0.125}},
                        "reciprocal_ranks": {"q1": 1.0, "q2": 0.0},
                    }
                    for m, r in (("vector", 0.855), ("bm25", 0.6))
                },
            }
        }
    }
    table = readme_table.render_table(baseline, "local", ["paraphrase", "mixte"])
    lines = table.splitlines()
    assert lines[0] == "| Method | Recall@5 | MRR | Recall@5 paraphrase | Recall@5 mixte |"
    assert lines[2] == "| bm25 | 0.60 | 0.33 | 0.12 | 1.00 |"
    assert lines[3].startswith("| vector | 0.8")
    assert "(2 questions)" in table and "Method settings: `hybrid.rrf_k` = 60." in table


def test_the_two_commands_are_in_the_readme() -> None:
    blocks = _shell_blocks(README.read_text(encoding="utf-8"))
    assert EVALUATE_COMMAND in blocks, "README.md must give the install-and-evaluate command in its own block"
    assert TEST_COMMAND in blocks, "README.md must give the install-and-test command in its own block"


def test_ci_runs_the_readme_test_command() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert TEST_COMMAND in lines, ".ci/run must run exactly the README's test command"
