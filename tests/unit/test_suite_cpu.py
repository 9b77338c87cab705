"""scripts/suite_cpu.py: its plugin's lines from a real pytest session, and the report made of them.

The CPU seconds are measurements: what is checked is which lines are written and how the report
sums and orders them, on FIXTURE lines where figures are compared."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any

import pytest
from script_modules import load_script

suite_cpu = load_script("suite_cpu")


def _read(folder: Path, name: str) -> list[dict[str, Any]]:
    paths = sorted(folder.glob(f"{name}.*.jsonl"))
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def test_the_plugin_writes_a_line_per_test_and_one_for_the_process(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(suite_cpu.FOLDER, str(tmp_path))
    pytester.makepyfile(
        test_measured="""
import subprocess, sys

def test_alone():
    assert sum(range(1000)) == 499500

def test_with_a_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""
    )
    callbacks = list(gc.callbacks)
    pytester.runpytest_inprocess("-p", "suite_cpu", "-p", "no:cacheprovider").assert_outcomes(passed=2)
    assert gc.callbacks == callbacks  # the collector's timing left with the session
    tests = {line["test"]: line for line in _read(tmp_path, "tests")}
    assert sorted(tests) == ["test_measured.py::test_alone", "test_measured.py::test_with_a_child"]
    assert tests["test_measured.py::test_alone"]["children"] == 0.0  # it waited for no child
    assert tests["test_measured.py::test_with_a_child"]["children"] > 0.0  # an interpreter's start
    (process,) = _read(tmp_path, "processes")
    assert process["who"] == os.environ.get("PYTEST_XDIST_WORKER", "controller")
    assert len(process["seconds"]) == len(process["passes"]) == 3


def test_the_report_sums_each_file_and_lists_the_costliest_first(tmp_path: Path) -> None:
    # FIXTURE lines: two files, three tests, two processes.
    lines = [
        {"test": "tests/a.py::test_1", "own": 0.5, "children": 0.0},
        {"test": "tests/b.py::test_1", "own": 0.25, "children": 1.0},
        {"test": "tests/a.py::test_2", "own": 0.25, "children": 0.0},
    ]
    (tmp_path / "tests.1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    processes = [
        {"who": "gw0", "own": 1.5, "seconds": [0.25, 0.0, 0.5], "passes": [10, 1, 1]},
        {"who": "controller", "own": 0.5, "seconds": [0.0, 0.0, 0.0], "passes": [2, 0, 0]},
    ]
    (tmp_path / "processes.1.jsonl").write_text("".join(json.dumps(p) + "\n" for p in processes))
    said = suite_cpu.report(tmp_path, total=4.0, wall=3.0, top=2).splitlines()
    assert said == [
        "3 tests, 3.0 s wall, 4.0 CPU-s in all (user + sys, waited children included)",
        "in the tests: 1.0 s their own, 1.0 s their children's; outside them: 2.0 s",
        "controller: 0.5 CPU-s, cycle collector 0.00 s (generations 0/1/2: 0.00/0.00/0.00 s in 2/0/0 passes)",
        "gw0: 1.5 CPU-s, cycle collector 0.75 s (generations 0/1/2: 0.25/0.00/0.50 s in 10/1/1 passes)",
        "",
        "   own  child tests  file",
        "  0.25   1.00     1  tests/b.py",
        "  0.75   0.00     2  tests/a.py",
        "",
        " CPU-s  test",
        " 1.250  tests/b.py::test_1",
        " 0.500  tests/a.py::test_1",
    ]
