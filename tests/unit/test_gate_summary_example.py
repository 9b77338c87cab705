"""The example job summary in docs/gate.md ("The pull-request flow") is what the required check
writes, word for word: generated here from a pull request on the FIXTURE project of
trust_project.py (q2 made worse, q3 reworded), by the workflow's step as eval.yml writes it.

After a change of the summary's layout or words: `RETRIEVAL_WRITE_EXAMPLE=1 pytest
tests/unit/test_gate_summary_example.py` rewrites the block, then read its diff.
"""

from __future__ import annotations

import os
from pathlib import Path

from pull_request import PullRequest
from trust_project import GOOD, QUESTIONS, write_questions, write_ranks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "gate.md"
START, END = "<!-- example-gate-summary:start -->\n", "<!-- example-gate-summary:end -->"
FENCE = "````"


def _example(tmp_path: Path) -> str:
    pr = PullRequest(tmp_path)
    write_ranks(pr.root, {**GOOD, "q2": ["d5", "d1"]})
    reworded = [(i, "comment lancer la restauration" if i == "q3" else t, y, r) for i, t, y, r in QUESTIONS]
    write_questions(pr.root, reworded)
    pr.commit("search: a new scoring; q3 reworded")
    check = pr.required_check()
    assert check.status == 1
    # The evaluation report that follows holds this machine's times: the example stops before it.
    verdicts = check.summary.split("\n<details><summary>Evaluation details</summary>", 1)[0]
    return f"{FENCE}markdown\n{verdicts.rstrip()}\n{FENCE}\n"


def test_the_documented_summary_is_the_one_the_required_check_writes(tmp_path: Path) -> None:
    example = _example(tmp_path)
    page = PAGE.read_text(encoding="utf-8")
    before, rest = page.split(START, 1)
    shown, after = rest.split(END, 1)
    if os.environ.get("RETRIEVAL_WRITE_EXAMPLE"):
        PAGE.write_text(before + START + example + END + after, encoding="utf-8")
        shown = example
    assert shown == example
    # The example shows what a reviewer needs: the verdict, the words, the questions, the edit.
    assert example.splitlines()[2].startswith("## Retrieval gate against `origin/main`: FAILED, ")
    assert "### What got worse" in example and "### Questions edited" in example
