"""Command line: `python -m retrieval` / `retrieval-eval`. Parses flags, evaluates, prints the report."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from retrieval.atomic import atomic_write_text
from retrieval.baseline import (
    BaselineError,
    at_k,
    config_changes,
    incompatibility,
    load_baseline,
    run_data_changes,
)
from retrieval.config import ConfigError, load_settings
from retrieval.dataset import DatasetError, load_dataset
from retrieval.evaluate import evaluate, raising_method
from retrieval.gate import BASELINE_PATH, importable
from retrieval.markdown import fit
from retrieval.providers.base import ProviderError, ReplayMissError
from retrieval.recording import CassetteError
from retrieval.redaction import failure_text, redacted
from retrieval.report import build_report, render_json, render_markdown
from retrieval.run import Run, RunLogError, load_run, run_log

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
    p.add_argument("--executor", help="local (default) or ray: shardable search on $RAY_ADDRESS or a local Ray")
    p.add_argument("--all-metrics", action="store_true", help="also hit rate@k and nDCG@10")
    p.add_argument(
        "--what-if",
        dest="what_if",
        action="store_true",
        help="add the what-if sweeps (candidates, RRF k, weights) to the report; always in --format json",
    )
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--output", help="write the report to this file instead of standard output")
    p.add_argument("--log", help="write the per-question run log (JSONL) to this file")
    p.add_argument(
        "--summary-output",
        dest="summary_output",
        help="also write the Markdown report here, fitted to a CI job summary's 1 MB limit "
        "(GitHub shows none of a larger one): the folded failure lists go first",
    )
    p.add_argument(
        "--from-log",
        dest="from_log",
        help="report on a run log written by --log, without calling or replaying any model "
        "(the log's own k, candidates and methods apply)",
    )
    p.add_argument(
        "--baseline",
        nargs="?",
        const="",
        help="show each figure's change against a baseline file (default: the project's `baseline` setting, "
        f"{BASELINE_PATH} from the project root)",
    )
    calls = p.add_mutually_exclusive_group()
    calls.add_argument("--live", action="store_true", help="call the providers (embedding cache in .cache/)")
    calls.add_argument("--record", action="store_true", help="call the providers and rewrite the cassettes")
    return p


def _progress(total: int, label: str) -> object:
    from tqdm import tqdm

    # disable=None hides the bar when stderr is not a terminal (CI logs stay readable).
    return tqdm(total=total, desc=label, unit="text", file=sys.stderr, disable=None, leave=False)


def _write(path: str, text: str) -> None:
    # Atomic: an interrupted run leaves the previous report or log, never half of one.
    atomic_write_text(path, text)


def _all_degraded(run: Run) -> list[str]:
    """One warning per method that fell back on every question (its figures are not its own)."""
    warnings = []
    for method in run.methods:
        reasons = run.degraded(method) if run.results and all(method in r.methods for r in run.results) else {}
        if reasons and len(reasons) == len(run.results):
            common = Counter(reasons.values()).most_common(1)[0][0]
            warnings.append(
                f"warning: every {method} call degraded ({len(reasons)} of {len(run.results)} questions; "
                f"most often: {common}): its figures are those of its fallback. Check the model, the key "
                "and the endpoint, then run again."
            )
    return warnings


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluation and print the report. Bad input is one line on stderr, exit code 2; an
    exception raised by a method (or a bug) prints its redacted traceback, exit code 1."""
    args = _parser().parse_args(argv)
    try:
        return _main(args)
    except (DatasetError, ConfigError, ProviderError, CassetteError, BaselineError, RunLogError) as exc:
        # Only here: the gate has no way to run without its cassettes.
        hint = " Or run without cassettes: --live, or --methods bm25." if isinstance(exc, ReplayMissError) else ""
        print(f"error: {redacted(str(exc))}{hint}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted: the cassettes, the cache and the baseline were left as they were", file=sys.stderr)
        return 130
    except Exception as exc:
        if isinstance(exc, OSError) and raising_method(exc) is None:
            where = f" {exc.filename}" if exc.filename else ""
            print(f"error: cannot write or read{where}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        # A method's own error (requests' HTTPError is an OSError too) or a bug: the traceback
        # leads into the code at fault, cut of what could hold a key (it reaches CI logs).
        print(f"error: {failure_text(exc)}", file=sys.stderr)
        return 1
    return 2


def _main(args: argparse.Namespace) -> int:
    # --baseline names the file to compare with, not the project's `baseline` setting.
    settings = load_settings(".", {k: v for k, v in vars(args).items() if k != "baseline"})
    dataset = load_dataset(settings.dataset)
    if args.from_log:
        if args.live or args.record:
            raise ConfigError("--from-log reports on a saved run: it cannot be combined with --live or --record.")
        run = load_run(args.from_log)
        if run.fingerprint != dataset.fingerprint:
            raise RunLogError(
                f"{args.from_log}: written for dataset {run.dataset} ({run.fingerprint}), but {settings.dataset} "
                f"is {dataset.fingerprint}. Pass the log's dataset with --dataset."
            )
    else:
        mode = "record" if args.record else "live" if args.live else "replay"
        with importable(settings.root):  # a `module:factory` of the project, from any subfolder
            run = evaluate(dataset, settings, mode=mode, progress=_progress)  # type: ignore[arg-type]
        for line in run.drift:  # a recording: what changed against the cassettes it replaced
            print(line, file=sys.stderr)
    if args.log:
        _write(args.log, run_log(run))
    entry, notice = None, None
    if args.baseline is not None:
        baseline = args.baseline or settings.baseline  # a bare --baseline: the project's, wherever the cwd
        if not Path(baseline).is_file():
            raise BaselineError(f"{baseline}: no such baseline file.")
        profile = str(run.config.get("profile", settings.profile.name))
        entry = load_baseline(baseline)["profiles"].get(profile)
        entry = at_k(entry, settings.k) if entry else None
        problem = incompatibility(entry, run, profile) if entry else None
        changed = config_changes(entry, run) if entry and not problem else []
        data = run_data_changes(entry, run) if entry and not problem else None
        if problem:
            notice = f"the changes shown are against a baseline that is not comparable: {problem}"
        else:
            notes = []
            if data:
                notes.append(
                    f"the dataset changed since the baseline ({data}): the changes shown compare this run's figures "
                    "with the baseline's, each on its own questions (the gate compares the "
                    f"{len(data.common)} questions both hold)."
                )
            if changed:
                notes.append(
                    f"the baseline was made with another configuration ({'; '.join(changed)}): the changes shown "
                    "are what this configuration moved."
                )
            notice = " ".join(notes) or None
    report = build_report(
        run,
        dataset.documents,
        settings.prices,
        extra=args.all_metrics,
        what_if=args.what_if,
        baseline=entry,
        dropped_questions=dataset.dropped_questions,
    )
    text = render_json(report, notice) if args.format == "json" else render_markdown(report, notice=notice)
    if args.output:
        _write(args.output, text)
    else:
        sys.stdout.write(text)
    if args.summary_output:
        markdown = text if args.format == "markdown" else render_markdown(report, notice=notice)
        _write(args.summary_output, fit(markdown))
    # After the report, so that it is still written: a method that degraded everywhere fails the run.
    degraded = _all_degraded(run)
    for line in degraded:
        print(line, file=sys.stderr)
    return 1 if degraded else 0
