"""The PostgreSQL full-text retriever on a dataset: figures per question type, and where the time goes.

    python benchmarks/postgres_demo.py                  # data/demo on a throwaway cluster
    RETRIEVAL_PG_DSN='host=... dbname=...' python benchmarks/postgres_demo.py --dataset data/demo

Without RETRIEVAL_PG_DSN it starts a throwaway cluster (retrieval.adapters.pg_cluster: needs
PostgreSQL installed) and removes it afterwards. Prints recall@5 and MRR overall and per
question type, then the median of --repeat runs of: indexing (temporary table, COPY, GIN
index), the questions ranked in one statement, the same questions in one round trip each,
and the whole rank() (connection included).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator

from retrieval.adapters import postgres as pg
from retrieval.adapters.pg_cluster import throwaway_cluster
from retrieval.data.dataset import load_dataset
from retrieval.measures.metrics import score_method
from retrieval.methods.base import Context


@contextlib.contextmanager
def server() -> Iterator[None]:
    """RETRIEVAL_PG_DSN as given, or pointing at a throwaway cluster for the block."""
    if os.environ.get(pg.DSN_ENV):
        yield
        return
    with throwaway_cluster() as cluster:
        os.environ[pg.DSN_ENV] = cluster.dsn
        try:
            yield
        finally:
            del os.environ[pg.DSN_ENV]


def median_ms(run: Callable[[], object], repeat: int) -> str:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return f"{1000 * statistics.median(times):.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="data/demo")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    context = Context(dataset=dataset, depth=1000)
    method = pg.PostgresMethod()
    with server():
        rankings = method.rank(context)
        ranked = {
            q.id: [dataset.doc_ids[i] for i in r.indices] for q, r in zip(dataset.questions, rankings, strict=True)
        }
        scores = score_method(
            ranked,
            {q.id: q.relevant for q in dataset.questions},
            {q.id: q.type for q in dataset.questions},
            ["recall@5", "mrr"],
        )
        print("| questions | recall@5 | MRR |\n|---|---|---|")
        for label, figures in [("all", scores.overall), *scores.by_type.items()]:
            print(f"| {label} | {figures['recall@5']:.2f} | {figures['mrr']:.2f} |")

        questions = [pg.search_text(q.text) for q in dataset.questions]
        params = {"config": method.text_search_config, "weights": list(method.weights), "depth": context.depth}
        with pg.connect() as conn:
            # Each indexing run gets its own transaction, rolled back: the temporary table goes with it.
            def index() -> None:
                with conn.transaction(force_rollback=True):
                    method._index(conn, context)

            indexing = median_ms(index, args.repeat)
            method._index(conn, context)
            batched = median_ms(
                lambda: conn.execute(pg._RANK_SQL, {**params, "questions": questions}).fetchall(), args.repeat
            )
            single = median_ms(
                lambda: [conn.execute(pg._RANK_SQL, {**params, "questions": [q]}).fetchall() for q in questions],
                args.repeat,
            )
        whole = median_ms(lambda: method.rank(context), args.repeat)
    n = len(questions)
    print(
        f"\nmedian of {args.repeat}: indexing {len(dataset.documents)} documents {indexing};"
        f" {n} questions in one statement {batched}; {n} round trips {single}; rank() {whole}"
    )


if __name__ == "__main__":
    main()
