"""Vector search against FAISS's exact flat index and the machine's GEMM bound, in paired rounds.

    pip install faiss-cpu                    # in the bench extra: pip install -e '.[bench]'
    python benchmarks/vector_vs_faiss.py --documents 1000000 --questions 1000 --rounds 3

The corpus: seeded random unit vectors (float32, 384 dimensions by default) written once to a
`.npy` under /tmp (`--data`) and memory-mapped, as the vector store serves a recorded corpus
(retrieval.recording.vector_store); the questions: the mean of one or two documents plus noise,
normalised, as in benchmarks/scale.py (so each has near neighbours, as a real question has).
Each round times, one after the other in an order that turns from round to round:
- ours: `retrieval.methods.vector.cosine_rankings(questions, corpus, depth)`, the search every
  vector and hybrid run makes (float32 blocks, float64 for the candidates, the tie rule);
- FAISS: `IndexFlatIP.search(questions, depth)` (the corpus added to the index beforehand, not
  timed; FAISS's own threads, one per core);
- the GEMM bound: numpy's float32 matrix product alone at the search's shape (the questions
  against the corpus in blocks of DOCUMENT_BLOCK rows, into one output buffer reused): what no
  exact search can beat on this machine.
The figures are each round's ratios ours / FAISS and ours / GEMM, their median, and the seconds
(wall, and the CPU seconds of the process during each, every thread's: `time.process_time`).
Rankings: every question's top 10 (ids and order) compared with FAISS's; a question whose
10th and 11th FAISS scores are within float32's error of each other may differ in that
order legitimately (the project breaks ties by float64 then lower index), so it is counted
apart. Calibration (`sum(range(3*10**7))`) and the load average are printed before and after.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_time import calibration

from retrieval.methods.vector import DOCUMENT_BLOCK, cosine_rankings

ROWS = 65_536  # rows generated at a time


def corpus(path: Path, n: int, dims: int, seed: int) -> np.ndarray:
    """The memory-mapped corpus at `path`, written first when absent or of another shape."""
    if path.is_file():
        mapped = np.load(path, mmap_mode="r")
        if mapped.shape == (n, dims) and mapped.dtype == np.float32:
            return mapped
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dims))
    for start in range(0, n, ROWS):
        block = rng.standard_normal((min(ROWS, n - start), dims), dtype=np.float32)
        out[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def questions(documents: np.ndarray, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    picks = rng.integers(0, len(documents), size=(count, 2))
    two = rng.random(count) < 0.5
    mean = np.asarray(documents[picks[:, 0]], dtype=np.float64)
    mean[two] = (mean[two] + documents[picks[two, 1]]) / 2
    noisy = mean + rng.standard_normal(mean.shape) * 0.05
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def gemm(queries: np.ndarray, documents: np.ndarray) -> float:
    """Seconds of the float32 products alone, as the search computes them: each block of
    DOCUMENT_BLOCK documents against every question, into one buffer (document x question)."""
    out = np.empty((DOCUMENT_BLOCK, len(queries)), dtype=np.float32)
    start = time.perf_counter()
    for at in range(0, len(documents), DOCUMENT_BLOCK):
        block = documents[at : at + DOCUMENT_BLOCK]
        np.matmul(block, queries.T, out=out[: len(block)])
    return time.perf_counter() - start


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=1_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=Path("/tmp/vector-vs-faiss"))
    args = parser.parse_args(argv)
    try:
        import faiss
    except ImportError:
        print("error: faiss is missing: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    args.data.mkdir(parents=True, exist_ok=True)
    documents = corpus(
        args.data / f"corpus-{args.documents}x{args.dims}-{args.seed}.npy", args.documents, args.dims, args.seed
    )
    queries = questions(documents, args.questions, args.seed)
    index = faiss.IndexFlatIP(args.dims)
    index.add(np.ascontiguousarray(documents))
    np.asarray(documents).sum()  # the memory map read once: every round reads from the page cache
    print(f"calibration before: {calibration():.2f} s, load average {_load()}")
    print(
        f"{args.questions:,} questions x {args.documents:,} x {args.dims} float32, depth {args.depth};"
        f" faiss {faiss.__version__} ({faiss.omp_get_max_threads()} threads), numpy {np.__version__}"
    )
    print("| round | ours s | FAISS s | GEMM s | ours / FAISS | ours / GEMM | CPU s: ours / FAISS / GEMM |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    to_faiss, to_gemm = [], []
    ours_ranked = theirs = None
    for number in range(1, args.rounds + 1):
        seconds: dict[str, float] = {}
        cpu: dict[str, float] = {}
        order = ["ours", "faiss", "gemm"] if number % 2 else ["gemm", "faiss", "ours"]
        for side in order:
            began = time.process_time()
            if side == "gemm":
                seconds[side] = gemm(queries, documents)
                cpu[side] = time.process_time() - began
                continue
            start = time.perf_counter()
            if side == "ours":
                ours_ranked = cosine_rankings(queries, documents, args.depth)
            else:
                theirs = index.search(queries, args.depth)
            seconds[side] = time.perf_counter() - start
            cpu[side] = time.process_time() - began
        to_faiss.append(seconds["ours"] / seconds["faiss"])
        to_gemm.append(seconds["ours"] / seconds["gemm"])
        print(
            f"| {number} | {seconds['ours']:.2f} | {seconds['faiss']:.2f} | {seconds['gemm']:.2f}"
            f" | {to_faiss[-1]:.2f} | {to_gemm[-1]:.2f}"
            f" | {cpu['ours']:.2f} / {cpu['faiss']:.2f} / {cpu['gemm']:.2f} |",
            flush=True,
        )
    print(f"calibration after: {calibration():.2f} s, load average {_load()}")
    print(
        f"median ratios: ours / FAISS {statistics.median(to_faiss):.2f} (target <= 1.0),"
        f" ours / GEMM {statistics.median(to_gemm):.2f} (target <= 1.5)"
    )
    assert ours_ranked is not None and theirs is not None
    scores, ids = theirs
    same = near = 0
    for q, ranking in enumerate(ours_ranked):
        if np.array_equal(ranking.indices[:10], ids[q, :10]):
            same += 1
        elif scores[q, 9] - scores[q, 10] <= 1e-5:
            near += 1
    print(
        f"top 10 equal to FAISS's: {same} of {len(ours_ranked)} questions; {near} more differ where"
        f" FAISS's 10th and 11th scores are within 1e-5; {len(ours_ranked) - same - near} other"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
