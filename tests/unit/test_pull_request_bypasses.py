"""Every way around the base branch that issue 31 found, made as a pull request makes it: in a
real git repository whose `main` holds the gate, its baseline and its snapshots, on a branch
`pr` with commits, checked by the workflow's required step as eval.yml writes it
(pull_request.py). Each one fails that check; with an acceptance recorded with a reason it
passes, and the job summary shows the acceptance.

The project is the FIXTURE of trust_project.py: four questions, one in-process retriever whose
rankings come from ranks.json (a test makes it worse on exactly the questions it names).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from made_once import made_once
from pull_request import Check, PullRequest
from trust_project import GOOD, QUESTIONS, git, write_questions, write_ranks

WORSE = {**GOOD, "q2": ["d5", "d1"]}  # q2's document (d2) falls from rank 1 to rank 3: out of the top 2
FALLEN = {"table-mrr", "table-recall@2", "table-recall@2-exact"}
REASON = "q2 is out of scope for this release"

# Each case is a git repository and a shell re-run of the workflow's required step (its git and bash
# processes: about 3 s of CPU for the module): the slow set (CI's `slow` job). The default run keeps
# the base branch's verdict in process (test_baseline_trust.py) and one required check re-run as a
# pull request makes it (test_base_branch_cut_off.py).
pytestmark = pytest.mark.slow


@pytest.fixture
def pr(tmp_path: Path) -> PullRequest:
    return PullRequest(tmp_path)


def _edit_toml(pr: PullRequest, text: str) -> None:
    pr.configure(text)


def _fresh_baseline(pr: PullRequest) -> None:
    pr.fresh_baseline()


def _passes_once_accepted(pr: PullRequest, *shown: str) -> None:
    """With the acceptance recorded with its reason, the required check passes and says so."""
    accepted = pr.accept(REASON)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    _passes(pr, *shown)


def _passes(pr: PullRequest, *shown: str, check: Check | None = None) -> None:
    """The required check (`check` where it was run already) passes, and the summary shows `shown`."""
    check = check or pr.required_check()
    assert (check.status, check.printed, check.listed) == (0, {}, {}), check.stdout + check.stderr
    lines = check.summary.splitlines()
    assert lines[1].startswith("## Retrieval gate against `origin/main`: PASSED, all ")
    accepted_section = check.summary.split("### Accepted drops", 1)[1].split("\n### ", 1)[0]
    for line in shown:
        assert f"{line} (against `origin/main`): {REASON}" in accepted_section


def test_a_baseline_moved_elsewhere_and_rewritten_is_still_held_to_the_base_branchs(pr: PullRequest) -> None:
    _edit_toml(pr, 'baseline = "baselines/v2.json"\nsnapshots = "baselines/v2"\n')
    write_ranks(pr.root, WORSE)
    _fresh_baseline(pr)  # its own gate passes: a new file, nothing to lower
    pr.commit("a new baseline file")
    assert pr.gate().returncode == 0
    check = pr.required_check()
    assert check.status == 1
    assert set(check.printed) == FALLEN and check.listed == check.printed
    assert check.printed["table-mrr"].startswith(
        "table mrr fell below the baseline of origin/main: baseline 1.0000, current 0.8333, delta -0.1667"
    )
    # The reviewer is told the pull request edits what decides the gate.
    assert "`baselines/v2.json`, `baselines/v2/local.json`, `retrieval.toml`" in check.summary
    _passes_once_accepted(pr, "table mrr: 1.0000 -> 0.8333", "table recall@2: 1.0000 -> 0.7500")


def test_a_new_profile_with_the_same_keys_is_a_drop_of_the_one_the_base_branch_gates(pr: PullRequest) -> None:
    _edit_toml(pr, 'profile = "local2"\n\n[profiles.local2]\n')
    write_ranks(pr.root, WORSE)
    assert pr.gate("--update-baseline").returncode == 0  # local2's first baseline: nothing to lower
    pr.commit("profile local2")
    check = pr.required_check()
    assert check.status == 1
    assert set(check.printed) == {"against-origin-main", *FALLEN}
    assert check.printed["against-origin-main"].startswith(
        "origin/main gates profile 'local' and this run gates 'local2': its figures are compared with this "
        "profile's, and the switch itself is a drop."
    )
    assert "- profile **local**: gated by origin/main; this run gates local2" in check.summary
    _passes_once_accepted(pr, "profile local: removed", "table mrr: 1.0000 -> 0.8333")


def test_every_question_reworded_is_the_same_questions_compared_under_the_base_branchs_judgments(
    pr: PullRequest,
) -> None:
    write_questions(pr.root, [(i, f"{text} ?", kind, relevant) for i, text, kind, relevant in QUESTIONS])
    write_ranks(pr.root, WORSE)
    _fresh_baseline(pr)
    pr.commit("questions reworded, a new baseline")
    check = pr.required_check()
    assert check.status == 1 and set(check.printed) == FALLEN
    # Edits, shown old -> new with the base branch's text, never "a new dataset".
    assert "- `q2`: «mot de passe oublié» -> «mot de passe oublié ?»" in check.summary
    assert "new dataset" not in check.stdout + check.summary
    _passes_once_accepted(pr, "table mrr: 1.0000 -> 0.8333")


def test_a_question_reworded_and_easy_ones_added_cannot_lift_the_mean_over_a_drop(tmp_path: Path) -> None:
    pr = PullRequest(tmp_path)
    with pr.on_main("q4 second"):  # the base: q4's document second (MRR 0.875, the issue's figure)
        write_ranks(pr.root, {**GOOD, "q4": ["d1", "d4"]})
    # The pull request: q2 reworded and worse, five easy questions added; the mean rises.
    easy = [(f"q{n}", f"exporter les données {n}", "exact", ["d3"]) for n in range(5, 10)]
    rows = [(i, f"{t}, s'il vous plaît" if i == "q2" else t, y, r) for i, t, y, r in QUESTIONS]
    write_questions(pr.root, [*rows, *easy])
    write_ranks(pr.root, {**GOOD, "q4": ["d1", "d4"], "q2": ["d1", "d2"], **{q: ["d3"] for q, *_ in easy}})
    _fresh_baseline(pr)
    pr.commit("reworded q2, added easy questions")
    assert json.loads((pr.root / "baselines" / "metrics.json").read_text())["profiles"]["local"]["methods"]["table"][
        "mrr"
    ] == pytest.approx(0.8889, abs=1e-4)  # above main's 0.875 over all questions
    check = pr.required_check()
    assert check.status == 1
    assert check.printed["table-mrr"].startswith(
        "table mrr fell below the baseline of origin/main: baseline 0.8750, current 0.7500, delta -0.1250"
    )
    assert "- `q2`: «mot de passe oublié» -> «mot de passe oublié, s'il vous plaît»" in check.summary
    _passes_once_accepted(pr, "table mrr: 0.8750 -> 0.7500")


def test_a_question_the_base_branch_gates_removed_is_a_drop_until_accepted(pr: PullRequest) -> None:
    # The figures on the questions both hold cannot see a removal: removing the questions a change
    # got wrong would keep every one of them. The removal itself is the drop.
    write_questions(pr.root, [q for q in QUESTIONS if q[0] != "q2"])
    _fresh_baseline(pr)  # its own gate passes: a new file, nothing to lower
    pr.commit("q2 removed")
    check = pr.required_check()
    assert (check.status, set(check.printed)) == (1, {"against-origin-main"}), check.stdout
    assert check.printed["against-origin-main"] == (
        "origin/main gates 1 question(s) this run no longer holds (q2): a question removed is a drop. If it is "
        'intended, accept it with `pytest --update-baseline --allow-regression "REASON" --retrieval-baseline-ref '
        "origin/main`."
    )
    _passes_once_accepted(pr, "question q2: removed")


def _accepted(made: Path) -> None:
    """The pull request made worse on q2, its drops accepted with REASON and committed."""
    made_pr = PullRequest(made)
    write_ranks(made_pr.root, WORSE)
    assert made_pr.accept(REASON).returncode == 0


@pytest.fixture
def accepted_pr(tmp_path: Path) -> PullRequest:
    """`pr` made worse on q2 and its drops accepted with REASON: made once a process, then copied."""
    return PullRequest(tmp_path, made=made_once("pull-request-accepted", REASON, _accepted))


# The required check once the acceptance's reason is restored: the same files and the same commits
# (the edit, then its revert) whichever edit a case below made, so the first case of a process runs
# it and the others assert on what it gave.
_RESTORED: list[Check] = []


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda record: record.update(reason=""), '"accepted" records drops with an empty reason'),
        (lambda record: record.update(reason=None), '"accepted" records drops with no reason'),
        (lambda record: record.pop("reason"), '"accepted" records drops with no reason'),
    ],
    ids=["empty", "null", "missing"],
)
def test_an_acceptance_written_by_hand_without_a_reason_fails_in_one_line(
    accepted_pr: PullRequest, edit: Callable[[dict[str, Any]], object], said: str
) -> None:
    pr = accepted_pr
    path = pr.root / "baselines" / "metrics.json"
    recorded = path.read_text()
    data = json.loads(recorded)
    edit(data["profiles"]["local"]["accepted"])
    path.write_text(json.dumps(data, indent=2))
    pr.commit("the reason removed")
    check = pr.required_check()
    assert check.status == 1
    gate = check.printed["gate"]
    assert gate.startswith(f"BaselineError: baselines/metrics.json: profile 'local': {said}: an acceptance needs one")
    assert "\n" not in gate
    assert check.summary.splitlines()[3] == f"**Nothing was compared:** {gate}"
    # The reason restored: the acceptance holds again.
    path.write_text(recorded)
    pr.commit("the reason back")
    if not _RESTORED:
        _RESTORED.append(pr.required_check())
    _passes(pr, "table mrr: 1.0000 -> 0.8333", check=_RESTORED[0])


def test_a_snapshot_edited_by_hand_to_match_a_worse_ranking_fails_in_one_line(pr: PullRequest) -> None:
    _edit_toml(pr, "tolerance = 0.05\n")
    write_ranks(pr.root, WORSE)
    path = pr.root / "baselines" / "rankings" / "local.json"
    data = json.loads(path.read_text())
    data["methods"]["table"]["q2"] = ["d5", "d1", "d2", "d3", "d4"]  # what the worse ranking gives
    path.write_text(json.dumps(data))
    pr.commit("snapshot edited")
    check = pr.required_check()
    assert check.status == 1
    assert check.printed["gate"] == (
        "BaselineError: baselines/rankings/local.json: table's top 10 of q2 gives a reciprocal rank of 0.3333 "
        "under the baseline's judgments, but baselines/metrics.json stores 1: one of the two was edited by hand. "
        "Restore both with `git checkout`, or rewrite them with `pytest --update-baseline`"
    )


def test_a_value_no_ranking_can_give_fails_in_one_line_even_with_the_figures_edited_to_match(pr: PullRequest) -> None:
    path = pr.root / "baselines" / "metrics.json"
    data = json.loads(path.read_text())
    table = data["profiles"]["local"]["methods"]["table"]
    table["recall_per_question"]["q2"] = 0.7  # q2 has one relevant document: recall@2 is 0 or 1
    table["recall@2"] = round(sum(table["recall_per_question"].values()) / 4, 4)
    table["by_type"]["exact"]["recall@2"] = 0.85
    path.write_text(json.dumps(data, indent=2))
    pr.commit("a per-question value edited, and its figures")
    check = pr.required_check()
    assert check.status == 1
    assert check.printed["gate"].startswith(
        "BaselineError: baselines/metrics.json: profile 'local': method 'table': recall_per_question of q2 is 0.7, "
        "which no ranking gives (1 relevant document(s) judged: recall@2 is one of 0, 1): edited by hand."
    )


def test_a_tolerance_raised_by_the_pull_request_does_not_apply_against_the_base_branch(tmp_path: Path) -> None:
    pr = PullRequest(tmp_path)
    # 25 questions on main: one of them a rank lower moves MRR by 0.02, within a 0.05 tolerance.
    many = [(f"q{n:02}", f"question {n}", "exact", [f"d{n % 5 + 1}"]) for n in range(25)]
    ranks = {q: [r[0], *(d for d in ("d1", "d2", "d3", "d4", "d5") if d != r[0])] for q, _, _, r in many}
    with pr.on_main("25 questions"):
        write_questions(pr.root, many)
        write_ranks(pr.root, ranks)
    # The pull request: the tolerance raised, q00 a rank lower (still in the top 2), its top 10 re-accepted.
    _edit_toml(pr, "tolerance = 0.05\n")
    top = ranks["q00"]
    write_ranks(pr.root, {**ranks, "q00": [top[1], top[0], *top[2:]]})
    pr.commit("tolerance 0.05, q00 second")
    own = pr.gate()
    assert [line.split(" - ")[0] for line in own.stdout.splitlines() if line.startswith("FAILED")] == [
        "FAILED table-top-10"
    ]  # its own figures hold within 0.05
    check = pr.required_check()
    assert check.status == 1
    assert check.printed["table-mrr"].startswith(
        "table mrr fell below the baseline of origin/main: baseline 1.0000, current 0.9800, delta -0.0200 "
        "(tolerance 0.0)."
    )


CONFTEST = """
import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if "test_gate[" in item.nodeid and report.failed:
        report.outcome = "passed"  # every failed gate item reported as passed
        report.longrepr = None
    return report
"""


def _conftest_rewriting_reports(pr: PullRequest) -> None:
    """The pull request: a worse retriever, a conftest that reports the failed gate items as
    passed, and the workflow edited too."""
    write_ranks(pr.root, WORSE)
    (pr.root / "conftest.py").write_text(CONFTEST)
    # And the workflow edited in the same pull request: the reviewer is told.
    (pr.top / ".github" / "workflows").mkdir(parents=True)
    (pr.top / ".github" / "workflows" / "eval.yml").write_text("name: retrieval-eval\n")
    pr.commit("a conftest")


def _fails_the_required_check_naming_the_edits(pr: PullRequest) -> None:
    check = pr.required_check()
    assert check.status == 1 and set(check.printed) == {*FALLEN, "table-top-10"}
    edits = check.summary.split("### Files deciding the gate that this pull request edits")[1].split("\n###")[0]
    assert "Against `origin/main`: `.github/workflows/eval.yml`, `conftest.py`." in edits


def test_a_conftest_that_rewrites_reports_does_not_turn_the_required_check_green(pr: PullRequest) -> None:
    _conftest_rewriting_reports(pr)
    _fails_the_required_check_naming_the_edits(pr)


def test_a_conftest_that_rewrites_reports_turns_pytest_green_but_not_the_required_check(pr: PullRequest) -> None:
    _conftest_rewriting_reports(pr)
    tests = pr.run(sys.executable, "-m", "pytest", "-m", "regression", "-p", "no:cacheprovider", "-q")
    assert tests.returncode == 0, tests.stdout
    assert "13 passed" not in tests.stdout and "passed" in tests.stdout
    _fails_the_required_check_naming_the_edits(pr)


def test_a_method_removed_from_methods_is_dropped_and_said_so_first(tmp_path: Path) -> None:
    pr = PullRequest(tmp_path)
    config = pr.root / "retrieval.toml"
    with pr.on_main("bm25 gated too"):
        config.write_text(config.read_text().replace('["trust_table:factory"]', '["bm25", "trust_table:factory"]'))
    (pr.root / "retrieval.toml").write_text(
        (pr.root / "retrieval.toml").read_text().replace('["bm25", "trust_table:factory"]', '["trust_table:factory"]')
    )
    _fresh_baseline(pr)
    pr.commit("bm25 dropped")
    check = pr.required_check()
    assert check.status == 1
    assert {name for name in check.printed if name.startswith("bm25-")} == {
        "bm25-mrr",
        "bm25-recall@2",
        "bm25-recall@2-exact",
        "bm25-recall@2-paraphrase",
        "bm25-degraded",
    }
    assert check.printed["bm25-mrr"].startswith("origin/main's baseline gates bm25 mrr but this run did not produce it")
    first = "\n".join(check.summary.splitlines()[:4])
    assert "**Failed:** `bm25-recall@2-exact`" in first
    assert "- method **bm25**: gated by origin/main's baseline, not run" in check.summary
    main = json.loads(git(pr.top, "show", "main:baselines/metrics.json"))["profiles"]["local"]["methods"]["bm25"]
    _passes_once_accepted(pr, f"bm25 mrr: {main['mrr']:.4f} -> removed", "bm25 degraded: 0 -> removed")


def test_a_project_moved_to_another_folder_is_still_held_to_what_the_base_branch_gates(pr: PullRequest) -> None:
    moved = pr.top / "services" / "rag"
    moved.mkdir(parents=True)
    for name in ("retrieval.toml", "data", "baselines", "ranks.json", "trust_table.py"):
        git(pr.top, "mv", name, f"services/rag/{name}")
    write_ranks(moved, WORSE)
    shutil.rmtree(moved / "baselines")
    assert pr.gate("--update-baseline", where=moved).returncode == 0
    pr.commit("the project moved")
    check = pr.required_check(where=moved, in_process=False)  # the step's own `python`, in the moved folder
    assert check.status == 1 and set(check.printed) == FALLEN


def test_a_damaged_or_hand_lowered_baseline_says_so_in_the_first_lines_of_the_summary(pr: PullRequest) -> None:
    path = pr.root / "baselines" / "metrics.json"
    data = json.loads(path.read_text())
    data["profiles"]["local"]["methods"]["table"]["mrr"] = 0.5  # lowered by hand, its values left
    path.write_text(json.dumps(data, indent=2))
    pr.commit("lowered by hand")
    check = pr.required_check()
    head = check.summary.splitlines()[:4]
    assert head[1] == "## Retrieval gate against `origin/main`: FAILED, nothing compared (profile local)"
    assert head[3].startswith(
        "**Nothing was compared:** BaselineError: baselines/metrics.json: profile 'local': method 'table': mrr is "
        "0.5 but the mean of its 4 stored per-question values is 1.0000: the figure or its values were edited by "
        "hand. Restore it with `git checkout -- baselines/metrics.json`"
    )
    path.write_text('{"format": "retrieval-baseline-1",\n "profiles": {oops}\n')
    pr.commit("damaged")
    head = pr.required_check().summary.splitlines()[:4]
    assert head[3].startswith("**Nothing was compared:** BaselineError: baselines/metrics.json:2: invalid JSON")
    # A project file this version cannot read: exit 2, and the summary still says why, with the fix.
    (pr.root / "retrieval.toml").write_text('dataset = "data/qa"\nmethods = ["trust_table:factory"]\nk = 0\n')
    pr.commit("k = 0")
    check = pr.required_check()
    assert check.status == 2
    assert check.summary.splitlines()[3].startswith("**Nothing was compared:** error: ")
    assert "k must be an integer >= 1, got 0." in check.summary.splitlines()[3]


def test_a_ref_starting_with_a_dash_is_refused_before_git_reads_it(pr: PullRequest) -> None:
    written = pr.root / "injected"
    done = pr.gate(f"--baseline-ref=--output={written}")
    assert done.returncode == 1
    assert (
        f"FAILED gate - BaselineError: --retrieval-baseline-ref '--output={written}': a git ref cannot start with '-'."
    ) in done.stdout
    assert not written.exists()


def test_the_base_branchs_files_are_read_with_git_show_never_a_checkout(pr: PullRequest) -> None:
    write_ranks(pr.root, WORSE)
    status = git(pr.top, "status", "--porcelain")
    head = git(pr.top, "rev-parse", "HEAD")
    assert pr.required_check(in_process=False).status == 1  # the step as GitHub runs it, every process its own
    assert git(pr.top, "status", "--porcelain") == status and git(pr.top, "rev-parse", "HEAD") == head
    assert subprocess.run(["git", "stash", "list"], cwd=pr.top, capture_output=True, text=True).stdout == ""


# FIXTURE: the team's search service, deployed from the repository's own code: each request is
# answered with the ranking that `search_service.tokenizer` in the working tree gives (so an edit
# of the tokenizer changes the answers, as deploying it would).
SERVICE_INIT = ""
TOKENIZER = "def tokens(text):\n    return set(text.lower().replace(\"'\", ' ').split())\n"
# The pull request's edit, an "optimisation": the first two words of a text alone.
TOKENIZER_EDITED = "def tokens(text):\n    return set(text.lower().replace(\"'\", ' ').split()[:2])\n"


def _search_service(root: Path, documents: list[tuple[str, str]]) -> Any:
    from fake_search import _JsonService

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        scope: dict[str, Any] = {}
        exec((root / "search_service" / "tokenizer.py").read_text(), scope)  # the code as it is now
        words = scope["tokens"](body["query"])
        scored = sorted(((len(words & scope["tokens"](text)), d) for d, text in documents), key=lambda h: (-h[0], h[1]))
        return {"hits": [{"id": d, "score": s} for s, d in scored[: body["size"]] if s]}

    return _JsonService(answer)


# Eight gate and check processes in a row, against a live search server (29 s under load).
def test_a_change_in_the_teams_own_search_service_fails_replay_until_recorded_then_the_base_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trust_project import DOCUMENTS

    readme = (Path(__file__).resolve().parents[2] / "docs" / "methods.md").read_text(encoding="utf-8")
    pr = PullRequest(tmp_path)
    tokenizer = pr.root / "search_service" / "tokenizer.py"
    service = _search_service(pr.root, [(d, f"{title} {text}") for d, title, text in DOCUMENTS])
    monkeypatch.setenv("SEARCH_URL", service.url)
    try:
        # main: the documented HTTP retriever, declaring the service's package as its `sources`, recorded.
        with pr.on_main("the search service, recorded", "--record"):
            (pr.root / "searchret.py").write_text(readme.split("# searchret.py\n", 1)[1].split("```", 1)[0])
            (pr.root / "search_service").mkdir()
            (pr.root / "search_service" / "__init__.py").write_text(SERVICE_INIT)
            tokenizer.write_text(TOKENIZER)
            config = pr.root / "retrieval.toml"
            config.write_text(config.read_text().replace('["trust_table:factory"]', '["searchret:factory"]'))
        assert pr.required_check().status == 0  # replayed without the service (its URL unset in CI)
        # The pull request edits the service's tokenizer; its requests are the same.
        tokenizer.write_text(TOKENIZER_EDITED)
        pr.commit("tokenizer: keep the case")
        check = pr.required_check()
        assert check.status == 1
        assert check.printed["gate"].startswith(
            f"ReplayMissError: {pr.root / 'cassettes' / 'local' / 'search.json'} was recorded from another version "
            "of the method's code (search_service.tokenizer changed since): replay would give the old code's "
            "answers, not those of the code under test."
        )
        assert check.summary.splitlines()[3].startswith("**Nothing was compared:** ReplayMissError: ")
        assert "Re-record with `pytest --record --retrieval-profile local`" in check.summary.splitlines()[3]
        # Re-recorded with the edited service, its own baseline made again: the base branch holds.
        assert pr.gate("--record").returncode == 1  # recorded; its figures fell against the baseline
        _fresh_baseline(pr)
        pr.commit("re-recorded")
        check = pr.required_check()
        assert check.status == 1
        assert sorted(check.printed) == [
            "search-mrr",
            "search-recall@2",
            "search-recall@2-exact",
            "search-recall@2-paraphrase",
        ]
        accepted = pr.accept(REASON)
        assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    finally:
        service.stop()
    _passes(pr, "search mrr: 1.0000 -> 0.5000", "search recall@2[exact]: 1.0000 -> 0.5000")
