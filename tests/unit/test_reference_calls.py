"""What a gate against a git ref costs in git processes, and that the fewer calls read the same:
one `git rev-parse` gives the ref's commit and the repository's top where both are there (and
the two calls of before say why not, in the same words, where they are not); the ref's baseline
set is read in the batch of its project file when it lies where the pull request's does (and
read after it, alike, when it does not); the item names (`planned_items`) read the entry alone;
`python -m retrieval --gate --baseline-ref` reads the ref once for its items and its run.

On the FIXTURE trust project (trust_project.py): one in-process retriever, no model, no cassette.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from trust_project import commit_on_main, make_project, settings, worse

from retrieval.cli import main
from retrieval.gate import reference
from retrieval.gate.schema import BaselineError
from retrieval.gate.session import planned_items


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trust project in a folder of a repository, committed on `main`, made worse in the
    working tree and its project file edited there (a file that decides the gate)."""
    root = tmp_path_factory.mktemp("reference-calls") / "top" / "project"
    root.mkdir(parents=True)
    with contextlib.chdir(root):
        make_project(root)
    commit_on_main(root.parent)
    worse(root)
    with (root / "retrieval.toml").open("a") as f:
        f.write("# edited by the pull request\n")
    return root


@pytest.fixture
def project(made: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The made project, as the working directory (read only: a test that edits it copies it)."""
    monkeypatch.chdir(made)
    return made


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The arguments of every git process reference.py starts, in order."""
    made: list[list[str]] = []
    run = reference._git

    def counted(args: list[str], folder: Path, given: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        made.append(args)
        return run(args, folder, given)

    monkeypatch.setattr(reference, "_git", counted)
    yield made


def _two_calls(ref: str, folder: Path) -> tuple[str, Path]:
    """What base_branch read with two git processes: the ref's commit, then the repository's top."""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, check=False)
    return reference.commit_of(ref, folder), Path(top.stdout.decode().strip()).resolve()


def test_one_rev_parse_gives_the_commit_and_the_top_of_two(
    project: Path, calls: list[list[str]], tmp_path: Path
) -> None:
    for ref, folder in [("main", project), ("HEAD", project.parent), ("main~0", project / "data" / "qa")]:
        before = _two_calls(ref, folder)
        calls.clear()
        assert reference._commit_and_top(ref, folder) == before
        assert [c[:2] for c in calls] == [["rev-parse", "--show-toplevel"]]
    # A git folder has no work tree: `--show-toplevel` refuses there, and the two calls decide
    # (their top is the folder itself).
    inside = project.parent / ".git"
    assert reference._commit_and_top("main", inside) == _two_calls("main", inside)
    # No such commit, an option, a blob, no repository: the same failure in the same words.
    for ref, folder in [("nosuch", project), ("-x", project), ("--all", project), ("main:retrieval.toml", project)]:
        with pytest.raises(BaselineError) as before_error:
            _two_calls(ref, folder)
        with pytest.raises(BaselineError) as now_error:
            reference._commit_and_top(ref, folder)
        assert str(now_error.value) == str(before_error.value)
    with pytest.raises(BaselineError, match="is not in a git repository"):
        reference._commit_and_top("main", tmp_path)


def test_files_read_ahead_are_the_ones_asked_next_read_once(project: Path, calls: list[list[str]]) -> None:
    commit, top = reference._commit_and_top("main", project)
    calls.clear()
    asked = ["project/retrieval.toml", "pyproject.toml"]
    ahead = ["project/baselines/metrics.json", "project/nothing.json", "project/data", "line\nbreak"]
    first = reference._shown(commit, asked, top, ahead)
    assert calls == [["cat-file", "--batch"]]
    # The folder and the newline are not the batch's to answer: left to the call that asks for them.
    assert list(first) == [*asked, "project/baselines/metrics.json", "project/nothing.json"]
    calls.clear()
    wanted = ["project/baselines/metrics.json", "project/nothing.json", "project/data", "project/ranks.json"]
    then = reference._shown(commit, wanted, top, known=first)
    # Only what was not known is read: in one batch, then the folder (a tree) by `git show`.
    assert calls == [["cat-file", "--batch"], ["show", f"{commit}:project/data"]]
    assert then == {path: reference._show(commit, path, top) for path in wanted}
    assert then["project/baselines/metrics.json"] is not None and then["project/nothing.json"] is None


def _branch_fields(branch: reference.BaseBranch) -> dict[str, object]:
    return {name: getattr(branch, name) for name in reference.BaseBranch.__dataclass_fields__}


def test_the_base_branch_costs_four_git_processes_its_entry_alone_two(project: Path, calls: list[list[str]]) -> None:
    branch = reference.base_branch("main", settings(project))
    assert [c[0] for c in calls] == ["rev-parse", "cat-file", "diff", "ls-files"]
    assert branch.entry is not None and branch.snapshots and branch.texts["q2"] == "mot de passe oublié"
    assert branch.touched == ("project/retrieval.toml",)
    calls.clear()
    # The entry alone (the item names): neither the texts nor the touched files.
    alone = reference.base_branch("main", settings(project), texts=False, touched=False)
    assert [c[0] for c in calls] == ["rev-parse", "cat-file"]
    assert _branch_fields(alone) == {**_branch_fields(branch), "texts": {}, "touched": ()}
    calls.clear()
    # The item names read the same entry alone, or take it as read already.
    names = planned_items(settings(project), "main")
    assert [c[0] for c in calls] == ["rev-parse", "cat-file"] and "against-main" in names
    assert planned_items(settings(project), "main", known=branch) == names
    broken = BaselineError("--retrieval-baseline-ref nosuch: no such commit")
    assert planned_items(settings(project), "nosuch", known=broken) == planned_items(settings(project), "nosuch")


def test_a_baseline_set_elsewhere_than_the_pull_requests_is_read_after_its_project_file(
    made: Path, calls: list[list[str]], tmp_path: Path
) -> None:
    shutil.copytree(made.parent, tmp_path / "top", symlinks=True)
    project = tmp_path / "top" / "project"
    shutil.move(project / "baselines", project / "elsewhere")
    with (project / "retrieval.toml").open("a") as f:
        f.write('baseline = "elsewhere/metrics.json"\nsnapshots = "elsewhere/snapshots"\n')
    branch = reference.base_branch("main", settings(project))
    assert [c[0] for c in calls] == ["rev-parse", "cat-file", "cat-file", "diff", "ls-files"]
    assert branch.baseline == "main:project/baselines/metrics.json" and branch.entry is not None
    assert branch.snapshots and branch.texts["q1"] == "restaurer une sauvegarde"
    assert {"project/retrieval.toml", "project/baselines/metrics.json"} <= set(branch.touched)


def _gate(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(["--gate", *args])
    return status, out.getvalue()


def test_the_command_reads_the_ref_once_and_says_what_it_said_reading_it_twice(
    project: Path, calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    once = _gate("--baseline-ref", "main")
    assert once[0] == 1 and "and the baseline of main" in once[1]
    assert [c[0] for c in calls] == ["rev-parse", "cat-file", "diff", "ls-files"]
    calls.clear()
    failed = _gate("--baseline-ref", "nosuch")
    # The reading fails once, and the gate item says why, as it did when the items read it first.
    assert failed[0] == 1 and "FAILED gate - BaselineError: --retrieval-baseline-ref nosuch: no such" in failed[1]
    assert [c[1] for c in calls] == ["--show-toplevel", "--verify", "--is-inside-work-tree"]
    # Each reading by itself, as before (the items', then the run's): the same words, the same status.
    monkeypatch.setattr("retrieval.gate.outcome.read_base_branch", lambda ref, settings, profile: None)
    assert _gate("--baseline-ref", "main") == once and _gate("--baseline-ref", "nosuch") == failed
