"""Nothing lowers the bar unseen: an edited question stays gated under the judgments the baseline
kept; the baseline checks itself (ranges, means, per-type coverage) and takes its tolerance from
the project file only; a pull request is compared with its base branch's baseline and a drop
fails there unless the pull request's baseline records its acceptance, with a reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_pytest_plugin import UNREAD
from trust_project import (
    QUESTIONS,
    commit_on_main,
    failing,
    gate,
    git,
    make_project,
    worse,
    write_questions,
    write_ranks,
)

from retrieval.cli import main
from retrieval.config import ConfigError
from retrieval.gate.accept import accept
from retrieval.gate.schema import BaselineError, load_baseline

BASELINE = Path("baselines/metrics.json")


# trust_project.make_project's files (its baseline accepted: an evaluation and an update): made by
# the first test of a process that asks, copied into the next ones' projects (they name no path).
_MADE: dict[str, bytes] = {}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    if not _MADE:
        make_project(tmp_path)
        files = (p for p in tmp_path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        _MADE.update({str(p.relative_to(tmp_path)): p.read_bytes() for p in files})
        return tmp_path
    for name, data in _MADE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    return tmp_path


def _edit(root: Path, change: Any) -> None:
    path = root / BASELINE
    data = json.loads(path.read_text())
    change(data["profiles"]["local"])
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


# --- 1. edited questions stay gated ---------------------------------------------------------


def test_an_edited_question_made_worse_in_the_same_change_fails_under_its_old_judgments(project: Path) -> None:
    # The retriever loses q3's document, and q3's relevant ids are edited to what it now ranks first:
    # under the new judgments q3 looks perfect; under the baseline's it fell from 1 to 0.
    write_ranks(project, {**json.loads((project / "ranks.json").read_text()), "q3": ["d3", "d5"]})
    write_questions(project, [q if q[0] != "q3" else (*q[:3], ["d3"]) for q in QUESTIONS])
    result = gate(project)
    assert result.problem is None and result.changed_data is not None
    assert result.changed_data.rejudged == ("q3",)
    assert failing(result) == ["table recall@2", "table mrr", "table recall@2[paraphrase]"]
    mrr = next(c for c in result.checks if c.name == "table mrr")
    assert (mrr.baseline, round(mrr.current, 4)) == (1.0, 0.8333)  # q3's document at rank 3
    # Its "why" is where the document it was judged against ranked now, not the edited one.
    assert len(mrr.worse_questions) == 1 and mrr.worse_questions[0].startswith("q3 (1.0000 -> 0.3333; d1 ")
    # The update is refused as any drop is, and its diff lists every figure on all questions.
    before = (project / BASELINE).read_bytes()
    with pytest.raises(BaselineError, match=r"refusing to lower .*table mrr, .*--allow-regression was not given"):
        accept(result)
    assert (project / BASELINE).read_bytes() == before
    diff = accept(gate(project), allow_regression="q3 now asks for the export").splitlines()
    assert diff[1:4] == [
        "  dataset changed: 1 edited (q3); compared on the 3 questions both hold and the 1 edited one(s) under "
        "the baseline's judgments:",
        "  table recall@2: 1.0000 -> 0.7500 (-0.2500)",
        "  table mrr: 1.0000 -> 0.8333 (-0.1667)",
    ]
    every = diff.index("  every figure, old dataset (4 questions) -> new (4 questions):")
    assert diff[every + 1 : every + 3] == ["  table recall@2: 1.0000 (unchanged)", "  table mrr: 1.0000 (unchanged)"]
    assert "  accepted: q3 now asks for the export" in diff
    assert load_baseline(project / BASELINE)["profiles"]["local"]["accepted"]["figures"]["table mrr"] == {
        "from": 1.0,
        "to": 0.8333,
    }


def test_an_update_after_questions_were_added_shows_every_figure_and_a_whole_dataset_drop_needs_a_reason(
    project: Path,
) -> None:
    # A new question the retriever misses: the 4 kept questions held, the whole-dataset mrr fell.
    write_questions(project, [*QUESTIONS, ("q5", "exporter un fichier", "exact", ["d3"])])
    write_ranks(project, {**json.loads((project / "ranks.json").read_text()), "q5": ["d1", "d2"]})
    result = gate(project)
    assert failing(result) == []  # compared on the questions both hold
    with pytest.raises(BaselineError) as caught:
        accept(result)
    assert "table mrr (all questions)" in str(caught.value)
    diff = accept(gate(project), allow_regression="q5 is a known gap").splitlines()
    assert diff[1:3] == [
        "  dataset changed: 1 added (q5); compared on the 4 questions both hold:",
        "  no figure changed on them",
    ]
    assert "  every figure, old dataset (4 questions) -> new (5 questions):" in diff
    assert "  table mrr: 1.0000 -> 0.8667 (-0.1333)" in diff
    assert "  table recall@2[exact]: 1.0000 -> 0.6667 (-0.3333)" in diff


def test_a_new_dataset_with_nothing_in_common_is_a_new_baseline(project: Path) -> None:
    write_questions(project, [(f"n{i}", t, y, r) for i, (_, t, y, r) in enumerate(QUESTIONS)])
    write_ranks(project, {"n0": ["d5"], "n1": ["d5"], "n2": ["d5"], "n3": ["d5"]})
    result = gate(project)
    assert result.problem is not None and "metrics are not comparable" in result.problem
    diff = accept(result)  # no reason needed: the old figures measured other questions
    assert "  new dataset: qa" in diff.splitlines()[1]


# --- 2. a baseline that checks itself ----------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda e: e["methods"]["table"].update(mrr=0.9),
            "method 'table': mrr is 0.9 but the mean of its 4 stored per-question values is 1.0000: the figure or "
            "its values were edited by hand",
        ),
        (
            lambda e: e["methods"]["table"]["by_type"]["paraphrase"].update({"recall@2": 0.5}),
            "method 'table': by_type[paraphrase] recall@2 is 0.5 but the mean of its 2 questions' stored values is "
            "1.0000: edited by hand",
        ),
        (
            lambda e: e["methods"]["table"]["by_type"].pop("paraphrase"),
            "method 'table': by_type[paraphrase] is missing: 2 judged question(s) of that type are not gated",
        ),
        (
            lambda e: e["methods"]["table"].update(mrr=-5),
            "method 'table': mrr is -5, outside its range (a number from 0 to 1)",
        ),
        (
            lambda e: e["methods"]["table"].update(degraded=-1),
            "method 'table': degraded is -1, outside its range (a whole number >= 0)",
        ),
        (
            lambda e: e["methods"]["table"]["recall_per_question"].update(q1=1.5),
            "method 'table': recall_per_question of q1 is 1.5, outside its range (a number from 0 to 1)",
        ),
    ],
    ids=["mrr lowered", "per-type figure", "per-type deleted", "mrr negative", "count negative", "value above 1"],
)
def test_a_hand_edit_that_breaks_the_baseline_fails_in_one_line_naming_the_figure(
    project: Path, change: Any, problem: str
) -> None:
    _edit(project, change)
    with pytest.raises(BaselineError) as caught:
        gate(project)
    path = BASELINE.as_posix()  # as the project names it, wherever the run's working directory is
    assert str(caught.value) == (
        f"{path}: profile 'local': {problem}. Restore it with `git checkout -- {path}` or rewrite it with "
        "`pytest --update-baseline`."
    )


def test_a_deleted_per_type_figure_of_a_baseline_without_judgments_fails_the_gate(project: Path) -> None:
    # An entry written before judgments were kept: the gate checks its types against the dataset.
    def older(entry: dict) -> None:
        del entry["judgments"]
        del entry["methods"]["table"]["by_type"]["exact"]

    _edit(project, older)
    result = gate(project)
    assert result.problem == (
        "baselines/metrics.json gates no table recall@2[exact]: a question type of the dataset is not gated (its "
        "figure was deleted). Restore it with `git checkout -- baselines/metrics.json` or rewrite it with "
        "`pytest --update-baseline`."
    )


def test_the_tolerance_is_the_project_files_bounded_and_never_the_baselines(project: Path) -> None:
    # q4's document falls from rank 1 to 2: mrr -0.125, recall@2 unchanged.
    write_ranks(project, {**json.loads((project / "ranks.json").read_text()), "q4": ["d1", "d4"]})
    _edit(project, lambda e: e.update(tolerance=1e9))  # a hand-set tolerance in the file: not trusted
    assert failing(gate(project)) == ["table mrr"]
    toml = project / "retrieval.toml"
    toml.write_text(toml.read_text() + "tolerance = 0.06\n")
    with pytest.raises(ConfigError) as caught:
        gate(project)
    assert str(caught.value) == f"{toml}, line 4: tolerance must be a number from 0 to 0.05, got 0.06."
    toml.write_text(toml.read_text().replace("0.06", "0.05"))
    result = gate(project)
    assert result.tolerance == 0.05 and failing(result) == ["table mrr"]  # 0.125 is more than 0.05


# --- 3. the base branch as the reference ----------------------------------------------------------


@pytest.fixture
def repository(project: Path) -> Path:
    """The project committed on `main`, checked out on a pull request's branch `pr`."""
    commit_on_main(project)
    git(project, "checkout", "-qb", "pr")
    return project


def test_a_pull_request_that_lowers_a_figure_fails_against_the_base_branch_without_a_recorded_acceptance(
    repository: Path,
) -> None:
    worse(repository)
    accept(gate(repository), allow_regression="q2 is out of scope")
    _edit(repository, lambda e: e.pop("accepted"))  # the acceptance removed: a lowered bar, unseen
    result = gate(repository, ref="main")
    assert failing(result) == [
        "table recall@2 against main",
        "table mrr against main",
        "table recall@2[exact] against main",
    ]
    mrr = next(c for c in result.checks if c.name == "table mrr against main")
    assert mrr.message().startswith("table mrr fell below the baseline of main: baseline 1.0000, current 0.8333")
    # Its own baseline holds: without the ref, the gate passes (what the required check did before).
    assert failing(gate(repository)) == []


def test_a_recorded_acceptance_passes_against_the_base_branch_and_the_pr_summary_shows_its_reason(
    repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    worse(repository)
    accept(gate(repository), allow_regression="q2 is out of scope")
    result = gate(repository, ref="main")
    assert failing(result) == []
    accepted = [c for c in result.checks if c.accepted]
    assert [(c.name, c.accepted) for c in accepted] == [
        ("table recall@2 against main", "q2 is out of scope"),
        ("table mrr against main", "q2 is out of scope"),
        ("table recall@2[exact] against main", "q2 is out of scope"),
    ]
    # Worse than what was accepted: fails again.
    write_ranks(repository, {**json.loads((repository / "ranks.json").read_text()), "q1": ["d5", "d1"]})
    assert "table mrr against main" in failing(gate(repository, ref="main"))
    # The PR summary (the CLI's report against the base branch's baseline) shows the reason.
    assert main(["--baseline", "--baseline-ref", "main"]) == 0
    out = capsys.readouterr().out
    assert "**Accepted drops** (`--allow-regression`): q2 is out of scope" in out
    assert "- table mrr: 1.0 -> 0.8333" in out


def test_an_acceptance_stays_while_the_figure_is_below_its_base_value_and_goes_when_it_recovers(
    repository: Path,
) -> None:
    worse(repository)
    accept(gate(repository), allow_regression="q2 is out of scope")
    # Partly recovered (q2's document back to rank 2): no drop against the file, no reason needed.
    write_ranks(repository, {**json.loads((repository / "ranks.json").read_text()), "q2": ["d5", "d2"]})
    accept(gate(repository))
    record = load_baseline(repository / BASELINE)["profiles"]["local"]["accepted"]
    assert record == {"figures": {"table mrr": {"from": 1.0, "to": 0.875}}, "reason": "q2 is out of scope"}
    assert failing(gate(repository, ref="main")) == []
    # Fully recovered: nothing is accepted any more.
    write_ranks(repository, {**json.loads((repository / "ranks.json").read_text()), "q2": ["d2", "d1"]})
    accept(gate(repository))
    assert "accepted" not in load_baseline(repository / BASELINE)["profiles"]["local"]


def test_an_acceptance_recorded_for_another_base_value_does_not_pass(repository: Path) -> None:
    worse(repository)
    accept(gate(repository), allow_regression="q2 is out of scope")
    # Stale: recorded against a base whose mrr was 0.9, not main's 1.0.
    _edit(repository, lambda e: e["accepted"]["figures"]["table mrr"].update({"from": 0.9}))
    assert "table mrr against main" in failing(gate(repository, ref="main"))


def test_the_ref_is_read_with_git_show_and_a_missing_one_is_one_line(repository: Path) -> None:
    status = git(repository, "status", "--porcelain")
    with pytest.raises(BaselineError) as caught:
        gate(repository, ref="origin/main")
    assert str(caught.value) == (
        "--retrieval-baseline-ref origin/main: no such commit in this repository (a shallow CI checkout has to "
        "fetch it first: `git fetch --depth=1 origin main`)."
    )
    # A ref without the project yet: nothing to lower, said in the result.
    git(repository, "checkout", "-q", "--orphan", "empty")
    git(repository, "rm", "-rq", "--cached", ".")
    git(repository, "commit", "-q", "--allow-empty", "-m", "empty")
    git(repository, "checkout", "-q", "-f", "pr")
    result = gate(repository, ref="empty")
    assert failing(result) == []
    assert result.reference_note == "empty has no retrieval project here: nothing to lower"
    assert git(repository, "status", "--porcelain") == status  # never a checkout of the ref


def test_pytest_fails_a_pull_request_against_the_base_branch_and_passes_it_with_a_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pytester.path
    monkeypatch.chdir(root)
    make_project(root)
    commit_on_main(root)
    worse(root)
    quiet = ("-vv", "-p", "no:cacheprovider", "-p", "no:randomly", *UNREAD, "-m", "regression")
    refused = pytester.runpytest_inprocess(*quiet, "--update-baseline", "--allow-regression")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR  # the reason is required
    pytester.runpytest_inprocess(*quiet, "--update-baseline", "--allow-regression", "q2 is out of scope")
    _edit(root, lambda e: e.pop("accepted"))
    lowered = pytester.runpytest_inprocess(*quiet, "--retrieval-baseline-ref", "main")
    # One item per figure, compared with both baselines, named at collection (gate, 5 integrity
    # items, what main gates as a whole, 5 figures, 1 snapshot).
    lowered.assert_outcomes(passed=10, failed=3)
    lowered.stdout.fnmatch_lines(["*test_gate[[]table-mrr] - table mrr fell below the baseline of main:*"])
    # Nothing falls against its own baseline now: the acceptance is recorded against the ref's.
    plain = pytester.runpytest_inprocess(*quiet, "--update-baseline")
    plain.stdout.fnmatch_lines(["*  no figure changed"])
    ref = ("--retrieval-baseline-ref", "main")
    refused = pytester.runpytest_inprocess(*quiet, "--update-baseline", *ref)
    refused.stdout.fnmatch_lines(["*refusing to lower the baseline of profile 'local': table recall@2, table mrr*"])
    pytester.runpytest_inprocess(*quiet, "--update-baseline", "--allow-regression", "q2 is out of scope", *ref)
    accepted = pytester.runpytest_inprocess(*quiet, "--retrieval-baseline-ref", "main")
    accepted.assert_outcomes(passed=13)
    accepted.stdout.fnmatch_lines(["retrieval gate (*; drops accepted against main: q2 is out of scope"])
