"""BM25 recall@k and MRR on a dataset for a grid of k1 and b (issue 11: are the defaults right?).

    python scripts/bm25_grid.py                      # the demo, k1 in 0.9 1.2 1.5 2.0, b in 0.5 0.75 0.9
    python scripts/bm25_grid.py --dataset data/other --k1 1.2 1.5 --b 0.75
    python scripts/bm25_grid.py --dataset /tmp/sets/scifact --language en

Runs the project's own BM25Method (no model, no cassette) and prints a Markdown table; the
row of the defaults (retrieval.methods.support.bm25_engine.K1, B) is marked.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.data.dataset import load_dataset
from retrieval.measures.metrics import score_method
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.support.bm25_engine import K1, B


def grid(dataset_path: str, k1s: list[float], bs: list[float], k: int, language: str = "fr") -> list[str]:
    """One Markdown row per (k1, b): recall@k and MRR overall, recall@k per question type, with
    the analyzer of `language`."""
    dataset = load_dataset(dataset_path)
    relevant = {q.id: q.relevant for q in dataset.questions}
    types = {q.id: q.type for q in dataset.questions}
    metrics = [f"recall@{k}", "mrr"]
    head = ["k1", "b", *metrics, *(f"recall@{k} {t}" for t in dataset.question_types)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k1 in k1s:
        for b in bs:
            rankings = BM25Method(k1=k1, b=b, language=language).rank(Context(dataset=dataset, depth=1000))
            ranked = {
                q.id: [dataset.doc_ids[i] for i in r.indices] for q, r in zip(dataset.questions, rankings, strict=True)
            }
            scores = score_method(ranked, relevant, types, metrics)
            mark = " (default)" if (k1, b) == (K1, B) else ""
            cells = [f"{k1}{mark}", str(b), *(f"{scores.overall[m]:.4f}" for m in metrics)]
            cells += [f"{scores.by_type[t][metrics[0]]:.4f}" for t in dataset.question_types]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="data/demo")
    parser.add_argument("--k1", type=float, nargs="+", default=[0.9, 1.2, 1.5, 2.0])
    parser.add_argument("--b", type=float, nargs="+", default=[0.5, 0.75, 0.9])
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--language", default="fr", help="the corpus's language (BM25's analyzer)")
    args = parser.parse_args()
    print("\n".join(grid(args.dataset, args.k1, args.b, args.k, args.language)))


if __name__ == "__main__":
    main()
