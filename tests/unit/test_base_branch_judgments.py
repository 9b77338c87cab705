"""The base branch's judgments and its judging settings decide what is compared against it:
`relevant_grade`, the grades of judgments.jsonl, `unjudged`. Each way a pull request could lower
what its base branch gates through them is made as a pull request makes it (the PullRequest
fixture of test_pull_request_bypasses.py: a real git repository, `main` holding the gate, checked
by the workflow's required step), and fails that check unless an acceptance with a reason is
recorded.

The base: q2's answer d2 is of grade 1 (the default `relevant_grade`), q1's and q3's (d1) of
grade 2; q4 has two relevant documents, d4 of grade 2 and d1 of grade 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pull_request import Check, PullRequest
from trust_project import GOOD, QUESTIONS, write_questions, write_ranks

REASON = "q2 is out of scope for this release"

# Shell re-runs of the required step, as test_pull_request_bypasses.py's: the slow set (CI's `slow` job).
pytestmark = pytest.mark.slow

GRADES = {"q1": {"d1": 2}, "q2": {"d2": 1}, "q3": {"d1": 2}, "q4": {"d4": 2, "d1": 1}}
GRADED = [(i, t, y, GRADES[i]) for i, t, y, _ in QUESTIONS]
WORSE = {**GOOD, "q2": ["d5", "d3"]}  # q2's answer (d2) out of the top 2 and the top 10


def _graded(made: PullRequest) -> None:
    write_questions(made.root, GRADED)  # type: ignore[arg-type]  # relevant as id -> grade


@pytest.fixture
def pr(tmp_path: Path) -> PullRequest:
    return PullRequest.from_main(tmp_path, "graded judgments", _graded)


def _judge(pr: PullRequest, question: str, document: str, grade: int) -> None:
    line = {"question": question, "document": document, "grade": grade, "source": "human:ana"}
    with (pr.root / "data" / "qa" / "judgments.jsonl").open("a") as f:
        f.write(json.dumps({**line, "date": "2026-12-01T09:00:00Z"}) + "\n")


def _fails(pr: PullRequest, item: str, words: str) -> Check:
    """The required check fails, `item` among its failures, said in `words` (its opening); the
    check, for what else a test reads in it (run again, it would say the same of the same commit)."""
    check = pr.required_check()
    assert check.status == 1, check.stdout + check.stderr
    assert item in check.printed, check.stdout + check.stderr
    assert check.printed[item].startswith(words), check.printed[item]
    return check


def _passes_once_accepted(pr: PullRequest, shown: str) -> None:
    """With the drop recorded with its reason, the required check passes and the summary shows it."""
    accepted = pr.accept(REASON)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    check = pr.required_check()
    assert (check.status, check.printed) == (0, {}), check.stdout + check.stderr
    assert f"{shown} (against `origin/main`): {REASON}" in check.summary


MAIN_MRR = "table mrr fell below the baseline of origin/main: baseline 1.0000, current 0.8125, delta -0.1875"


def test_a_relevant_grade_raised_by_the_pull_request_does_not_take_a_question_out_of_the_base_branchs_gate(
    pr: PullRequest,
) -> None:
    # relevant_grade 2: q2 (its answer of grade 1) is left out of the pull request's own run.
    pr.configure("relevant_grade = 2\n")
    write_ranks(pr.root, WORSE)
    pr.fresh_baseline()
    pr.commit("relevant_grade 2")
    assert pr.gate().returncode == 0  # its own gate: q2 is no longer measured
    check = _fails(pr, "table-mrr", MAIN_MRR)  # q2 measured as main judges it: d2 relevant, now at rank 4
    assert "main counts a document relevant from grade 1 (its relevant_grade; this run's: 2)" in check.stdout
    _passes_once_accepted(pr, "table mrr: 1.0000 -> 0.8125")


def test_a_relevant_grade_raised_on_a_question_that_keeps_a_relevant_document_is_measured_as_the_base_judges_it(
    pr: PullRequest,
) -> None:
    # q4 keeps d4 (grade 2) under relevant_grade 2; d1 (grade 1) is no longer relevant to the pull request.
    pr.configure("relevant_grade = 2\n")
    write_ranks(pr.root, {**GOOD, "q4": ["d4", "d3", "d2", "d5", "d1"]})  # d1 out of q4's top 2
    pr.fresh_baseline()
    pr.commit("relevant_grade 2, d1 lower")
    assert pr.gate().returncode == 0
    _fails(
        pr,
        "table-recall@2",
        "table recall@2 fell below the baseline of origin/main: baseline 1.0000, current 0.8750, delta -0.1250",
    )
    _passes_once_accepted(pr, "table recall@2: 1.0000 -> 0.8750")


def test_a_grade_lowered_in_the_judgments_file_does_not_take_a_question_out_of_the_base_branchs_gate(
    pr: PullRequest,
) -> None:
    # q2's only relevant document judged not relevant in judgments.jsonl: q2 leaves the pull request's run.
    _judge(pr, "q2", "d2", 0)
    write_ranks(pr.root, WORSE)
    pr.fresh_baseline()
    pr.commit("d2 judged not relevant to q2")
    assert pr.gate().returncode == 0
    check = _fails(pr, "table-mrr", MAIN_MRR)  # scored under main's judgments of q2
    # Shown as an edit of q2 (its relevant document gone), not as a question removed.
    assert "- `q2`: «mot de passe oublié»; relevant d2 -> none" in check.summary
    _passes_once_accepted(pr, "table mrr: 1.0000 -> 0.8125")


def test_a_relevant_grade_lowered_with_a_hole_filled_is_measured_at_the_base_branchs_grade(pr: PullRequest) -> None:
    # main counts from grade 2: q4's d1 (grade 1) is not relevant there. The pull request counts
    # from grade 1 and judges one more document of q4, so q4's judgments only grew; d4, q4's
    # answer on main, falls to rank 4 behind d1: its MRR falls on main's judgments, not on its own.
    with pr.on_main("relevant_grade 2"):
        pr.configure("relevant_grade = 2\n")
    config = pr.root / "retrieval.toml"
    config.write_text(config.read_text().replace("relevant_grade = 2\n", ""))
    _judge(pr, "q4", "d5", 0)
    write_ranks(pr.root, {**GOOD, "q4": ["d1", "d3"]})
    pr.fresh_baseline()
    pr.commit("relevant_grade 1, d5 judged for q4")
    _fails(
        pr,
        "table-mrr",
        "table mrr fell below the baseline of origin/main: baseline 1.0000, current 0.7500, delta -0.2500",
    )
    _passes_once_accepted(pr, "table mrr: 1.0000 -> 0.7500")


def test_unjudged_warn_set_by_the_pull_request_alone_does_not_let_an_undecided_drop_pass_against_the_base(
    pr: PullRequest,
) -> None:
    # d5 enters q2's top 2 and nobody judged it: the drop is undecided; "warn" is the pull request's alone.
    pr.configure('unjudged = "warn"\n')
    write_ranks(pr.root, {**GOOD, "q2": ["d5", "d2"]})
    pr.fresh_baseline()
    pr.commit('unjudged = "warn"')
    assert pr.gate().returncode == 0
    check = _fails(
        pr,
        "table-mrr",
        "table mrr fell below the baseline of origin/main: baseline 1.0000, current 0.8750, delta -0.1250",
    )
    assert "Undecided: judge 1 document(s)" in check.printed["table-mrr"]
    _passes_once_accepted(pr, "table mrr: 1.0000 -> 0.8750")


def test_a_replay_miss_of_a_question_only_the_base_branch_measures_names_the_recording_against_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The team's HTTP search service (docs/methods.md's searchret), recorded on main with graded
    # judgments. The pull request raises relevant_grade: q2 leaves its own run, so `--record`
    # alone records no answer for q2, which main still gates: the required check cannot replay it.
    from test_pull_request_bypasses import TOKENIZER, _search_service
    from trust_project import DOCUMENTS

    methods = (Path(__file__).resolve().parents[2] / "docs" / "methods.md").read_text(encoding="utf-8")
    pr = PullRequest(tmp_path)
    service = _search_service(pr.root, [(d, f"{title} {text}") for d, title, text in DOCUMENTS])
    monkeypatch.setenv("SEARCH_URL", service.url)
    try:
        with pr.on_main("graded judgments, the search service recorded", "--record"):
            write_questions(pr.root, GRADED)  # type: ignore[arg-type]  # relevant as id -> grade
            (pr.root / "searchret.py").write_text(methods.split("# searchret.py\n", 1)[1].split("```", 1)[0])
            (pr.root / "search_service").mkdir()
            (pr.root / "search_service" / "__init__.py").write_text("")
            (pr.root / "search_service" / "tokenizer.py").write_text(TOKENIZER)
            config = pr.root / "retrieval.toml"
            config.write_text(config.read_text().replace('["trust_table:factory"]', '["searchret:factory"]'))
        pr.configure("relevant_grade = 2\n")
        pr.gate("--record")  # as the developer's loop records: q2 left out (its cassettes item fails, as it says)
        pr.fresh_baseline()
        pr.commit("relevant_grade 2, re-recorded")
        check = pr.required_check()
        assert check.status == 1, check.stdout + check.stderr
        fix = "`python -m retrieval --gate --record --baseline-ref origin/main --profile local`"
        assert check.printed["gate"].startswith("ReplayMissError: "), check.stdout
        assert f"Re-record with {fix} (it replaces them)." in check.printed["gate"]
        assert "pytest --record" not in check.printed["gate"]
        # The command it names is the fix: recorded against the ref, the required check replays it.
        pr.gate("--record", "--baseline-ref", "origin/main", "--profile", "local")
        pr.fresh_baseline()
        pr.commit("recorded against origin/main")
        check = pr.required_check()
        assert (check.status, check.printed) == (0, {}), check.stdout + check.stderr
    finally:
        service.stop()


def test_an_undecided_range_counts_only_the_documents_that_entered_that_methods_top_k(tmp_path: Path) -> None:
    # Two methods. On the pull request, table's q2 answer (d2) falls to rank 3 and d5, never judged,
    # enters its top 2; table2 holds, but d3, never judged either, enters its top 2. Table's range
    # counts d5 alone (the document it names), not table2's d3.
    from trust_project import RETRIEVER

    pr = PullRequest(tmp_path)
    with pr.on_main("a second retriever"):
        (pr.root / "trust_table2.py").write_text(
            RETRIEVER.replace("ranks.json", "ranks2.json").replace('name = "table"', 'name = "table2"')
        )
        (pr.root / "ranks2.json").write_text(json.dumps(GOOD))
        _set_methods(pr, '["trust_table:factory", "trust_table2:factory"]')
    write_ranks(pr.root, {**GOOD, "q2": ["d5", "d1", "d2"]})
    (pr.root / "ranks2.json").write_text(json.dumps({**GOOD, "q2": ["d2", "d3", "d1"]}))
    pr.commit("table: d5 first for q2; table2: d3 second")
    check = pr.required_check()
    assert check.status == 1, check.stdout + check.stderr
    assert (
        "Undecided: judge 1 document(s): the drop rests on the 1 unjudged document(s) that entered its top k, "
        "counted as not relevant (1.0000 -> 0.7500); counted as relevant, 0.8750 -> 0.8750, which holds: "
        "q2 d5 (table rank 1)."
    ) in check.printed["table-recall@2"], check.printed["table-recall@2"]


def _set_methods(pr: PullRequest, methods: str) -> None:
    toml = pr.root / "retrieval.toml"
    toml.write_text(toml.read_text().replace('["trust_table:factory"]', methods))
