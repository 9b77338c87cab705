"""BM25 against bm25s, side by side in one process: time, nDCG@10, recall@5 and MRR.

    pip install -e '.[bench]'          # bm25s and PyStemmer (this script installs nothing)
    python benchmarks/bm25_vs_bm25s.py                     # 1,000 questions x 100,000 documents
    python benchmarks/bm25_vs_bm25s.py --documents 20000 --rounds 3
    python benchmarks/bm25_vs_bm25s.py --dataset /tmp/sets/scifact --language en   # a real set

Both engines index the same corpus and rank its questions to the same depth: the synthetic
French corpus of benchmarks/scale.py's generator (seed 0), or a dataset folder (native or BEIR,
e.g. benchmarks/public_sets.py's) in its `--language`:
- ours: `BM25Method(language=...).rank(context)`, the whole method (analysis of the corpus and
  the questions, index, scoring, top-k), analyser caches emptied before each round;
- bm25s: `bm25s.tokenize` with that language's stop words (bm25s's own list, `--bm25s-stopwords`)
  and PyStemmer's stemmer of the language, `BM25.index`, `bm25s.tokenize` of the questions,
  `BM25.retrieve(k=depth)` (its default engine, one thread).

The rounds alternate between the two, so that the machine's load weighs on both alike. Both
run on one core (the process is pinned to one; ours then analyses in this process alone), on
one thread: the ratio is of CPU time (`time.process_time`), best rounds (and medians),
which waiting for a core on a shared machine does not inflate; wall time is shown too.
Quality is nDCG@10 (with the judgments' grades), recall@5 and MRR from
`retrieval.measures.metrics.score_method` on the same judgements,
with the paired 95 % bootstrap interval of the difference per question (the gate's own,
retrieval.measures.paired): a difference whose interval holds 0 is within the sample's noise.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import generate, machine

from retrieval.data.corpus_terms import forget_analyses
from retrieval.data.dataset import Dataset, load_dataset
from retrieval.data.snowball import LANGUAGES
from retrieval.measures.metrics import score_method
from retrieval.measures.paired import compare
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method

TARGET_RATIO = 0.5
METRICS = ["ndcg@10", "recall@5", "mrr"]
MAX_DOCUMENTS = 1_000_000

Ranked = dict[str, list[str]]


def ours(dataset: Dataset, depth: int, language: str) -> Ranked:
    """The project's BM25 method, from raw text to rankings."""
    forget_analyses()
    rankings = BM25Method(language=language).rank(Context(dataset=dataset, depth=depth))
    ids = dataset.doc_ids
    return {q.id: [ids[i] for i in r.indices] for q, r in zip(dataset.questions, rankings, strict=True)}


def bm25s_run(dataset: Dataset, depth: int, language: str, stopwords: str) -> Ranked:
    """bm25s with the language's stop words and its Snowball stemmer (PyStemmer)."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer(LANGUAGES.get(language, "french"))
    texts = [d.content for d in dataset.documents]
    corpus = bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=1.5, b=0.75)
    retriever.index(corpus, show_progress=False)
    queries = bm25s.tokenize(
        [q.text for q in dataset.questions], stopwords=stopwords, stemmer=stemmer, show_progress=False
    )
    k = min(depth, len(dataset.documents))
    found, _ = retriever.retrieve(queries, k=k, show_progress=False, n_threads=1)
    ids = dataset.doc_ids
    return {q.id: [ids[int(i)] for i in row] for q, row in zip(dataset.questions, found, strict=True)}


def quality(dataset: Dataset, ranked: Ranked) -> dict[str, dict[str, float]]:
    """nDCG@10, recall@5 and MRR: question id -> value, for each."""
    relevant = {q.id: q.relevant for q in dataset.questions}
    types = {q.id: q.type for q in dataset.questions}
    judgments = {q.id: q.judgments for q in dataset.questions}
    per_question = score_method(ranked, relevant, types, METRICS, judgments).per_question
    return {m: {q: values[m] for q, values in per_question.items()} for m in METRICS}


def verdict(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, float]]) -> tuple[str, list[str]]:
    """ "better or equal" when every mean is at least bm25s's; else "not significantly worse" when
    each paired 95 % bootstrap interval of ours - bm25s (retrieval.measures.paired, the gate's
    own) reaches 0 or above; else "WORSE". With the interval of each metric."""
    lines, verdicts = [], []
    for metric in METRICS:
        c = compare(theirs[metric], ours[metric], metric, "bm25s", "ours")
        lines.append(f"{metric}: ours - bm25s {c.difference:+.4f}, 95 % interval [{c.low:+.4f}, {c.high:+.4f}]")
        verdicts.append("better or equal" if c.difference >= 0 else "within noise" if c.high >= 0 else "worse")
    if all(v == "better or equal" for v in verdicts):
        return "better or equal", lines
    return ("WORSE" if "worse" in verdicts else "not significantly worse"), lines


def timed(run: Callable[[Dataset, int], Ranked], dataset: Dataset, depth: int) -> tuple[float, float, Ranked]:
    """(CPU seconds, wall seconds, rankings). Both engines run on one thread, so CPU time is
    their cost; on a shared machine wall time also counts the waits for a core."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    ranked = run(dataset, depth)
    return time.process_time() - cpu, time.perf_counter() - wall, ranked


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=1_000)
    parser.add_argument("--depth", type=int, default=1000, help="ranking depth (the tool's default)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each engine, alternated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", help="a dataset folder (native or BEIR) instead of the synthetic corpus")
    parser.add_argument("--split", default="test", help="with --dataset: the BEIR qrels file (qrels/SPLIT.tsv)")
    parser.add_argument("--language", default="fr", help="the corpus's language: our analyzer's and bm25s's stemmer")
    parser.add_argument("--bm25s-stopwords", help="bm25s's stop word list (default: the --language code)")
    parser.add_argument("--check", action="store_true", help=f"exit 1 unless ratio <= {TARGET_RATIO} and quality >=")
    args = parser.parse_args(argv)
    if not 1 <= args.documents <= MAX_DOCUMENTS or not 1 <= args.questions <= 100_000:
        parser.error(f"--documents must be 1..{MAX_DOCUMENTS:,}, --questions 1..100,000")
    if args.rounds < 1 or args.depth < 1:
        parser.error("--rounds and --depth must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import bm25s  # noqa: F401
        import Stemmer  # noqa: F401
    except ImportError as exc:
        print(f"error: {exc.name} is missing: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    if hasattr(os, "sched_setaffinity"):
        # One core for both engines: ours would otherwise analyse a large corpus in worker
        # processes (retrieval.data.corpus_parts), whose CPU time process_time does not count.
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if args.dataset:
        dataset = load_dataset(args.dataset, args.split)
        sizes = f"{len(dataset.questions):,} questions x {len(dataset.documents):,} documents"
        described = f"{dataset.name} ({args.split}): {sizes}"
    else:
        dataset = generate(args.documents, args.questions, 1, args.seed).dataset
        described = f"synthetic French, seed {args.seed}: {args.questions:,} questions x {args.documents:,} documents"
    print(f"{described}...", file=sys.stderr)
    stopwords = args.bm25s_stopwords or args.language
    engines: dict[str, Callable[[Dataset, int], Ranked]] = {
        f"ours (BM25Method, language {args.language})": lambda d, depth: ours(d, depth, args.language),
        f"bm25s + PyStemmer ({LANGUAGES.get(args.language, 'french')}, stop words {stopwords!r})": (
            lambda d, depth: bm25s_run(d, depth, args.language, stopwords)
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in engines}
    walls: dict[str, list[float]] = {name: [] for name in engines}
    scores: dict[str, dict[str, dict[str, float]]] = {}
    for round_ in range(args.rounds):
        for name, run in engines.items():
            seconds, wall, ranked = timed(run, dataset, args.depth)
            times[name].append(seconds)
            walls[name].append(wall)
            scores[name] = quality(dataset, ranked)
            print(f"  round {round_ + 1}, {name}: {seconds:.2f} s CPU, {wall:.2f} s wall", file=sys.stderr, flush=True)

    print(f"Machine: {machine()}")
    print(f"Run: {described}, depth {args.depth}, {args.rounds} rounds")
    print()
    print("| engine | CPU s, best | CPU s, median | wall s, best | nDCG@10 | recall@5 | MRR |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in engines:
        means = {m: statistics.fmean(scores[name][m].values()) for m in METRICS}
        print(
            f"| {name} | {min(times[name]):.2f} | {statistics.median(times[name]):.2f} | {min(walls[name]):.2f} "
            f"| {means['ndcg@10']:.4f} | {means['recall@5']:.4f} | {means['mrr']:.4f} |"
        )
    mine_name, theirs_name = engines
    mine, theirs = times[mine_name], times[theirs_name]
    ratio = min(mine) / min(theirs)
    median_ratio = statistics.median(mine) / statistics.median(theirs)
    judged, intervals = verdict(scores[mine_name], scores[theirs_name])
    print(
        f"\nRatio ours / bm25s (CPU time): {ratio:.2f} (best rounds), {median_ratio:.2f} (medians); "
        f"wall: {min(walls[mine_name]) / min(walls[theirs_name]):.2f}; target <= {TARGET_RATIO}; "
        f"quality {judged}"
    )
    print("\n".join(intervals))
    return 1 if args.check and not (ratio <= TARGET_RATIO and judged != "WORSE") else 0


if __name__ == "__main__":
    raise SystemExit(main())
