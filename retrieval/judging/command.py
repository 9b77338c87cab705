"""`python -m retrieval judge`: pool the top k of every configured method for every question and
have the unjudged pairs judged, on a local page, in a spreadsheet, or by the profile's LLM.

The pool comes from the configured methods' rankings, replayed from the committed cassettes (no
key, no model server; `--live` ranks live instead). Every judgment goes to the dataset's
judgments.jsonl (retrieval.data.judgment_file), with its provenance and date.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from retrieval.config import ConfigError, Settings, load_settings, shown_path
from retrieval.data.dataset import Dataset, load_dataset
from retrieval.data.judgment_file import JUDGMENTS_FILE, source_problem
from retrieval.judging.pool import MAX_DEPTH, Candidate, depth_pool, unjudged
from retrieval.judging.server import DEFAULT_PORT
from retrieval.recording.recorder import Mode

__all__ = ["judge_command", "judge_parser"]

COMMAND = "python -m retrieval judge"


def judge_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=COMMAND,
        description="Pool the top k of every configured method for every question (TREC-style depth-k pool) "
        "and judge the pairs nobody judged: on a local page (127.0.0.1), in a spreadsheet (--export, "
        "--import) or with the profile's LLM (--llm). Judgments go to the dataset's judgments.jsonl.",
    )
    p.add_argument("--dataset", help="dataset folder (default: the project's)")
    p.add_argument("--profile", help="profile from the project file (default: local)")
    p.add_argument("--methods", help="comma-separated methods to pool (default: the project's methods)")
    p.add_argument("--split", help="which qrels file of a BEIR folder: qrels/SPLIT.tsv")
    p.add_argument("--relevant-grade", type=int, dest="relevant_grade", help="the least grade counted as relevant")
    p.add_argument("--language", help="the dataset's language, for the highlighted terms (default: the project's)")
    p.add_argument(
        "--depth", type=int, help=f"the pool's depth: the top DEPTH of every method (default: k; at most {MAX_DEPTH})"
    )
    p.add_argument("--judge", help="who judges on the page, written as human:JUDGE (default: git config user.name)")
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the page's port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free one)",
    )
    p.add_argument(
        "--export", metavar="FILE", help="write the pool's unjudged pairs to a CSV for a spreadsheet, then stop"
    )
    p.add_argument("--all", action="store_true", help="with --export or --llm: the pool's judged pairs too")
    p.add_argument("--import", dest="import_file", metavar="FILE", help="bring a graded CSV back into judgments.jsonl")
    p.add_argument(
        "--llm", action="store_true", help="have the profile's LLM propose grades (UMBRELA-style), as llm:MODEL"
    )
    p.add_argument(
        "--holes-only", dest="holes_only", action="store_true", help="with --llm: only pairs no person judged"
    )
    p.add_argument(
        "--baseline-ref",
        dest="baseline_ref",
        metavar="REF",
        help="compare with the base branch's baseline at REF (as the gate does): the page's filter shows the pairs "
        "its undecided drops rest on ('only what this pull request needs'), the export marks them needed",
    )
    calls = p.add_mutually_exclusive_group()
    calls.add_argument(
        "--live", action="store_true", help="with --llm: call the model without recording; else rank live"
    )
    calls.add_argument("--record", action="store_true", help="with --llm: call the model and record judge-MODEL.json")
    return p


def _settings(args: argparse.Namespace) -> Settings:
    keys = ("dataset", "profile", "methods", "split", "relevant_grade", "language")
    return load_settings(".", {k: getattr(args, k) for k in keys})


def _who(args: argparse.Namespace, settings: Settings) -> str:
    """human:<name>, from --judge or git's user.name."""
    name = args.judge
    if not name:
        try:
            done = subprocess.run(
                ["git", "config", "user.name"], cwd=settings.root, capture_output=True, text=True, timeout=10
            )
            name = done.stdout.strip() if done.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            name = ""
    if not name:
        raise ConfigError(
            "who judges? Give --judge NAME (the judgments are written as human:NAME), or set git's user.name."
        )
    source = f"human:{name}"
    problem = source_problem(source)
    if problem:
        raise ConfigError(f"--judge {name!r}: {problem}.")
    return source


def _pool(
    settings: Settings, dataset: Dataset, depth: int, live: bool, reference: str | None
) -> tuple[list[Candidate], frozenset[tuple[str, str]] | None, tuple[str, ...]]:
    """The depth-`depth` pool of the configured methods, with `reference` the pairs the
    comparison with its baseline left undecided (None without one, or when nothing was compared),
    and the names of the methods that ranked (the run's: a configured entry point is named by its
    method, a method the profile cannot run is not among them)."""
    from retrieval.evaluation.evaluate import evaluate
    from retrieval.evaluation.progress import stderr_progress
    from retrieval.gate.result import importable, run_gate

    if reference is not None:
        if live:
            raise ConfigError("--baseline-ref compares the replayed run, as the gate does: drop --live.")
        result = run_gate(settings, "replay", reference)
        needed = frozenset((q, d) for c in result.checks if c.undecided for q, d, _ in c.unjudged)
        if result.problem:
            print(f"warning: nothing compared with {reference}: {result.problem}", file=sys.stderr)
        # Against a base branch that refuses LLM judgments, the pairs only an LLM graded are holes
        # to it: the page offers them to people (result.base_run: the run judged without them).
        judged = result.base_run or result.run
        return depth_pool(judged, depth), None if result.problem else needed, tuple(result.run.methods)
    with importable(settings.root):
        run = evaluate(dataset, settings, mode="live" if live else "replay", progress=stderr_progress)
    return depth_pool(run, depth), None, tuple(run.methods)


def _people_judged(dataset: Dataset) -> dict[str, set[str]]:
    """Each question's documents judged by a person or a file (an LLM's grades left out)."""
    return {q.id: {d for d in q.judgments if (q.id, d) not in dataset.llm_graded} for q in dataset.questions}


def judge_command(args: argparse.Namespace) -> int:
    """Run `python -m retrieval judge` with parsed `args`; its exit code (0: done)."""
    settings = _settings(args)
    dataset = load_dataset(
        settings.dataset, settings.split, settings.relevant_grade, accept_llm=settings.accept_llm_judgments
    )
    path = Path(settings.dataset) / JUDGMENTS_FILE
    lock = Path(settings.cache) / "judgments.lock"
    if args.import_file:
        from retrieval.judging.spreadsheet import import_csv

        written, same = import_csv(args.import_file, dataset, path, lock)
        print(f"{args.import_file}: {written} grade(s) written to {path} ({same} it already held).", file=sys.stderr)
        return 0
    depth = settings.k if args.depth is None else args.depth
    if not 1 <= depth <= MAX_DEPTH:
        raise ConfigError(f"--depth must be from 1 to {MAX_DEPTH} (the top of each ranking a run keeps), got {depth}.")
    if (args.record or args.holes_only) and not args.llm:
        raise ConfigError("--record and --holes-only go with --llm: the LLM judge's calls.")
    pool, needed, methods = _pool(settings, dataset, depth, args.live and not args.llm, args.baseline_ref)
    if args.llm:
        from retrieval.judging.llm_judge import judge_with_llm

        people = _people_judged(dataset)
        chosen = [c for c in pool if not args.holes_only or c.document not in people[c.question]]
        mode: Mode = "record" if args.record else "live" if args.live else "replay"
        run = judge_with_llm(settings, dataset, chosen, mode, path, lock)
        print(run.summary(path, settings.accept_llm_judgments), file=sys.stderr)
        return 0
    if args.export:
        from retrieval.judging.spreadsheet import export_csv

        rows = pool if args.all else unjudged(pool)
        count = export_csv(args.export, dataset, rows, needed or frozenset())
        print(
            f"{args.export}: {count} pair(s) of the top {depth} of {', '.join(methods)}. Fill the grade "
            f"column (0 not relevant, 1 related, 2 partly answers, 3 answers it) and bring it back with "
            f"`{COMMAND} --import {args.export}`.",
            file=sys.stderr,
        )
        return 0
    from retrieval.judging.server import serve_page
    from retrieval.judging.session import JudgingSession

    session = JudgingSession(
        dataset,
        unjudged(pool),
        _who(args, settings),
        path,
        lock,
        settings.language,
        needed,
        shown_path(path, settings.root),
    )
    serve_page(session, args.port)
    return 0
