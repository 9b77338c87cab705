"""Reading and writing TREC run files at scale: time and peak memory of `read_trec_run` (the checks
of a run gated as `trec:PATH`) and of `run_text` (what --export-trec writes), beside ir_measures'
own reader of the same file, pair by pair.

    python benchmarks/trec_runs.py                                # 10,000 questions x 100 documents
    python benchmarks/trec_runs.py --questions 1000 --depth 1000 --documents 1000000 --rounds 3

The dataset is synthetic (ids only: `d0000001`..., `q00001`...), the run's documents drawn with a
fixed seed. Rounds alternate between ours and ir_measures', so that the machine's load weighs on
both alike; the figure to quote is the ratio of the best rounds, not a time.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from retrieval.data.dataset import Dataset, Document, Question
from retrieval.run.trec import read_trec_run, run_text


def synthetic(documents: int, questions: int, depth: int) -> tuple[Dataset, list[tuple[str, list[str]]]]:
    ids = [f"d{i:07d}" for i in range(documents)]
    rng = random.Random(0)
    asked = tuple(Question(f"q{n:05d}", f"question {n}", "all", (ids[n % documents],)) for n in range(questions))
    dataset = Dataset("synthetic", tuple(Document(i, "", "") for i in ids), asked, "synthetic")
    return dataset, [(q.id, rng.sample(ids, depth)) for q in asked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import ir_measures

    dataset, rankings = synthetic(args.documents, args.questions, args.depth)
    _ = dataset.positions  # built once, as an evaluation has it before a method ranks
    ours_read, theirs_read, writes, peak = [], [], [], 0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "engine.run"
        for _ in range(args.rounds):
            started = time.process_time()
            text = run_text(rankings, "engine")
            writes.append(time.process_time() - started)
            path.write_text(text, encoding="utf-8")
            del text
            started = time.process_time()
            run = read_trec_run(path, dataset)
            ours_read.append(time.process_time() - started)
            del run
            started = time.process_time()
            sum(1 for _ in ir_measures.read_trec_run(str(path)))
            theirs_read.append(time.process_time() - started)
        size = path.stat().st_size
        # Memory apart: tracing every allocation slows the reader several times over.
        tracemalloc.start()
        run = read_trec_run(path, dataset)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del run
    lines = args.questions * args.depth
    print(f"run: {lines:,} lines ({size / 1e6:.1f} MB), {args.questions:,} questions, corpus {args.documents:,}")
    print(f"read_trec_run (checked, sorted): best {min(ours_read):.2f} s CPU, peak {peak / 1e6:.0f} MB traced")
    print(f"ir_measures.read_trec_run (parse only): best {min(theirs_read):.2f} s CPU")
    print(f"ratio ours / ir_measures: {min(ours_read) / min(theirs_read):.2f}")
    print(f"run_text (export): best {min(writes):.2f} s CPU")


if __name__ == "__main__":
    main()
