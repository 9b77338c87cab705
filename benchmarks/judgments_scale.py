"""What judgments.jsonl costs as it grows: reading it, one grade written through the page (the whole
file read, changed and written again, at once, under its lock), and its size and memory.

    python benchmarks/judgments_scale.py --lines 10000 100000 1000000

For each size, a synthetic file (one judgment per (question, document) pair, grades 0-3, three
sources) is written to a temporary folder; then, per round, the CPU seconds (time.process_time:
not inflated by waiting for a core on a loaded machine) of `read_judgments`, of a plain
json.loads of every line (the floor any JSON-lines reader pays: the ratio is the figure to quote
on a shared machine), and of `update_judgments` adding one grade, with its wall seconds (fsync
included). The largest resident set is reported at the end (ru_maxrss).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.data.judgment_file import Judgment, read_judgments, render_judgments, timestamp, update_judgments

SOURCES = ("human:ana", "import:ratings.csv", "llm:gpt-4o-mini")


def _judgments(count: int) -> list[Judgment]:
    return [
        Judgment(f"q{i // 50:06}", f"doc-{i % 50:03}-{i:07}", i % 4, SOURCES[i % 3], "2025-06-02T09:14:05Z")
        for i in range(count)
    ]


def _cpu(call: object) -> float:
    start = time.process_time()
    call()  # type: ignore[operator]
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("| lines | file | read (CPU s) | json.loads floor (CPU s) | ratio | one grade (CPU s) | one grade (wall s) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for count in args.lines:
            path, lock = Path(folder) / f"judgments-{count}.jsonl", Path(folder) / "lock"
            path.write_text(render_judgments(_judgments(count)), encoding="utf-8")
            size = path.stat().st_size / 1e6
            reads, floors, grades, walls = [], [], [], []
            for round_ in range(args.rounds):
                reads.append(_cpu(lambda path=path: read_judgments(path)))
                lines = path.read_text(encoding="utf-8").splitlines()
                floors.append(_cpu(lambda lines=lines: [json.loads(line) for line in lines]))
                new = Judgment("q-new", f"doc-{round_}", 2, "human:ana", timestamp())
                started = time.perf_counter()
                grades.append(
                    _cpu(partial(update_judgments, path, lock, lambda c, new=new: c.__setitem__(new.key, new)))
                )
                walls.append(time.perf_counter() - started)
            best = min(reads)
            floor = min(floors)
            print(
                f"| {count:,} | {size:.1f} MB | {best:.3f} | {floor:.3f} | {best / floor:.2f} | {min(grades):.3f} "
                f"| {min(walls):.3f} |"
            )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nlargest resident set: {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
