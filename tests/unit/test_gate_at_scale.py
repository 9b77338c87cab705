"""A regression on a real-size held-out set names every question that got worse, in the job
summary of the workflow's required check.

The set is made by the project's generator (benchmarks/scale.py --project: 10,000 French-like
documents, 1,000 questions with 1 or 2 relevant documents, three question types): a FIXTURE of
synthetic data, the same that measures the gate's time at scale. `main` gates bm25 on it; the
pull request lowers bm25's length normalisation (`bm25_b`), which moves a few hundred rankings.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pull_request import publish, required_check
from trust_project import git

from retrieval.cli import main

ROOT = Path(__file__).resolve().parents[2]
# 10,000 documents analysed, three processes (the generator, the gate, the workflow's step).
pytestmark = pytest.mark.slow


def _reciprocal_rank(ids: list[str], relevant: set[str]) -> float:
    # Written out here, apart from retrieval.measures: MRR@10, 1 / rank of the first relevant id.
    return next((1 / rank for rank, d in enumerate(ids[:10], 1) if d in relevant), 0.0)


def _listed(summary: str, heading: str) -> list[str]:
    """The question ids of one "What got worse" table (its folded rows included)."""
    section = summary.split(heading, 1)[1].split("\n#### ", 1)[0].split("\n### ", 1)[0]
    return re.findall(r"^\| `(q-\d+)` \|", section, re.M)


def test_a_regression_on_a_held_out_set_of_a_thousand_questions_names_every_question_that_got_worse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = tmp_path / "work"
    generate = [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--documents", "10000"]
    generated = subprocess.run(
        [*generate, "--questions", "1000", "--project", str(top)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert generated.returncode == 0, generated.stderr
    monkeypatch.chdir(top)
    assert main(["--gate", "--update-baseline"]) == 0
    publish(top, tmp_path / "origin.git")
    config = top / "retrieval.toml"
    config.write_text(config.read_text() + "bm25_b = 0.1\n")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "bm25: less length normalisation")
    check = required_check(top, top)
    assert check.status == 1
    assert {"bm25-mrr", "bm25-recall@5", "configuration"} <= set(check.printed)
    # Every question whose reciprocal rank fell against main's baseline, computed apart from the gate.
    base = json.loads(git(top, "show", "main:baselines/metrics.json"))["profiles"]["local"]["methods"]["bm25"]
    lines = (top / "reports" / "run.jsonl").read_text().splitlines()[1:]
    worse = []
    for line in lines:
        row = json.loads(line)
        now = round(_reciprocal_rank(row["methods"]["bm25"]["ids"], set(row["relevant"])), 4)
        if now < base["reciprocal_ranks"][row["question"]]:
            worse.append(row["question"])
    assert len(lines) == 1000 and len(worse) > 20  # more than the table shows before it folds
    listed = _listed(check.summary, "#### bm25 mrr: ")
    assert sorted(listed) == sorted(worse)
    # Each with its text and the ranks its relevant documents had and have.
    first = json.loads(next(line for line in lines if json.loads(line)["question"] == listed[0]))
    row = next(r for r in check.summary.splitlines() if r.startswith(f"| `{listed[0]}` |"))
    assert row.split(" | ")[1] == first["text"]
    assert f"`{first['relevant'][0]}`" in row.split(" | ")[2]
