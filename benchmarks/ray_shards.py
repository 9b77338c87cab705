"""Per-shard cost of the sharded search (executor = "ray"): what one worker spends on one shard.

    python benchmarks/ray_shards.py                                   # 100,000 documents x 1,000 questions
    python benchmarks/ray_shards.py --documents 1000000 --questions 1000

Generates the synthetic corpus of benchmarks/scale.py (French-like text, identifiers, float32 unit
vectors of --dim dimensions), then runs ONE shard's steps in this process, exactly as a Ray worker
runs them (retrieval.methods.support.sharding.ShardedSearch of the built-in bm25 and vector methods), timing each
and reading its resident-memory peak (VmHWM, reset per stage); the driver's steps (the global
statistics, the merge of the shards' top `depth`) are timed too, merging --shards copies of the
shard's answer (whole: copies agree on no threshold, the merge's worst case), as the driver would
with that many shards. Prints a Markdown table.

The plan in docs/performance.md ("On a Ray cluster") scales these figures: a 10,000,000-document
corpus is 10 shards of 1,000,000, and a worker's time grows with the questions.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from typing import Any

# Runs from a checkout without installation: `python benchmarks/ray_shards.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import _read_hwm, _reset_hwm, generate, machine

from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.support.shard_answers import merge, packed
from retrieval.methods.support.sharding import Shard
from retrieval.methods.vector import VectorMethod

MIB = 1024**2


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Stages:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, int, int]] = []

    def run(self, name: str, step: Any, *args: Any) -> Any:
        gc.collect()
        _reset_hwm()
        before = _rss()
        start = time.perf_counter()
        result = step(*args)
        seconds = time.perf_counter() - start
        self.rows.append((name, seconds, _read_hwm() or 0, _rss() - before))
        print(f"  {name}: {seconds:.2f} s, peak RSS {self.rows[-1][2] / MIB:,.0f} MiB", file=sys.stderr, flush=True)
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=100_000, help="documents in the shard")
    parser.add_argument("--questions", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=10, help="shards the driver merges (copies of this one)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 1 <= args.documents <= 2_000_000 or not 1 <= args.questions <= 100_000 or args.shards < 1:
        parser.error("--documents 1..2,000,000, --questions 1..100,000, --shards >= 1")

    print(f"generating {args.documents:,} documents...", file=sys.stderr, flush=True)
    synthetic = generate(args.documents, args.questions, args.dim, args.seed)
    context = Context(dataset=synthetic.dataset, depth=args.depth)
    context.document_vectors = synthetic.document_vectors
    context.question_vectors = synthetic.question_vectors
    del synthetic
    whole = Shard(0, 0, args.documents)
    baseline = _rss()
    stages = Stages()

    bm25 = BM25Method().sharding()
    queries = stages.run("bm25: analyse the questions (driver)", bm25.queries, context)
    texts = bm25.documents(context, whole)
    prepared = stages.run("bm25: prepare = analyse the shard (worker)", bm25.prepare, texts, queries)
    del texts
    summary = stages.run("bm25: summarize (worker)", bm25.summarize, prepared, queries)
    statistics = stages.run(f"bm25: combine {args.shards} summaries (driver)", bm25.combine, [summary] * args.shards)
    answer = stages.run("bm25: score the shard (worker)", bm25.score, prepared, queries, statistics, args.depth)
    shards = [Shard(i, i * args.documents, (i + 1) * args.documents) for i in range(args.shards)]
    stages.run(
        f"bm25: merge {args.shards} shards' top {args.depth} (driver)",
        merge,
        shards,
        [packed(answer)] * args.shards,
        args.depth,
    )
    del prepared, answer

    vector = VectorMethod().sharding()
    vq = vector.queries(context)
    vectors = vector.prepare(vector.documents(context, whole), vq)
    answer = stages.run("vector: score the shard (worker)", vector.score, vectors, vq, None, args.depth)
    stages.run(
        f"vector: merge {args.shards} shards' top {args.depth} (driver)",
        merge,
        shards,
        [packed(answer)] * args.shards,
        args.depth,
    )

    print(f"Machine: {machine()}")
    print(
        f"Shard: {args.documents:,} documents, {args.questions:,} questions, dim {args.dim}, depth {args.depth}; "
        f"resident before the stages (corpus texts and vectors held): {baseline / MIB:,.0f} MiB"
    )
    print()
    print("| stage | seconds | peak RSS (MiB) | RSS kept after (MiB) |")
    print("| --- | ---: | ---: | ---: |")
    for name, seconds, peak, kept in stages.rows:
        print(f"| {name} | {seconds:.2f} | {peak / MIB:,.0f} | {kept / MIB:+,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
