"""A project's evaluation with `executor = "ray"` against the same evaluation in this process,
paired round by round, on a cluster that is already up (RAY_ADDRESS, or --address).

    python benchmarks/ray_vs_local.py --project /tmp/piaf --address 127.0.0.1:6379 --rounds 5

The project must replay (its cassettes and vector store recorded). One Ray connection is made
for the whole run, so the cluster's workers are warm after the first round (a fresh
`python -m retrieval --executor ray` also pays its own connection and worker start: time that
with the whole command). Each round evaluates the project locally, then on the cluster (the order
swaps every round, so that a drift of the machine's speed falls on both alike), and prints
the stages' seconds of the methods the cluster runs (the report's cost section), the
evaluation's wall time, and the ratio ray / local of each; the medians close the table. Every
round checks that the two runs' logs (every question's rankings, scores and ranks) are the
same but for their timings: a ratio of two runs that
disagree would mean nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

# Runs from a checkout without installation: `python benchmarks/ray_vs_local.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import machine

from retrieval.config import load_settings
from retrieval.data.dataset import load_dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.run.results import Run, run_log


def _untimed(run: Run) -> str:
    # The run log but for what differs by nature: the timings, and where the methods ran.
    for usage in run.usage.values():
        usage.seconds = 0.0
    run.executor = None
    return run_log(run)


def _round(dataset: Any, settings: Any, executor: str, methods: list[str]) -> tuple[list[float], float, str]:
    started = time.perf_counter()
    run = evaluate(dataset, replace(settings, executor=executor))
    wall = time.perf_counter() - started
    return [run.usage[m].seconds for m in methods], wall, _untimed(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", required=True, help="a project folder that replays (retrieval.toml, recordings)")
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS"), help="the cluster (default $RAY_ADDRESS)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sharded", default="bm25,vector", help="the methods whose stage times are summed")
    args = parser.parse_args(argv)
    if not args.address or not 1 <= args.rounds <= 50:
        parser.error("--address (or RAY_ADDRESS) names the running cluster; --rounds 1..50")

    import ray

    os.chdir(args.project)
    settings = load_settings(".", {})
    dataset = load_dataset(settings.dataset)
    methods = args.sharded.split(",")
    ray.init(address=args.address, log_to_driver=False)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 0))
        nodes = sum(1 for node in ray.nodes() if node["Alive"])
        print(f"Machine: {machine()}; cluster: {nodes} nodes, {cpus} CPUs", flush=True)
        print(f"Project: {args.project}: {len(dataset.documents):,} documents, {len(dataset.questions):,} questions")
        for executor in ("local", "ray"):  # warm-up: imports, the cluster's workers, the analysis cache
            _round(dataset, settings, executor, methods)
        header = [*methods, "stages", "evaluation wall"]
        print("\n| round | " + " | ".join(f"{h}: local, ray (s), ratio" for h in header) + " |")
        print("| ---: |" + " ---: |" * len(header))
        ratios: list[list[float]] = []
        for number in range(1, args.rounds + 1):
            order = ("local", "ray") if number % 2 else ("ray", "local")
            measured = {executor: _round(dataset, settings, executor, methods) for executor in order}
            if measured["local"][2] != measured["ray"][2]:
                print(f"round {number}: the cluster's run differs from the local one", file=sys.stderr)
                return 1
            pairs = [
                *zip(measured["local"][0], measured["ray"][0], strict=True),
                (sum(measured["local"][0]), sum(measured["ray"][0])),
                (measured["local"][1], measured["ray"][1]),
            ]
            ratios.append([ray_s / local_s for local_s, ray_s in pairs])
            cells = [f"{local_s:.2f}, {ray_s:.2f}, {ray_s / local_s:.2f}" for local_s, ray_s in pairs]
            print(f"| {number} | " + " | ".join(cells) + " |", flush=True)
        medians = [statistics.median(column) for column in zip(*ratios, strict=True)]
        print(
            "\nmedian ratio ray / local: "
            + ", ".join(f"{h} {m:.2f}" for h, m in zip(header, medians, strict=True))
            + "; the same run log in every round"
        )
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
