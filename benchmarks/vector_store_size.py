"""The vector store's size and growth (docs/performance.md, "Corpus vectors in the vector store").

    python benchmarks/vector_store_size.py [--documents 10000] [--demo]

- bytes per document for 384-d (the local model) and 768-d (Gemini-sized) vectors, float32 and
  float16, against issue 26's targets (4 x dims + 64 and 2 x dims + 64);
- the growth of a re-recording after 1 % of the documents changed (a new segment of their
  vectors and the manifest), and a check that no existing file was modified;
- with --demo: the demo's figures and top 10s replayed from the committed store in float32 and
  float16 (vector_precision), the methods that read vectors; with --project PATH, the same for
  a recorded project (benchmarks/manpages_fr.py builds a held-out-sized one).

Vectors are seeded random numbers (their values do not change the bytes); the demo's are its
committed recording. Writes only under a temporary folder of its own, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.recording.vector_store import Space, VectorStore  # noqa: E402


def _snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    import hashlib

    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).digest())
        for p in folder.iterdir()
    }


def sizes(documents: int, work: Path) -> None:
    rng = np.random.default_rng(0)
    texts = [f"document {i}: " + "texte " * 20 for i in range(documents)]
    print(f"{documents:,} documents, one segment (store bytes = manifest + keys + vectors files)")
    print("| dimensions | precision | store bytes | bytes per document | target |")
    print("|---:|---|---:|---:|---:|")
    for dims in (384, 768):
        vectors = rng.standard_normal((documents, dims)).astype(np.float32)
        for precision, width in (("float32", 4), ("float16", 2)):
            folder = work / f"{dims}-{precision}"
            store = VectorStore.open(folder / "manifest.json", folder)
            store.add(store.write_segment(Space("p", "m", dims, "document"), texts, vectors, precision))
            store.save_manifest()
            total = store.nbytes()
            target = width * dims + 64
            print(f"| {dims} | {precision} | {total:,} | {total / documents:,.1f} | <= {target:,} |")


def growth(documents: int, work: Path) -> None:
    rng = np.random.default_rng(1)
    dims = 384
    texts = [f"document {i}: " + "texte " * 20 for i in range(documents)]
    folder = work / "growth"
    space = Space("p", "m", dims, "document")
    store = VectorStore.open(folder / "manifest.json", folder)
    store.add(store.write_segment(space, texts, rng.standard_normal((documents, dims)), "float32"))
    store.save_manifest()
    before_bytes, before = store.nbytes(), _snapshot(folder)
    changed = max(1, documents // 100)
    edited = [t + " révisé" for t in texts[:changed]]
    # What a re-recording does (retrieval.evaluation.corpus_vectors): look up, embed the missing, append.
    _, found = store.lookup(space, [*edited, *texts[changed:]])
    assert int((~found).sum()) == changed
    store.add(store.write_segment(space, edited, rng.standard_normal((changed, dims)), "float32"))
    store.save_manifest()
    after = _snapshot(folder)
    modified = [n for n in before if n != "manifest.json" and after[n] != before[n]]
    grown = store.nbytes() - before_bytes
    print(
        f"\nre-recording after {changed:,} of {documents:,} documents changed (1 %), 384-d float32: "
        f"+{grown:,} bytes = {100 * grown / before_bytes:.2f} % of {before_bytes:,} (target <= 2 %); "
        f"new files: {len(after) - len(before)}; existing segment files modified: {len(modified)} "
        "(the manifest is replaced)"
    )


def precision_figures(root: Path) -> None:
    """The figures and top 10s of a project's recording (this repository's: the demo), replayed
    with its vectors as stored (float32) and rounded to float16."""
    from retrieval.config import load_settings
    from retrieval.data.dataset import load_dataset
    from retrieval.evaluation.evaluate import evaluate
    from retrieval.measures.metrics import score_run

    settings = load_settings(root, environ={})
    dataset = load_dataset(settings.dataset)
    methods = ["vector", "hybrid"]
    runs = {
        p: evaluate(dataset, replace(settings, vector_precision=p), mode="replay", methods=methods)
        for p in ("float32", "float16")
    }
    scores = {p: score_run(run, settings.k) for p, run in runs.items()}
    print(f"\n{dataset.name} ({len(dataset.documents):,} documents, {len(dataset.questions):,} questions), replay:")
    print("| method | figure | float32 | float16 |")
    print("|---|---|---:|---:|")
    for method in methods:
        for name, value in scores["float32"][method].overall.items():
            print(f"| {method} | {name} | {value:.4f} | {scores['float16'][method].overall[name]:.4f} |")
    for method in methods:
        moved = sum(
            a.methods[method].ids[:10] != b.methods[method].ids[:10]
            for a, b in zip(runs["float32"].results, runs["float16"].results, strict=True)
        )
        print(f"{method}: top 10 changed for {moved} of {len(dataset.questions)} questions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--demo", action="store_true", help="also the demo's figures in float32 and float16")
    parser.add_argument("--project", type=Path, help="also this recorded project's figures in float32 and float16")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vector-store-size-", dir=os.environ.get("TMPDIR")) as work:
        sizes(args.documents, Path(work))
        growth(args.documents, Path(work))
    if args.demo:
        precision_figures(ROOT)
    if args.project:
        precision_figures(args.project.resolve())


if __name__ == "__main__":
    main()
