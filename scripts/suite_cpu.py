"""Where the default test run's CPU goes: per test file, per test, and in the cycle collector.

    python scripts/suite_cpu.py                  the README's `pytest -n auto`, measured
    python scripts/suite_cpu.py --top 40 -- tests/unit/test_cli.py -p no:xdist
                                                 any pytest arguments after --

Wall time on a shared machine moves with its load; CPU seconds much less, so a change to the suite
is judged by these (paired: the same command before and after, alternated). Each test's figure is
the process's own CPU (every thread) over its setup, call and teardown, and the CPU of the children
it waited for; what runs outside the tests (start, collection, the controller, servers no test
waits for) is the difference between the run's total and their sum. Loaded by the script as a
pytest plugin (`-p suite_cpu`) in every process of the run; the figures go to a temporary folder,
removed at the end. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "SUITE_CPU_FOLDER"  # where each process writes its lines (the script sets it)

# --- The plugin, in each process of the measured run ---------------------------------------------

_seconds = [0.0, 0.0, 0.0]  # the cycle collector's CPU in this process, by generation
_passes = [0, 0, 0]
_started: list[float] = []


def _timed_pass(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[:] = [time.process_time()]
    elif _started:
        generation = info["generation"]
        _seconds[generation] += time.process_time() - _started[0]
        _passes[generation] += 1


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


_files: dict[str, Any] = {}  # this process's open files, by name: one open a run, not one a test


def _write(name: str, line: dict[str, Any]) -> None:
    path = Path(os.environ[FOLDER]) / f"{name}.{os.getpid()}.jsonl"
    out = _files.get(str(path))
    if out is None:
        out = _files[str(path)] = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed at unconfigure)
    out.write(json.dumps(line) + "\n")
    out.flush()


def pytest_configure(config: pytest.Config) -> None:
    if FOLDER in os.environ:
        gc.callbacks.append(_timed_pass)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    if FOLDER in os.environ:
        line = {"test": item.nodeid, "own": _cpu(resource.RUSAGE_SELF) - own}
        _write("tests", {**line, "children": _cpu(resource.RUSAGE_CHILDREN) - children})


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _timed_pass in gc.callbacks:  # a session run inside a longer process (pytester's) leaves none
        gc.callbacks.remove(_timed_pass)
    if FOLDER in os.environ:
        who = os.environ.get("PYTEST_XDIST_WORKER", "controller")
        _write("processes", {"who": who, "own": _cpu(resource.RUSAGE_SELF), "seconds": _seconds, "passes": _passes})
    for out in _files.values():
        out.close()
    _files.clear()


# --- The script ----------------------------------------------------------------------------------


def _lines(folder: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for path in folder.glob(f"{name}.*.jsonl") for line in path.read_text().splitlines()]


def report(folder: Path, total: float, wall: float, top: int) -> str:
    """The run's CPU, per process, per file and per test, from the plugin's lines in `folder`."""
    tests, processes = _lines(folder, "tests"), _lines(folder, "processes")
    own, children = Counter[str](), Counter[str]()
    count = Counter[str]()
    for line in tests:
        where = line["test"].split("::", 1)[0]
        own[where] += line["own"]
        children[where] += line["children"]
        count[where] += 1
    in_tests = sum(own.values()) + sum(children.values())
    said = [
        f"{len(tests)} tests, {wall:.1f} s wall, {total:.1f} CPU-s in all (user + sys, waited children included)",
        f"in the tests: {sum(own.values()):.1f} s their own, {sum(children.values()):.1f} s their children's; "
        f"outside them: {total - in_tests:.1f} s",
    ]
    for process in sorted(processes, key=lambda p: p["who"]):
        seconds, passes = process["seconds"], process["passes"]
        said.append(
            f"{process['who']}: {process['own']:.1f} CPU-s, cycle collector {sum(seconds):.2f} s "
            f"(generations 0/1/2: {seconds[0]:.2f}/{seconds[1]:.2f}/{seconds[2]:.2f} s in "
            f"{passes[0]}/{passes[1]}/{passes[2]} passes)"
        )
    said.append(f"\n{'own':>6} {'child':>6} {'tests':>5}  file")
    for where in sorted(own, key=lambda w: -(own[w] + children[w]))[:top]:
        said.append(f"{own[where]:6.2f} {children[where]:6.2f} {count[where]:5d}  {where}")
    said.append(f"\n{'CPU-s':>6}  test")
    for line in sorted(tests, key=lambda t: -(t["own"] + t["children"]))[:top]:
        said.append(f"{line['own'] + line['children']:6.3f}  {line['test']}")
    return "\n".join(said)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="files and tests listed (default 25)")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments (default: -n auto)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as folder:
        here = str(Path(__file__).resolve().parent)
        path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, FOLDER: folder, "PYTHONPATH": path}
        command = [sys.executable, "-m", "pytest", "-p", "suite_cpu", "-q", *(args.pytest_args or ["-n", "auto"])]
        before, started = _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall, total = time.perf_counter() - started, _cpu(resource.RUSAGE_CHILDREN) - before
        closing = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
        print(f"pytest exited {done.returncode}: {closing[0]}")
        print(report(Path(folder), total, wall, args.top))
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
