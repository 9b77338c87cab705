"""What the first read of a vector segment costs: its digest (sha256 of the file) and the check of its
values (every vector finite, non-zero, of a finite norm), each alone, best of 3 (docs/recording.md).

    python benchmarks/store_read_check.py [--vectors 1000000] [--width 384]

Vectors are seeded random unit vectors (their values do not change the time). Writes only under a
temporary folder of its own, removed at the end. On a shared machine the ratio is what holds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.recording import vector_store  # noqa: E402
from retrieval.recording.vector_store import Space, VectorStore  # noqa: E402


def _best(run: Callable[[], object], rounds: int = 3) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=int, default=1_000_000)
    parser.add_argument("--width", type=int, default=384)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="store-read-check-") as folder:
        root = Path(folder)
        store = VectorStore.open(root / "m.json", root)
        rows = np.random.default_rng(0).standard_normal((args.vectors, args.width), dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        texts = [f"t{i}" for i in range(args.vectors)]
        [segment_name] = [
            store.write_segment(Space("openai", "m", args.width, "document"), texts, rows, "float32").name
        ]
        del rows, texts
        path = root / f"{segment_name}.vectors.npy"
        vectors = np.load(path, mmap_mode="r")
        digest = _best(lambda: vector_store._sha256_file(path))
        values = _best(lambda: vector_store._bad_row(vectors))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{args.vectors:,} x {args.width} float32: digest {digest:.2f} s, value check {values:.2f} s "
        f"(ratio {values / digest:.2f}); load average {load}"
    )


if __name__ == "__main__":
    main()
