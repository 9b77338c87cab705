"""Command line: `python -m retrieval` / `retrieval-eval`. Parses flags, evaluates, prints the report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval.baseline import BaselineError, load_baseline
from retrieval.config import ConfigError, load_settings
from retrieval.dataset import DatasetError, load_dataset
from retrieval.evaluate import evaluate
from retrieval.gate import BASELINE_PATH
from retrieval.providers.base import ProviderError
from retrieval.recording import CassetteError
from retrieval.report import build_report, render_json, render_markdown
from retrieval.run import save_run

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m retrieval",
        description="Evaluate retrieval methods (bm25, vector, hybrid, rerank) with recall@k and MRR. "
        "By default model calls are replayed from cassettes/<profile>/: no key, no server.",
    )
    p.add_argument("--dataset", help="dataset folder (native: corpus.jsonl + questions.jsonl; or BEIR)")
    p.add_argument("--profile", help="profile from retrieval.toml / [tool.retrieval] (default: local)")
    p.add_argument("--methods", help="comma-separated: bm25,vector,hybrid,rerank or module:factory")
    p.add_argument("--k", type=int, help="recall cut-off (default 5)")
    p.add_argument("--rrf-k", type=int, dest="rrf_k", help="reciprocal rank fusion constant (default 60)")
    p.add_argument("--candidates", type=int, help="hybrid candidates given to the reranker (default 20)")
    p.add_argument("--embedding-model", dest="embedding_model", help="overrides EMBEDDING_MODEL and the profile")
    p.add_argument("--model", dest="rerank_model", help="reranker model; overrides MODEL and the profile")
    p.add_argument("--workers", type=int, dest="rerank_workers", help="concurrent rerank calls (default 8)")
    p.add_argument("--all-metrics", action="store_true", help="also hit rate@k and nDCG@10")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--output", help="write the report to this file instead of standard output")
    p.add_argument("--log", help="write the per-question run log (JSONL) to this file")
    p.add_argument(
        "--baseline",
        nargs="?",
        const=BASELINE_PATH,
        help=f"show each figure's change against a baseline file (default {BASELINE_PATH})",
    )
    calls = p.add_mutually_exclusive_group()
    calls.add_argument("--live", action="store_true", help="call the providers (embedding cache in .cache/)")
    calls.add_argument("--record", action="store_true", help="call the providers and rewrite the cassettes")
    return p


def _progress(total: int, label: str) -> object:
    from tqdm import tqdm

    # disable=None hides the bar when stderr is not a terminal (CI logs stay readable).
    return tqdm(total=total, desc=label, unit="text", file=sys.stderr, disable=None, leave=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluation and print the report; errors are one line on stderr, exit code 2."""
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(".", vars(args))
        dataset = load_dataset(settings.dataset)
        mode = "record" if args.record else "live" if args.live else "replay"
        run = evaluate(dataset, settings, mode=mode, progress=_progress)  # type: ignore[arg-type]
    except (DatasetError, ConfigError, ProviderError, CassetteError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: nothing was written", file=sys.stderr)
        return 130
    if args.log:
        save_run(run, args.log)
    documents = {d.id: d.content for d in dataset.documents}
    report = build_report(run, documents, settings.prices, extra=args.all_metrics)
    compared = None
    if args.baseline:
        try:
            entry = load_baseline(args.baseline)["profiles"].get(settings.profile.name)
        except BaselineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        compared = entry["methods"] if entry else None
    text = render_json(report) if args.format == "json" else render_markdown(report, compared)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
