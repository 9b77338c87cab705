"""Measure the README's fresh-clone figures, and render them into the README and docs/performance.md.

    python scripts/suite_figures.py measure   clone this commit, run .ci/run in the clone (the default
                                              run, then the slow set), time it, write
                                              docs/suite-figures.json and the two blocks
    python scripts/suite_figures.py           render the blocks again from docs/suite-figures.json
    python scripts/suite_figures.py --check   exit 1 if a block differs from the measurement

The figures are a measurement, never asserted: what a test checks is that the pages show the
measurement as it was taken (the blocks are generated), and that it was taken on this suite
(tests/unit/test_readme.py compares its test count with the session's own). A measurement
names its commit, its machine and the machine's load, since a shared machine's times are not an
idle one's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from generated_block import BlockError, replace_block, write_or_check
from machine_watch import MachineWatch

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "suite-figures.json"
# The measured run's whole output, kept for a look (the cache folder is not committed).
LOG = ROOT / ".cache" / "suite-figures.log"
PAGES = (ROOT / "README.md", ROOT / "docs" / "performance.md")
START = "<!-- suite-figures:start -->"
END = "<!-- suite-figures:end -->"
NOTE = "<!-- Generated from docs/suite-figures.json by `python scripts/suite_figures.py`; do not edit by hand. -->"
# pytest's closing line: "=== 1560 passed, 6 skipped in 116.32s (0:01:56) ===", without the
# rules under -q ("35 passed, 1596 deselected in 29.31s").
_SUMMARY = re.compile(r"^(?:=+ )?(?P<counts>\d+ \w+(?:, \d+ \w+)*) in (?P<seconds>[\d.]+)s\b.*$", re.M)
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|warnings?|deselected)")
# A figure of the machine's speed at the time, as the project's other measurements give it.
CALIBRATION = "sum(range(3*10**7))"
# Above this share of the cores taken by other processes or stolen by the host, a run's times
# are not an idle machine's.
QUIET = 0.05


class FiguresError(BlockError):
    """The figures cannot be measured or placed; the message says what to fix."""


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    memory = ""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        found = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
        cpu = found[1].strip() if found else cpu
        total = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(encoding="utf-8"), re.M)
        memory = f"{int(total[1]) / 2**20:.1f} GiB" if total else ""
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory": memory,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


def _calibrate() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", CALIBRATION], check=True)
    return round(time.perf_counter() - started, 2)


def _load() -> float:
    return round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else 0.0


def others_share(figures: Mapping[str, Any]) -> float:
    """The share of the machine's cores that other processes (and the host, by stealing) took
    while the run ran: the figure that says whether its times are an idle machine's."""
    capacity = figures["machine"]["cores"] * figures["total_seconds"]
    return (figures["other_cpu_seconds"] + figures["stolen_cpu_seconds"]) / capacity if capacity else 0.0


def _timed(command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout)
    seconds = round(time.perf_counter() - started, 1)
    if done.returncode != 0:
        LOG.parent.mkdir(parents=True, exist_ok=True)
        LOG.write_text(done.stdout + done.stderr, encoding="utf-8")
        raise FiguresError(
            f"`{' '.join(command)}` exited {done.returncode} in {cwd} (its output: {LOG}):\n{done.stdout[-3000:]}"
        )
    return seconds, done.stdout + done.stderr


def parse_summaries(output: str) -> list[dict[str, Any]]:
    """pytest's closing lines, in order (`.ci/run` runs two sessions): each one's counts by
    outcome and its own seconds."""
    found = list(_SUMMARY.finditer(output))
    if not found:
        raise FiguresError(f"no pytest summary line in the output (kept in {LOG}):\n{output[-1500:]}")
    summaries = []
    for line in found:
        counts = {
            word.rstrip("s") if word.startswith(("error", "warning")) else word: int(n)
            for n, word in _COUNT.findall(line["counts"])
        }
        summaries.append({"counts": counts, "seconds": float(line["seconds"]), "line": line[0].strip("= ")})
    return summaries


def parse_summary(output: str) -> dict[str, Any]:
    """pytest's last closing line: its counts by outcome and its own seconds."""
    return parse_summaries(output)[-1]


def collected(counts: Mapping[str, int]) -> int:
    """The tests a run selected: every outcome but warnings and deselected ones."""
    return sum(n for outcome, n in counts.items() if outcome not in {"warning", "deselected"})


def _collect(clone: Path, env: Mapping[str, str], timeout: float, *selection: str) -> int:
    """The clone's test count (of the default run, or of `selection`: `-m slow`), collected with
    this interpreter (the clone's package first on the path)."""
    env = {**env, "PYTHONPATH": str(clone)}
    _, output = _timed(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *selection], clone, env, timeout
    )
    # "2076 tests collected", or "2060/2076 tests collected (16 deselected)": the first is the run's.
    found = re.search(r"^(\d+)(?:/\d+)? tests? collected", output, re.M)
    if not found:
        raise FiguresError(f"no test count in `pytest --collect-only` of {clone}")
    return int(found[1])


def _placeholder(commit: str) -> dict[str, Any]:
    return {
        "commit": commit,
        "date": "",
        "machine": _machine(),
        "load_before": 0.0,
        "busy_cpu_seconds": 0.0,
        "other_cpu_seconds": 0.0,
        "stolen_cpu_seconds": 0.0,
        "calibration_seconds": [0.0, 0.0],
        "calibration": f'python3 -c "{CALIBRATION}"',
        "command": "CI=true bash .ci/run",
        "total_seconds": 0.0,
        "tests": 0,
        "outcomes": {},
        "pytest_seconds": 0.0,
        "slow_tests": 0,
        "slow_outcomes": {},
        "slow_seconds": 0.0,
        "evaluation_seconds": 0.0,
        "gate_seconds": 0.0,
        "gate_line": "",
    }


def _expect(clone: Path, tests: int, commit: str) -> None:
    """The clone's pages told the count its run will check (tests/unit/test_readme.py compares the
    committed measurement's count with the session's): the measured run checks the new one."""
    path = clone / FIGURES.relative_to(ROOT)
    # An older measurement may lack a figure this version renders: the placeholder's stands in.
    figures = {**_placeholder(commit), **(read_figures(path) if path.exists() else {})}
    figures["tests"] = tests
    path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    block = render_block(figures)
    for page in PAGES:
        target = clone / page.relative_to(ROOT)
        target.write_text(replace_block(target.read_text(encoding="utf-8"), START, END, block, page), encoding="utf-8")


def measure(timeout: float = 3600) -> dict[str, Any]:
    """Clone HEAD, run `.ci/run` there as CI does (CI=true), then the evaluation and the gate alone."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    if dirty.strip():
        print("note: uncommitted changes are not measured: the clone is of HEAD", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="suite-figures-"))
    try:
        clone = work / "clone"
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
        # A worktree's clone checks out the repository's HEAD branch: this commit is the one measured.
        subprocess.run(["git", "checkout", "--quiet", commit], cwd=clone, check=True)
        env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
        env["CI"] = "true"
        load_before = _load()
        tests = _collect(clone, env, timeout)
        slow_tests = _collect(clone, env, timeout, "-m", "slow")
        _expect(clone, tests, commit)
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
        calibration_before = _calibrate()
        with MachineWatch() as watch:
            total, output = _timed(["bash", ".ci/run"], clone, env, timeout)
        LOG.parent.mkdir(parents=True, exist_ok=True)
        LOG.write_text(output, encoding="utf-8")
        summaries = parse_summaries(output)
        if len(summaries) != 2:
            raise FiguresError(
                f"`.ci/run` printed {len(summaries)} pytest summaries, not 2 (the default run, the slow set)"
            )
        summary, slow = summaries
        for name, got, expected in (("default run", summary, tests), ("slow set", slow, slow_tests)):
            if collected(got["counts"]) != expected:
                raise FiguresError(f"the {name} counted {collected(got['counts'])} tests, collection {expected}")
        venv_bin = clone / ".venv" / "bin"
        env["PATH"] = f"{venv_bin}{os.pathsep}{env['PATH']}"
        evaluation, _ = _timed([str(venv_bin / "python"), "-m", "retrieval"], clone, env, timeout)
        gate, gate_output = _timed(
            [str(venv_bin / "python"), "-m", "pytest", "-m", "regression", "-q"], clone, env, timeout
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "commit": commit,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": _machine(),
        "load_before": load_before,
        "busy_cpu_seconds": round(watch.elsewhere.busy, 1),
        "other_cpu_seconds": round(watch.elsewhere.others, 1),
        "stolen_cpu_seconds": round(watch.elsewhere.stolen, 1),
        "calibration_seconds": [calibration_before, _calibrate()],
        "calibration": f'python3 -c "{CALIBRATION}"',
        "command": "CI=true bash .ci/run",
        "total_seconds": total,
        "tests": tests,
        "outcomes": summary["counts"],
        "pytest_seconds": summary["seconds"],
        "slow_tests": slow_tests,
        "slow_outcomes": slow["counts"],
        "slow_seconds": slow["seconds"],
        "evaluation_seconds": evaluation,
        "gate_seconds": gate,
        "gate_line": parse_summary(gate_output)["line"],
    }


def _n(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def render_block(figures: Mapping[str, Any]) -> str:
    """The pages' block, markers included, from one measurement."""
    machine = figures["machine"]

    def outcomes(counts: Mapping[str, int]) -> str:
        return ", ".join(f"{n:,} {outcome}" for outcome, n in counts.items() if outcome != "warning")

    share = others_share(figures)
    calibration = figures["calibration_seconds"]
    slow_seconds = figures.get("slow_seconds", 0.0)
    install = figures["total_seconds"] - figures["pytest_seconds"] - slow_seconds
    slow = (
        f", then the slow set (`pytest -m slow -n auto`): **{figures['slow_tests']:,} tests** in "
        f"{_n(slow_seconds)} s ({outcomes(figures['slow_outcomes'])})"
        if figures.get("slow_tests")
        else ""
    )
    text = (
        f"Measured on a fresh clone of commit `{figures['commit'][:7]}` ({figures['date']}) with "
        f"`{figures['command']}`: **{_n(figures['total_seconds'])} s** in all, about {_n(install)} s of it creating "
        f"the venv and installing (pip's download cache warm), then the README's `pytest -n auto`: "
        f"**{figures['tests']:,} tests** in {_n(figures['pytest_seconds'])} s (pytest's own figure: "
        f"{outcomes(figures['outcomes'])}){slow}. On the committed recordings, "
        f"`python -m retrieval` took {_n(figures['evaluation_seconds'])} s and the gate alone (`pytest -m "
        f"regression`) {_n(figures['gate_seconds'])} s. The machine: {machine['cores']} cores ({machine['cpu']}), "
        f"{machine['memory']}, Python {machine['python']}, {machine['system']}; load average {figures['load_before']} "
        f"before, calibration (`{figures['calibration']}`) {calibration[0]} s before and {calibration[1]} s after "
        f"(about 0.35 s on an idle core). While it ran, the machine was busy {_n(figures['busy_cpu_seconds'])} CPU-s, "
        f"of which other processes took {_n(figures['other_cpu_seconds'])} (`scripts/machine_watch.py`), and the "
        f"host stole {_n(figures['stolen_cpu_seconds'])}: "
        + (
            f"a shared machine ({share:.0%} of its cores went elsewhere), whose times are above an idle one's."
            if share >= QUIET
            else f"an idle machine ({share:.0%} of its cores went elsewhere)."
        )
        + " Measured again by `python scripts/suite_figures.py measure`."
    )
    return f"{START}\n{NOTE}\n\n{text}\n\n{END}"


def read_figures(path: Path = FIGURES) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError) as exc:
        raise FiguresError(
            f"{path}: cannot read the measurement ({exc}): run `python scripts/suite_figures.py measure`"
        ) from exc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", nargs="?", choices=["measure", "render"], default="render")
    parser.add_argument("--check", action="store_true", help="exit 1 if a page's block differs from the measurement")
    args = parser.parse_args(argv)
    if args.action == "measure":
        try:
            figures = measure()
        except (FiguresError, subprocess.SubprocessError, OSError) as exc:  # OSError: no /proc to watch
            print(f"error: {exc}", file=sys.stderr)
            return 2
        FIGURES.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {FIGURES.relative_to(ROOT)}: {figures['tests']} tests, {figures['total_seconds']} s")
    return write_or_check(
        PAGES, START, END, lambda: render_block(read_figures()), args.check, "python scripts/suite_figures.py"
    )


if __name__ == "__main__":
    sys.exit(main())
