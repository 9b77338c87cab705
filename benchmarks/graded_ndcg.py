"""Graded nDCG@10 of the built-in bm25 on a graded dataset, beside ir_measures' on the same run.

    pip install -e '.[test]'     # ir_measures
    python benchmarks/graded_ndcg.py /tmp/sets/cranfield --language en

Runs `BM25Method(language=...)` over the dataset (a BEIR folder with graded qrels, e.g.
benchmarks/public_sets.py's Cranfield), then scores the same rankings three ways: the tool's
nDCG@10 with the judgments' grades (what `--all-metrics` reports), ir_measures' nDCG@10 on the
same qrels with their grades (trec_eval's ndcg_cut.10), and the tool's nDCG@10 with every
relevant document at grade 1 (what it reported before grades were read). Exit 1 when the first
two differ by more than 1e-9.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.data.dataset import load_dataset
from retrieval.measures.metrics import ndcg_at_k
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--language", default="fr")
    parser.add_argument("--split", default="test")
    args = parser.parse_args(argv)
    import ir_measures

    dataset = load_dataset(args.dataset, args.split)
    rankings = BM25Method(language=args.language).rank(Context(dataset=dataset, depth=1000))
    ids = dataset.doc_ids
    ranked = {q.id: [ids[i] for i in r.indices] for q, r in zip(dataset.questions, rankings, strict=True)}
    graded = [ndcg_at_k(ranked[q.id], q.judgments, 10) for q in dataset.questions]
    binary = [ndcg_at_k(ranked[q.id], q.relevant, 10) for q in dataset.questions]
    qrels = [ir_measures.Qrel(q.id, doc, grade) for q in dataset.questions for doc, grade in q.judgments.items()]
    run = [
        ir_measures.ScoredDoc(q.id, doc, float(len(ranked[q.id]) - rank))
        for q in dataset.questions
        for rank, doc in enumerate(ranked[q.id])
    ]
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], qrels, run)}
    gap = max(abs(theirs.get(q.id, 0.0) - v) for q, v in zip(dataset.questions, graded, strict=True))
    grades = sorted({g for q in dataset.questions for g in q.judgments.values()})
    print(
        f"{dataset.name} ({args.split}): {len(dataset.questions)} questions, "
        f"{len(dataset.documents):,} documents, grades {grades}"
    )
    print(f"nDCG@10, graded (the tool):      {statistics.fmean(graded):.4f}")
    print(f"nDCG@10, graded (ir_measures):   {statistics.fmean(theirs.get(q.id, 0.0) for q in dataset.questions):.4f}")
    print(f"nDCG@10, every relevant grade 1: {statistics.fmean(binary):.4f}")
    print(f"largest per-question difference, tool - ir_measures: {gap:.2e}")
    return 1 if gap > 1e-9 else 0


if __name__ == "__main__":
    raise SystemExit(main())
