"""Time a project's gate as CI runs it: `pytest` in the project, replaying its recordings.

    python benchmarks/gate_time.py PROJECT --rounds 3

PROJECT is a project folder with its recordings, such as the one `benchmarks/scale.py --project
kb100kv --fixture-embeddings URL` writes and `pytest --record --update-baseline` records
(docs/performance.md says how). Each round runs `python -m pytest -q -p no:cacheprovider` in
it, in a new process (with --cold, after removing the project's cache of BM25's analysed corpus,
`.cache/bm25-analysis`, as on a CI runner without a restored cache), and prints wall seconds,
CPU seconds (the pytest process and every process it started: BM25's analysis workers are
forked by it) and the peak resident memory
of the largest of those processes, with the machine's calibration figure before and after
(`sum(range(3*10**7))`, about 0.35 s on an idle machine of this kind: other jobs on shared
cores inflate wall times). A gate that fails is reported and ends the run with status 1.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

TIMEOUT = 600  # seconds per round: a gate that hangs ends the run


def calibration() -> float:
    """The docs' calibration figure: how long this machine takes for a fixed piece of Python."""
    start = time.perf_counter()
    sum(range(3 * 10**7))
    return time.perf_counter() - start


def one_round(project: Path) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MiB, the gate's summary line) of one pytest run in `project`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stdout.strip().splitlines()
    summary = next((line for line in lines if line.startswith("retrieval gate")), "(no gate summary line)")
    if done.returncode != 0:
        raise SystemExit(f"the gate failed in {project} (exit {done.returncode}):\n{done.stdout[-2000:]}")
    # ru_maxrss of children: the largest process reaped so far (KiB on Linux), not a sum.
    return wall, cpu, after.ru_maxrss / 1024, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("project", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="remove .cache/bm25-analysis before each round")
    args = parser.parse_args()
    if not (args.project / "baselines").is_dir():
        raise SystemExit(f"{args.project}: no baselines/ folder. Record the project first (see the docstring).")
    print(f"calibration before: {calibration():.2f} s")
    print(f"{'cold' if args.cold else 'warm'} rounds")
    print("| round | wall s | CPU s | peak RSS MiB |\n| ---: | ---: | ---: | ---: |")
    summary = ""
    for number in range(1, args.rounds + 1):
        if args.cold:
            shutil.rmtree(args.project / ".cache" / "bm25-analysis", ignore_errors=True)
        wall, cpu, peak, summary = one_round(args.project)
        print(f"| {number} | {wall:.2f} | {cpu:.2f} | {peak:,.0f} |", flush=True)
    print(f"calibration after: {calibration():.2f} s")
    print(summary)


if __name__ == "__main__":
    main()
