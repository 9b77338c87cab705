"""When the gate works, and what a run that did not gate says: the plugin's items are known at
collection and do their work when they run (issue 24), under one process or pytest-xdist; a
printed node id re-runs; what a conftest, a filter or a deselection does to the gate's items;
`required = true` (issue 25). Real pytest sessions on the FIXTURE adopter project of
test_pytest_plugin.py (its own dataset, retriever and configuration; no test file, no conftest).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_embeddings import FakeEmbeddingsServer
from test_pytest_plugin import _ACCEPTED, DOCUMENTS, PYPROJECT, RETRIEVER, _run, _write_dataset

# FIXTURE retriever that appends one line to a counter file per evaluation (rank() is called
# once per evaluation): how many times the gate evaluated, whatever the process.
COUNTING = RETRIEVER.replace(
    "    def rank(self, context):\n",
    "    def rank(self, context):\n        with open(COUNTER, 'a') as f:\n            f.write('evaluated\\n')\n",
)
FIGURE = "pyproject.toml::test_gate[overlap-mrr]"


def _retriever(project: Path, sign: str) -> None:
    code = COUNTING.format(sign=sign)
    (project / "myret.py").write_text(f"COUNTER = {str(_counter(project))!r}\n{code}")
    shutil.rmtree(project / "__pycache__", ignore_errors=True)


def _counter(project: Path) -> Path:
    return project / "evaluations.log"


def _evaluations(project: Path) -> int:
    path = _counter(project)
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """FIXTURE: the adopter project (bm25 and its own counting retriever) after `pytest --update-baseline`.

    Its baseline files are test_pytest_plugin.py's accepted project's (_ACCEPTED): the same project
    file and data, and this retriever ranks as that one, so the same bytes; one update a process
    makes them for both modules and test_gate_cli.py."""
    root = pytester.path
    _write_dataset(root / "data" / "qa")
    _retriever(root, "1.0")
    (root / "pyproject.toml").write_text(PYPROJECT.format(methods='["bm25", "myret:factory"]', profile="local"))
    if not _ACCEPTED:
        _run(pytester, "--update-baseline").assert_outcomes(passed=7)
        _ACCEPTED.update({str(f.relative_to(root)): f.read_bytes() for f in (root / "baselines").rglob("*.json")})
    for name, data in _ACCEPTED.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    _counter(root).unlink(missing_ok=True)
    return root


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every connection attempted in this process (the runs are in-process): refused and noted."""
    tried: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        tried.append(address)
        raise ConnectionRefusedError(f"test guard: no connection ({address})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield tried


def test_collect_only_with_update_or_record_writes_nothing_and_connects_nowhere(
    pytester: pytest.Pytester, project: Path, connections: list[object]
) -> None:
    # A profile whose recording calls an embedding server (nothing listens on port 9; one attempt,
    # not 4 over 7 s of backoff), and a worse retriever: an update would rewrite the baseline, a
    # recording would connect.
    with (project / "pyproject.toml").open("a") as f:
        f.write(
            "\n[tool.retrieval.profiles.remote]\nembedding_provider = 'openai'\nembedding_model = 'fixture-e5'\n"
            "embedding_base_url = 'http://127.0.0.1:9/v1'\ndimensions = 4\nretry_attempts = 1\n"
        )
    _retriever(project, "-1.0")
    before = _files(project)
    for args in (("--update-baseline",), ("--update-baseline", "--allow-regression", "a reason"), ("--record",)):
        listed = _run(pytester, "--collect-only", "-q", *args)
        assert listed.ret == pytest.ExitCode.OK, args
        listed.stdout.fnmatch_lines(["retrieval gate (profile local): 18 items collected, nothing compared*"])
    assert _files(project) == before and connections == [] and _evaluations(project) == 0
    (project / "pyproject.toml").write_text(
        (project / "pyproject.toml").read_text().replace('["bm25", "myret:factory"]', '["bm25", "vector"]')
    )
    before = _files(project)
    recorded = _run(pytester, "--collect-only", "--record", "--retrieval-profile", "remote")
    assert recorded.ret == pytest.ExitCode.OK
    assert _files(project) == before and connections == []
    # The guard sees a recording that does connect: the check above can fail.
    _run(pytester, "--record", "--retrieval-profile", "remote")
    assert connections


@pytest.mark.slow  # real pytest-xdist workers
def test_the_gate_evaluates_once_per_run_in_one_process_and_under_xdist(
    pytester: pytest.Pytester, project: Path
) -> None:
    _retriever(project, "-1.0")
    single = _run(pytester, "-p", "no:xdist")
    single.assert_outcomes(passed=13, failed=5)
    assert _evaluations(project) == 1
    _counter(project).unlink()
    pytester.makepyfile(**{f"test_own_{i}": f"def test_own_{i}():\n    pass\n" for i in range(4)})
    split = _run(pytester, "-n", "2")
    split.assert_outcomes(passed=17, failed=5)
    # Two workers, one evaluation: the gate's items went to one worker.
    assert _evaluations(project) == 1
    split.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): 2 methods, 6 figures held, 4 fell, "
            "1 top-10 snapshots matched, 1 moved"
        ]
    )
    assert split.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.slow  # a shell and a pytest process
def test_a_printed_node_id_reruns_as_printed_through_a_shell(pytester: pytest.Pytester, project: Path) -> None:
    _retriever(project, "-1.0")
    failed = [line.split(" - ")[0].removeprefix("FAILED ") for line in _run(pytester).outlines]
    assert FIGURE in failed
    # Unquoted, as a user pastes it: the id holds nothing a shell or pytest's parser rewrites.
    done = subprocess.run(
        f"{sys.executable} -m pytest -p no:cacheprovider -p no:randomly {FIGURE}",
        shell=True,
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
        check=False,
    )
    assert done.returncode == 1, done.stdout
    assert "1 failed in" in done.stdout and f"FAILED {FIGURE} - overlap mrr" in done.stdout


def test_a_deselected_gate_item_counts_as_not_run_and_an_update_refuses(
    pytester: pytest.Pytester, project: Path
) -> None:
    deselected = _run(pytester, "--deselect", FIGURE)
    deselected.assert_outcomes(passed=17, deselected=1)
    deselected.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): 2 methods, 9 figures held, 0 fell, 2 top-10 snapshots "
            "matched, 0 moved; 1 of its 18 items not run (stopped early or deselected): not known to hold",
            "retrieval gate not run: 1 of its 18 items deselected (--deselect); pyproject.toml configures it*",
        ]
    )
    _retriever(project, "-1.0")
    _counter(project).unlink()
    before = _files(project)
    for flag in ("--update-baseline", "--record"):
        refused = _run(pytester, flag, "--deselect", FIGURE)
        assert refused.ret == pytest.ExitCode.TESTS_FAILED
        refused.stdout.fnmatch_lines(
            [
                f"FAILED pyproject.toml::test_gate[gate] - {flag} refused: 1 of the gate's items were deselected "
                "(--deselect); run it on the whole gate."
            ]
        )
        assert _files(project) == before and _evaluations(project) == 0


def test_an_xfail_put_on_the_gate_by_a_conftest_does_not_excuse_it(pytester: pytest.Pytester, project: Path) -> None:
    # Hole 1 of issue 24: an xfail let a failing gate exit 0, and the summary read "matched".
    pytester.makeconftest(
        "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        item.add_marker(pytest.mark.xfail(reason='flaky'))\n"
    )
    _retriever(project, "-1.0")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=13, failed=5)
    result.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): 2 methods, 6 figures held, 4 fell, "
            "1 top-10 snapshots matched, 1 moved",
            "retrieval gate FAILED: gate item(s) skipped: pyproject.toml::test_gate?overlap-recall@5-exact?, *"
            "pyproject.toml::test_gate?overlap-top-10?. The gate never skips*",
            "FAILED pyproject.toml::test_gate?overlap-top-10? - overlap top 10 changed for 4 question(s)*",
        ]
    )


def test_a_gate_collected_whose_items_none_ran_fails(pytester: pytest.Pytester, project: Path) -> None:
    # Hole 2: a hook that runs none of the gate's items (and reports nothing) cannot make it pass.
    pytester.makeconftest(
        "import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_protocol(item):\n"
        "    return True if 'test_gate[' in item.nodeid else None\n"
    )
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["retrieval gate FAILED: the gate was collected but none of its items ran: nothing was compared."]
    )
    assert _evaluations(project) == 0


def test_a_method_that_ran_without_a_baseline_figure_fails_the_coverage_item(
    pytester: pytest.Pytester, project: Path
) -> None:
    # Hole 3: the "method ran but has no baseline figure" item must fail.
    (project / "other.py").write_text((project / "myret.py").read_text().replace('name = "overlap"', 'name = "other"'))
    (project / "pyproject.toml").write_text(
        PYPROJECT.format(methods='["bm25", "myret:factory", "other:factory"]', profile="local")
    )
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "FAILED pyproject.toml::test_gate[coverage] - other ran but has no baseline figure: add it with "
            "`pytest --update-baseline`."
        ]
    )


# The whole gate run with `required = true` beside the project's own test: the same files and the same
# outcome in every case below, so the first case of a process runs it and the others read its status.
_REQUIRED_MET: list[int] = []


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("-m", "not regression"), 'all 18 of its items deselected (-m "not regression")'),
        (("-k", "own"), 'all 18 of its items deselected (-k "own")'),
        (("--deselect", "pyproject.toml"), "all 18 of its items deselected (--deselect)"),
        (("test_own.py",), "only tests named (test_own.py)"),
        # Under xdist the controller, which collects nothing, names the run's filters.
        pytest.param(
            ("-n", "2", "-m", "not regression"),
            'no item of it selected (-m "not regression")',
            marks=pytest.mark.slow,  # real pytest-xdist workers
        ),
    ],
    ids=["marker", "keyword", "deselect", "test file", "xdist"],
)
def test_a_configured_gate_not_run_says_why_and_fails_when_required(
    pytester: pytest.Pytester, project: Path, args: tuple[str, ...], why: str
) -> None:
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    said = _run(pytester, *args)
    assert said.ret == pytest.ExitCode.OK
    line = f"retrieval gate not run: {why}; pyproject.toml configures it (`required = true` fails such a run)"
    said.stdout.fnmatch_lines([line])
    with (project / "pyproject.toml").open("a") as f:
        f.write("required = true\n")
    failed = _run(pytester, *args)
    assert failed.ret == pytest.ExitCode.TESTS_FAILED
    failed.stdout.fnmatch_lines(
        [f"retrieval gate FAILED: required = true in [[]tool.retrieval], but this run did not gate: {why}."]
    )
    if not _REQUIRED_MET:
        _REQUIRED_MET.append(_run(pytester).ret)
    assert _REQUIRED_MET[0] == pytest.ExitCode.OK  # the whole gate ran: required is met


def test_a_baselines_folder_without_configuration_fails(pytester: pytest.Pytester, project: Path) -> None:
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    (project / "pyproject.toml").write_text('[project]\nname = "adopter"\nversion = "0"\n')
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "retrieval gate FAILED: baselines/metrics.json holds a retrieval baseline but no [[]tool.retrieval] "
            "(or retrieval.toml) configures the gate: this run gated nothing. Restore the configuration, or "
            "remove baselines/ if the gate was dropped on purpose."
        ]
    )
    (project / "baselines" / "metrics.json").write_text(json.dumps({"another": "tool"}))
    assert _run(pytester).ret == pytest.ExitCode.OK  # another tool's file: not the gate's


def test_a_session_that_collected_no_test_and_gated_nothing_it_should_have_fails(
    pytester: pytest.Pytester, project: Path
) -> None:
    # No test at all (pytest's exit 5, "no tests collected") does not excuse the gate's failure.
    (project / "pyproject.toml").write_text('[project]\nname = "adopter"\nversion = "0"\n')
    result = _run(pytester)
    result.stdout.fnmatch_lines(["retrieval gate FAILED: baselines/metrics.json holds a retrieval baseline *"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (project / "baselines" / "metrics.json").unlink()
    assert _run(pytester).ret == pytest.ExitCode.NO_TESTS_COLLECTED  # nothing to gate: pytest's own outcome


def test_an_update_is_written_at_session_finish_only_when_every_gate_item_ran(
    pytester: pytest.Pytester, project: Path
) -> None:
    # -x stops the session at the project's own failing test, before the gate's items: the
    # update is not written (before, it was written at collection, whatever ran after).
    pytester.makepyfile(test_own="def test_own():\n    assert False\n")
    _retriever(project, "-1.0")
    before = _files(project)
    stopped = _run(pytester, "--update-baseline", "--allow-regression", "overlap is worse on purpose", "-x")
    assert stopped.ret == pytest.ExitCode.TESTS_FAILED
    stopped.stdout.fnmatch_lines(["retrieval gate FAILED: the gate was collected but none of its items ran*"])
    assert _files(project) == before
    (project / "test_own.py").unlink()
    updated = _run(pytester, "--update-baseline", "--allow-regression", "overlap is worse on purpose")
    updated.assert_outcomes(passed=18)
    updated.stdout.fnmatch_lines(
        ["*baseline updated*", "  overlap mrr: 1.0000 -> 0.1667 (-0.8333)", "*accepted: overlap is worse on purpose"]
    )
    assert _files(project) != before


def test_a_recording_is_committed_at_session_finish_only_when_every_gate_item_ran(
    pytester: pytest.Pytester, project: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    (project / "pyproject.toml").write_text(
        PYPROJECT.format(methods='["bm25", "vector"]', profile="fake")
        + "\n[tool.retrieval.profiles.fake]\nembedding_provider = 'openai'\nembedding_model = 'fixture-e5'\n"
        f"embedding_base_url = '{embeddings_server.url}/v1'\ndimensions = 4\ninput_type = true\n"
    )
    _run(pytester, "--record", "--update-baseline").assert_outcomes(passed=8)
    cassettes, vectors = project / "cassettes", project / "vectors"
    recorded, stored = _files(cassettes), _files(vectors)
    # A conftest fails one gate item after the evaluation ran (the `gate` item runs first), and
    # -x stops the session there: the new recording is discarded, nothing left staged.
    pytester.makeconftest(
        "def pytest_runtest_setup(item):\n"
        "    if item.nodeid.endswith('[dataset]'):\n"
        "        raise RuntimeError('stopped here')\n"
    )
    # A document added: the recording embeds it and writes a corpus vector segment of its own.
    _write_dataset(project / "data" / "qa", documents=[*DOCUMENTS, ("d9", "Nouveau", "Un document ajouté.")])
    stopped = _run(pytester, "--record", "-x")
    assert stopped.ret == pytest.ExitCode.TESTS_FAILED
    stopped.stdout.fnmatch_lines(
        ["retrieval gate FAILED: --record committed nothing (the cassettes are as they were): * items did not run."]
    )
    assert _files(cassettes) == recorded and sorted(p.name for p in cassettes.iterdir()) == ["fake"]
    assert _files(vectors) == stored  # the corpus vector segment the discarded recording wrote: removed
    _write_dataset(project / "data" / "qa")
    # Every item ran (one failed, not `secrets`): the recording is committed, with its drift.
    committed = _run(pytester, "--record")
    assert committed.ret == pytest.ExitCode.TESTS_FAILED
    committed.stdout.fnmatch_lines(["*= recording drift =*"])
    assert _files(cassettes) != recorded and sorted(p.name for p in cassettes.iterdir()) == ["fake"]
