"""The base branch's baseline in the gate's structure: its figures are gate items named at
collection (one item per figure, compared with the pull request's baseline and with the base
branch's: `table-mrr`; what the ref gates as a whole: `against-main`), `python -m retrieval
--gate --baseline-ref` says what the plugin says, an update tried without writing says and
refuses what the written one does and touches nothing, and a half-written baseline set is put
back before the items are named.

On the FIXTURE trust project (trust_project.py): one in-process retriever, no model, no cassette.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_gate_cli import _cli_here
from test_pytest_plugin import UNREAD
from trust_project import commit_on_main, failing, gate, make_project, worse

from retrieval.gate.accept import accept, tried_update
from retrieval.gate.schema import BaselineError, load_baseline

# The plugins no assertion here reads are off in these runs (test_pytest_plugin.py).
PLAIN = ("-p", "no:cacheprovider", "-p", "no:randomly", *UNREAD, "-m", "regression")
QUIET = ("-vv", *PLAIN)  # -vv: the failure lines in full
LIST = (*PLAIN, "--collect-only", "-q")
BASELINE = Path("baselines/metrics.json")
# The project's items: the gate, the integrity items, the baseline's five figures (the retriever
# is a `module:factory`, so the configuration names no snapshot item; the snapshot file does).
OWN = [
    "gate",
    "secrets",
    "cassettes",
    "configuration",
    "dataset",
    "coverage",
    "table-recall@2-exact",
    "table-recall@2-paraphrase",
    "table-degraded",
    "table-mrr",
    "table-recall@2",
]
AGAINST_MAIN = [*OWN[:6], "against-main", *OWN[6:]]
FALLEN = ["table-mrr", "table-recall@2", "table-recall@2-exact"]
DEAD = 2**22 + 7  # a process id no process has


def _pull_request(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project committed on `main`, made worse on q2 in the working tree (not committed)."""
    root = pytester.path
    monkeypatch.chdir(root)
    make_project(root)
    commit_on_main(root)
    worse(root)
    # Lowered on purpose, so that only the comparison with main's baseline fails.
    accept(gate(root), allow_regression="q2 is out of scope")
    path = root / BASELINE
    data = json.loads(path.read_text())
    data["profiles"]["local"].pop("accepted")
    path.write_text(json.dumps(data))
    return root


def _ids(result: pytest.RunResult) -> list[str]:
    prefix = "retrieval.toml::test_gate["
    return [line.removeprefix(prefix).removesuffix("]") for line in result.outlines if line.startswith(prefix)]


def _failures(output: list[str], prefix: str) -> dict[str, str]:
    """Failed item name -> its message, from lines `<prefix><name>] - <message>` (or `<name> - `)."""
    found = {}
    for line in output:
        if line.startswith(prefix):
            name, message = line.removeprefix(prefix).split(" - ", 1)
            found[name.removesuffix("]")] = message
    return found


def test_the_refs_figures_are_gate_items_named_at_collection(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pull_request(pytester, monkeypatch)
    listed = pytester.runpytest_inprocess(*LIST, "--retrieval-baseline-ref", "main")
    assert listed.ret == pytest.ExitCode.OK
    assert _ids(listed) == [*AGAINST_MAIN, "table-top-10"]
    listed.stdout.fnmatch_lines(["retrieval gate (profile local): 13 items collected, nothing compared*"])
    # Each drop against main fails the item of its figure, by the name collection gave it.
    ran = pytester.runpytest_inprocess(*QUIET, "--retrieval-baseline-ref", "main")
    ran.assert_outcomes(passed=10, failed=3)
    failed = _failures(ran.outlines, "FAILED retrieval.toml::test_gate[")
    assert sorted(failed) == FALLEN
    assert failed["table-mrr"].startswith("table mrr fell below the baseline of main: baseline 1.0000, ")
    # Its drop rests on a document nobody judged, new in table's top 5: undecided (still a failure).
    assert "Undecided: judge 1 document(s): the drop rests on the 1 unjudged document(s)" in failed["table-mrr"]
    # The update that records the reason: its items against main are judged under it, and pass.
    updated = pytester.runpytest_inprocess(
        *QUIET, "--update-baseline", "--allow-regression", "q2 is out of scope", "--retrieval-baseline-ref", "main"
    )
    updated.assert_outcomes(passed=13)
    updated.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): 1 method, 5 figures held, 0 fell, 1 top-10 snapshots "
            "matched, 0 moved; compared with main's baseline too; drops accepted against main: q2 is out of scope"
        ]
    )
    # A ref that cannot be read: the gate item says why, in one line, and nothing else is compared.
    unknown = pytester.runpytest_inprocess(*QUIET, "--retrieval-baseline-ref", "nosuchref")
    unknown.assert_outcomes(failed=13)
    unknown.stdout.fnmatch_lines(
        [
            "FAILED retrieval.toml::test_gate[[]gate] - BaselineError: --retrieval-baseline-ref nosuchref: no such "
            "commit in this repository*"
        ]
    )


def test_the_cli_gate_with_a_ref_gives_the_plugins_verdicts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _pull_request(pytester, monkeypatch)
    plugin = pytester.runpytest_inprocess(*QUIET, "--retrieval-baseline-ref", "main")
    done = subprocess.run(
        [sys.executable, "-m", "retrieval", "--gate", "--baseline-ref", "main"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stderr == ""
    cli = _failures(done.stdout.splitlines(), "FAILED ")
    assert cli == _failures(plugin.outlines, "FAILED retrieval.toml::test_gate[")
    assert sorted(cli) == FALLEN
    assert done.returncode == plugin.ret == 1
    assert done.stdout.splitlines()[-1] == (
        "retrieval gate (profile local): 10 of 13 checks held; compared with main's baseline too"
    )
    # The drops accepted against main, with the reason: every check holds, the line says why.
    # In this process (the CLI's main(), as test_gate_cli.py's cases): the process's own status is the case above's.
    accept(gate(root, ref="main"), allow_regression="q2 is out of scope")
    done = _cli_here(root, "--gate", "--baseline-ref", "main")
    assert (done.returncode, done.stdout) == (
        0,
        "retrieval gate (profile local): 13 of 13 checks held; compared with main's baseline too; drops accepted "
        "against main: q2 is out of scope\n",
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return make_project(tmp_path)


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the baseline set's folder, hidden ones (a journal, a temporary file) too."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "baselines").rglob("*")) if p.is_file()}


def test_an_update_tried_without_writing_says_and_refuses_what_the_written_one_does(project: Path) -> None:
    worse(project)
    before = _files(project)
    with pytest.raises(BaselineError) as tried:
        tried_update(gate(project))
    with pytest.raises(BaselineError) as written:
        accept(gate(project))
    assert str(tried.value) == str(written.value)
    assert str(tried.value).startswith("refusing to lower the baseline of profile 'local': table recall@2, table mrr")
    assert _files(project) == before
    # With the reason: the diff, and the result as the written update would leave it, nothing written.
    result = gate(project)
    diff, updated = tried_update(result, allow_regression="q2 is out of scope")
    assert _files(project) == before
    assert "  accepted: q2 is out of scope" in diff.splitlines()
    assert updated.acceptance is not None and updated.acceptance["reason"] == "q2 is out of scope"
    assert failing(updated) == [] and failing(result) != []  # the result itself is a value: left as it was
    again = gate(project)
    assert accept(again, allow_regression="q2 is out of scope") == diff
    assert load_baseline(project / BASELINE)["profiles"]["local"] == updated.entry
    assert _files(project) != before


def test_a_half_written_set_is_put_back_before_the_gate_names_its_items(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pytester.path
    monkeypatch.chdir(root)
    make_project(root)
    before = _files(root)
    # An update killed mid-commit: the new baseline moved in (damaged here), the old one's
    # backup and the journal naming it left behind.
    backup = root / "baselines" / f".metrics.json.old-{DEAD}-abc"
    os.link(root / BASELINE, backup)
    moved_in = root / "baselines" / "moved-in"
    moved_in.write_text("{broken: the new file moved in before the kill")
    os.replace(moved_in, root / BASELINE)
    tmp = root / "baselines" / f".metrics.json.{DEAD}-abc.tmp"
    tmp.write_text("{half")
    journal = root / "baselines" / ".metrics.json.journal"
    journal.write_text(json.dumps({"pid": DEAD, "files": [[str(root / BASELINE), str(tmp), str(backup)]]}))
    listed = pytester.runpytest_inprocess(*LIST)
    assert listed.ret == pytest.ExitCode.OK
    # The items of the restored baseline, not those of an unreadable one (the gate's alone).
    assert _ids(listed) == [*OWN, "table-top-10"]
    assert _files(root) == before
