"""`python -m retrieval --gate`, its Markdown job summary and the pytest plugin give the same
verdicts, in the same words, on each case of the plugin's tests: all three render the verdict
model retrieval.gate.verdicts.verdicts_of makes of retrieval.gate.result's evaluation. Run on the
FIXTURE adopter project (test_gate_runs.py): the plugin in-process, the CLI with a user's command
line from the project's folder, in this process too (the bad-input case in its own, for its exit
status and its one line on stderr).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_gate_runs import _retriever, project  # noqa: F401  (project: a fixture)
from test_pytest_plugin import PYPROJECT, QUESTIONS, _run, _write_dataset

from retrieval.cli import main
from retrieval.report.gate_summary import summary_failures


def _worse(root: Path) -> None:
    _retriever(root, "-1.0")


def _another_k(root: Path) -> None:
    with (root / "pyproject.toml").open("a") as f:
        f.write("k = 1\n")


def damaged(root: Path) -> None:
    (root / "baselines" / "metrics.json").write_text('{"format": "retrieval-baseline-1",\n "profiles": {oops}\n')


def _no_baseline(root: Path) -> None:
    (root / "baselines" / "metrics.json").unlink()


def _unproduced(root: Path) -> None:
    (root / "pyproject.toml").write_text(PYPROJECT.format(methods='["myret:factory"]', profile="local"))


def _ungated(root: Path) -> None:
    (root / "other.py").write_text((root / "myret.py").read_text().replace('name = "overlap"', 'name = "other"'))
    (root / "pyproject.toml").write_text(
        PYPROJECT.format(methods='["bm25", "myret:factory", "other:factory"]', profile="local")
    )


def _question_added(root: Path) -> None:
    _write_dataset(root / "data" / "qa", [*QUESTIONS, ("q5", "changer la langue", "exact", ["d6"])])


def _snapshot_moved(root: Path) -> None:
    path = root / "baselines" / "rankings" / "local.json"
    path.write_text(path.read_text().replace('"q1": ["d1", "d2"', '"q1": ["d2", "d1"', 1))


CASES: dict[str, Callable[[Path], None]] = {
    "holds": lambda root: None,
    "worse retriever": _worse,
    "another k": _another_k,
    "damaged baseline": damaged,
    "no baseline": _no_baseline,
    "figures not produced": _unproduced,
    "method without baseline": _ungated,
    "question added": _question_added,
    "snapshot moved": _snapshot_moved,
}


def _cli_here(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m retrieval ARGS` from the project's folder, in this process; the project's own
    modules (myret.py) forgotten after it, as the next process would not know them."""
    known, path = set(sys.modules), list(sys.path)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.chdir(root), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(args))
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - known:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(root)):
                del sys.modules[name]
    return subprocess.CompletedProcess(["python", "-m", "retrieval", *args], status, out.getvalue(), err.getvalue())


def _plugin(result: pytest.RunResult) -> dict[str, str]:
    prefix = "FAILED pyproject.toml::test_gate["
    found = {}
    for line in result.outlines:
        if line.startswith(prefix):
            name, message = line.removeprefix(prefix).split("] - ", 1)
            found[name] = message
    return found


def _cli(output: str) -> dict[str, str]:
    return dict(
        line.removeprefix("FAILED ").split(" - ", 1) for line in output.splitlines() if line.startswith("FAILED ")
    )


@pytest.mark.parametrize("case", list(CASES))
def test_the_cli_gives_the_plugins_verdicts_in_its_words(
    pytester: pytest.Pytester,
    project: Path,  # noqa: F811
    case: str,
) -> None:
    CASES[case](project)
    plugin = _run(pytester)
    summary = project.parent / "summary.md"
    done = _cli_here(project, "--gate", "--summary-output", str(summary))
    assert done.stderr == ""
    assert _cli(done.stdout) == _plugin(plugin)
    assert done.returncode == plugin.ret == (0 if case == "holds" else 1)
    assert done.stdout.splitlines()[-1].startswith("retrieval gate (profile local): ")
    # The job summary: the same verdict, each failed item in the same words.
    markdown = summary.read_text()
    assert summary_failures(markdown) == _plugin(plugin)
    verdict = markdown.splitlines()[1]
    failed = len(_plugin(plugin))
    held = done.stdout.splitlines()[-1].split(": ", 1)[1].split(" checks held")[0]  # "N of M"
    total = held.split(" of ")[1]
    if failed:
        assert verdict.startswith("## Retrieval gate: FAILED, "), verdict
        assert f"FAILED, {failed} of {total} items" in verdict or "nothing compared" in verdict
    else:
        assert verdict.startswith(f"## Retrieval gate: PASSED, all {total} items held"), verdict


def test_bad_input_exits_2_in_one_line(pytester: pytest.Pytester, project: Path) -> None:  # noqa: F811
    with (project / "pyproject.toml").open("a") as f:
        f.write("prices = 3\n")
    # In this process (the CLI's main(), 2.6 s -> 0.3 s): `python -m retrieval` in a process of its own,
    # its status the process's, is test_gate_reference.py's and test_public_api.py's.
    done = _cli_here(project, "--gate")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f'error: {project}/pyproject.toml, line 9: prices must be a table of models ([prices."MODEL"]), got 3.\n'
    )
    # The plugin says the same in its gate item.
    _run(pytester).stdout.fnmatch_lines(["FAILED pyproject.toml::test_gate?gate? - ConfigError: *prices must be*"])
