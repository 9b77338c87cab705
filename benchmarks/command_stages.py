"""Where one cold `python -m retrieval --dataset DIR --methods bm25 --format json` spends its CPU.

    python benchmarks/command_stages.py /tmp/kb-fr100k                # cold: run in a scratch folder
    PYTHONPATH=/tmp/other-checkout python benchmarks/command_stages.py /tmp/kb-fr100k

Runs the command's own `retrieval.cli.main` once in this process, in a new scratch folder (so no
analysis cache), with its stages timed: the imports, `load_dataset` (reading, records,
fingerprint), BM25's analysis (`analyze_documents`: the cut thread's CPU is counted, as
`time.process_time` counts every thread), the index (`SparseBM25Index.__init__`), the questions'
rankings, `build_report` and `render_json`; the rest of `main` is what remains. Per stage: CPU
seconds (user + system of the process), wall seconds, system seconds and minor page faults (the
kernel's zero-filled pages: a stage's new memory). The load average is printed with them: on a
shared machine compare two versions' stages run in the same minutes, not with an older print.
The report itself goes to /dev/null; the stage times are printed on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_START = (time.process_time(), time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF))

# Stage -> (CPU s, wall s, system s, minor faults), summed over the stage's calls.
_STAGES: dict[str, list[float]] = {}


def _add(stage: str, before: tuple[float, float, Any]) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    totals = _STAGES.setdefault(stage, [0.0, 0.0, 0.0, 0.0])
    totals[0] += time.process_time() - before[0]
    totals[1] += time.perf_counter() - before[1]
    totals[2] += usage.ru_stime - before[2].ru_stime
    totals[3] += usage.ru_minflt - before[2].ru_minflt


def _timed(owner: Any, name: str, stage: str) -> None:
    """Replace `owner.name` by the same callable, its calls added to `stage`."""
    function: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        before = (time.process_time(), time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF))
        try:
            return function(*args, **kwargs)
        finally:
            _add(stage, before)

    setattr(owner, name, timed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path, help="a native dataset folder: corpus.jsonl and questions.jsonl")
    args = parser.parse_args(argv)
    dataset = args.dataset.resolve()
    # The command's imports, as `python -m retrieval` makes them (main's own module first).
    import retrieval.cli as cli
    import retrieval.methods.bm25 as bm25
    from retrieval.methods.support.bm25_engine import SparseBM25Index

    _add("imports", _START)
    _timed(cli, "load_dataset", "load_dataset")
    _timed(bm25, "analyze_documents", "analysis")
    _timed(SparseBM25Index, "__init__", "index")
    _timed(SparseBM25Index, "rankings", "rankings")
    _timed(cli, "build_report", "build_report")
    _timed(cli, "render_json", "render_json")
    scratch = tempfile.mkdtemp(prefix="command-stages-")
    before = (time.process_time(), time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF))
    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        previous = os.getcwd()
        os.chdir(scratch)
        try:
            code = cli.main(["--dataset", str(dataset), "--methods", "bm25", "--format", "json"])
        finally:
            os.chdir(previous)
    _add("main", before)
    if code != 0:
        raise SystemExit(f"the command failed (exit {code}); its scratch folder: {scratch}")
    shutil.rmtree(scratch)
    inside = [v for k, v in _STAGES.items() if k not in ("imports", "main")]
    _STAGES["rest of main"] = [m - sum(v[i] for v in inside) for i, m in enumerate(_STAGES.pop("main"))]
    _add("total", _START)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"{dataset.name}, cold, load average {load}")
    print("| stage | CPU s | wall s | system s | minor faults |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for stage, (cpu, wall, system, faults) in _STAGES.items():
        print(f"| {stage} | {cpu:.2f} | {wall:.2f} | {system:.2f} | {int(faults):,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
