"""The base branch's own `k` decides what is compared against it: a pull request that changes the
cut-off cannot change what its base branch gates. Made as a pull request makes it (the
PullRequest fixture of test_pull_request_bypasses.py: a real git repository, `main` holding the
gate, checked by the workflow's required step).

The base: k = 2; q2 has two relevant documents (d2, d3), both in its top 2.
"""

from __future__ import annotations

import json
from pathlib import Path

from pull_request import PullRequest
from trust_project import GOOD, QUESTIONS, write_questions, write_ranks

REASON = "d3 is second best for q2 now"
TWO = [(i, t, y, ["d2", "d3"] if i == "q2" else r) for i, t, y, r in QUESTIONS]
BASE = {**GOOD, "q2": ["d2", "d3", "d1"]}
# q2's second answer (d3) falls from rank 2 to rank 4: out of the top 2, in the top 4; MRR unchanged.
WORSE = {**GOOD, "q2": ["d2", "d1", "d5", "d3"]}


def _set_k(pr: PullRequest, was: int, now: int) -> None:
    toml = pr.root / "retrieval.toml"
    toml.write_text(toml.read_text().replace(f"k = {was}\n", f"k = {now}\n"))


def test_a_cut_off_raised_by_the_pull_request_does_not_hide_a_drop_at_the_base_branchs_k(tmp_path: Path) -> None:
    pr = PullRequest(tmp_path)
    with pr.on_main("q2 has two answers"):
        write_questions(pr.root, TWO)
        write_ranks(pr.root, BASE)
    # The pull request: k = 4, d3 pushed to rank 4 (recall@4 stays 1.0), its own baseline made again.
    _set_k(pr, 2, 4)
    write_ranks(pr.root, WORSE)
    pr.fresh_baseline()
    pr.commit("k = 4, q2's second answer lower")
    check = pr.required_check()
    assert check.status == 1, check.stdout + check.stderr
    assert set(check.printed) == {"table-recall@2", "table-recall@2-exact"}, check.stdout
    assert check.printed["table-recall@2"].startswith(
        "table recall@2 fell below the baseline of origin/main: baseline 1.0000, current 0.8750, delta -0.1250"
    )
    # The reviewer is told which cut-off the base's figures were computed at, and this run's.
    assert "origin/main gates recall at k = 2 (its k; this run's: 4): compared with it at that cut-off" in (
        check.summary
    )
    accepted = pr.accept(REASON)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    check = pr.required_check()
    assert (check.status, check.printed) == (0, {}), check.stdout + check.stderr
    assert f"table recall@2: 1.0000 -> 0.8750 (against `origin/main`): {REASON}" in check.summary


def test_a_cut_off_lowered_by_the_pull_request_is_measured_at_the_base_branchs_deeper_k(tmp_path: Path) -> None:
    # 30 documents: the run keeps 20 ids of a ranking unless k asks for more; main gates recall@24.
    pr = PullRequest(tmp_path)
    corpus = pr.root / "data" / "qa" / "corpus.jsonl"
    deep = [f"x{n:02}" for n in range(25)]
    with pr.on_main("k = 24, q1's answer at rank 22"):
        with corpus.open("a") as f:
            f.writelines(json.dumps({"id": d, "title": d, "text": f"note {d}"}) + "\n" for d in deep)
        _set_k(pr, 2, 24)
        write_ranks(pr.root, {**GOOD, "q1": [*deep[:21], "d1"]})
    # The pull request lowers k and changes no ranking: against main, its recall@24 is unchanged.
    _set_k(pr, 24, 2)
    pr.fresh_baseline()
    pr.commit("k = 2")
    check = pr.required_check()
    assert (check.status, check.printed) == (0, {}), check.stdout + check.stderr
    assert "origin/main gates recall at k = 24 (its k; this run's: 2)" in check.summary
