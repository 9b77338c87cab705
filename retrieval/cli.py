"""Command line: `python -m retrieval` / `retrieval-eval`. Parses flags, evaluates, prints the report."""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from retrieval.config import ConfigError, Settings, load_settings
from retrieval.data.dataset import DatasetError, load_dataset
from retrieval.data.freed_memory import keep_freed_memory
from retrieval.files.atomic import atomic_write_text, replace_files
from retrieval.gate.baseline_set import recover
from retrieval.gate.compare import at_k, config_changes, incompatibility
from retrieval.gate.questions import run_data_changes
from retrieval.gate.reference import baseline_at
from retrieval.gate.schema import BASELINE_PATH, BaselineError, load_baseline
from retrieval.measures.figures import DIGITS
from retrieval.moved import RetrievalDeprecationWarning
from retrieval.providers.base import ProviderError, ReplayMissError
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.recorder import Mode
from retrieval.report.gate_summary import render_gate_summary
from retrieval.run.results import Run, RunLogError, load_run, run_log
from retrieval.run.trec import trec_files
from retrieval.text.markdown import fit
from retrieval.text.redaction import failure_text, redacted
from retrieval.version import __version__

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m retrieval",
        description="Evaluate retrieval methods (bm25, vector, hybrid, rerank) with recall@k and MRR. "
        "By default model calls are replayed from cassettes/<profile>/: no key, no server.",
    )
    p.add_argument("--version", action="version", version=f"retrieval-regression {__version__}")
    p.add_argument("--dataset", help="dataset folder (native: corpus.jsonl + questions.jsonl; or BEIR)")
    p.add_argument("--profile", help="profile from retrieval.toml / [tool.retrieval] (default: local)")
    p.add_argument(
        "--methods",
        help="comma-separated: bm25,vector,hybrid,rerank, module:factory, trec:RUN_FILE, langchain:module:object, "
        "llamaindex:module:object or haystack:module:object",
    )
    p.add_argument(
        "--run",
        action="append",
        metavar="FILE",
        help="also evaluate this TREC run file as a method (trec:FILE; may be repeated)",
    )
    p.add_argument("--split", help="which qrels file of a BEIR folder to evaluate: qrels/SPLIT.tsv (default test)")
    p.add_argument(
        "--relevant-grade",
        type=int,
        dest="relevant_grade",
        help="the least grade recall and MRR count as relevant (default 1; nDCG weighs every grade)",
    )
    p.add_argument(
        "--language",
        help="the language of the dataset's text, for BM25's analyzer: fr (default), en, de, es, it... (Snowball)",
    )
    p.add_argument("--k", type=int, help="recall cut-off (default 5)")
    p.add_argument("--rrf-k", type=int, dest="rrf_k", help="reciprocal rank fusion constant (default 60)")
    p.add_argument("--candidates", type=int, help="hybrid candidates given to the reranker (default 20)")
    p.add_argument("--embedding-model", dest="embedding_model", help="overrides EMBEDDING_MODEL and the profile")
    p.add_argument("--model", dest="rerank_model", help="reranker model; overrides MODEL and the profile")
    p.add_argument("--workers", type=int, dest="rerank_workers", help="concurrent rerank calls (default 8)")
    p.add_argument("--executor", help="local (default) or ray: shardable search on $RAY_ADDRESS or a local Ray")
    p.add_argument(
        "--ray-timeout",
        type=float,
        dest="ray_timeout",
        help="seconds joining or starting the Ray cluster, or a cluster out of reach mid-run, may take (default 180)",
    )
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
        "--export-trec",
        dest="export_trec",
        metavar="DIR",
        help="write every method's run (DIR/<method>.run) and the qrels (DIR/qrels.txt) in TREC format, "
        "for trec_eval, ir_measures or ranx",
    )
    p.add_argument(
        "--summary-output",
        dest="summary_output",
        help="also write the Markdown report here, fitted to a CI job summary's 1 MB limit "
        "(GitHub shows none of a larger one): the folded failure lists go first",
    )
    p.add_argument(
        "--comment-output",
        dest="comment_output",
        help="with --gate: also write its summary fitted to a pull-request comment (GitHub takes 65,536 characters)",
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
    p.add_argument(
        "--baseline-ref",
        dest="baseline_ref",
        metavar="REF",
        help="with --baseline: compare with the baseline file as it is at this git ref (e.g. origin/main, read "
        "with `git show`); the drops the current baseline accepts, and why, are shown. With --gate: the gate "
        "also compares with what that ref gates (its own project file, baseline and snapshots), as pytest "
        "--retrieval-baseline-ref does",
    )
    p.add_argument(
        "--gate",
        action="store_true",
        help="the pytest gate's verdicts without pytest (and without any pytest hook or conftest): print each "
        "failed check in the plugin's words; exit 1 when one fails, 0 when all hold. With --summary-output, "
        "the Markdown job summary of those verdicts (written also when nothing could be compared)",
    )
    p.add_argument(
        "--update-baseline",
        dest="update_baseline",
        action="store_true",
        help="with --gate: write the figures and top-10 rankings as the baseline when every other check holds",
    )
    p.add_argument(
        "--allow-regression",
        dest="allow_regression",
        metavar="REASON",
        help="with --update-baseline: accept lower figures, for this reason (recorded in the baseline)",
    )
    calls = p.add_mutually_exclusive_group()
    calls.add_argument("--live", action="store_true", help="call the providers (embedding cache in .cache/)")
    calls.add_argument("--record", action="store_true", help="call the providers and rewrite the cassettes")
    calls.add_argument(
        "--compact-store",
        dest="compact_store",
        action="store_true",
        help="drop the stored corpus vectors the dataset no longer uses (one new segment; old files removed)",
    )
    calls.add_argument(
        "--convert-corpus-cassette",
        dest="convert_corpus_cassette",
        action="store_true",
        help="move an older recording's corpus-embeddings.json into the vector store (same vectors)",
    )
    return p


# Set to a list by `python -m retrieval` (retrieval.__main__), which ends the process without the
# interpreter's teardown: the command's dataset, run and report are kept in it, for the process's
# end to take back at once, rather than freed an object at a time when _main returns (a tenth of a
# second at 100,000 documents). None when main() runs in a longer process: freed as usual.
_left_to_exit: list[object] | None = None


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
    words = list(sys.argv[1:] if argv is None else argv)
    judging = words[:1] == ["judge"]
    if judging:  # `python -m retrieval judge ...`: the judging command (retrieval.judging.command)
        from retrieval.judging.command import judge_command, judge_parser

        judge_args = judge_parser().parse_args(words[1:])
    else:
        parser = _parser()
        args = parser.parse_args(words)
        if args.allow_regression is not None and not args.update_baseline:
            parser.error("--allow-regression only applies with --update-baseline.")
        if args.update_baseline and not args.gate:
            parser.error("--update-baseline applies with --gate (the gate decides what may be written).")
    if not sys.warnoptions:
        # A method module on 0.1's paths (`from retrieval.ranking import top_k`) is told so once:
        # Python hides DeprecationWarnings raised outside __main__, and this one is for the user.
        warnings.simplefilter("default", RetrievalDeprecationWarning)
    try:
        if judging:
            keep_freed_memory()
        return judge_command(judge_args) if judging else _main(args)
    except (DatasetError, ConfigError, ProviderError, CassetteError, BaselineError, RunLogError) as exc:
        # Only here: the gate has no way to run without its cassettes.
        hint = " Or run without cassettes: --live, or --methods bm25." if isinstance(exc, ReplayMissError) else ""
        if judging and hint:
            hint = " Or call without cassettes: --live."
        print(f"error: {redacted(str(exc))}{hint}", file=sys.stderr)
        if not judging and args.gate:
            _gate_stopped(args, redacted(str(exc)))
    except KeyboardInterrupt:
        print("interrupted: the cassettes, the cache and the baseline were left as they were", file=sys.stderr)
        return 130
    except Exception as exc:
        from retrieval.evaluation.method_run import raising_method

        if isinstance(exc, OSError) and raising_method(exc) is None:
            where = f" {exc.filename}" if exc.filename else ""
            print(f"error: cannot write or read{where}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        # A method's own error (requests' HTTPError is an OSError too) or a bug: the traceback
        # leads into the code at fault, cut of what could hold a key (it reaches CI logs).
        print(f"error: {failure_text(exc)}", file=sys.stderr)
        return 1
    finally:
        gc.unfreeze()  # what _main froze is the collector's again: main() may run in a longer process
    return 2


def _gate(settings: Settings, args: argparse.Namespace) -> int:
    """`--gate`: the verdicts the pytest plugin reports, from the same model, in the same words; with
    --summary-output (and --output), that model rendered as the Markdown job summary."""
    from retrieval.gate.outcome import gate_outcome, read_base_branch
    from retrieval.gate.session import planned_items
    from retrieval.report.build import build_report
    from retrieval.report.sections import render_markdown

    if args.live or args.from_log or args.baseline is not None or args.compact_store or args.convert_corpus_cassette:
        raise ConfigError(
            "--gate replays the cassettes (or --record) against the project's baseline (and --baseline-ref's): "
            "drop --live, --from-log, --baseline, --compact-store and --convert-corpus-cassette."
        )
    ref, known = args.baseline_ref, read_base_branch(args.baseline_ref, settings, args.profile)  # read once
    outcome = gate_outcome(
        settings,
        planned_items(settings, ref, args.profile, known),
        "record" if args.record else "replay",
        update=args.update_baseline,
        allow_regression=args.allow_regression or False,
        defer_recording=args.record,
        baseline_ref=ref,
        profile_asked=args.profile,
        known=known,
    )
    verdict = outcome.verdict
    failed = verdict.failed
    for item in failed:
        print(f"FAILED {item.name} - {item.failure}")
    held = len(verdict.items) - len(failed)
    # The plugin's notes after the counts too: the tolerance, the ref, accepted drops and why.
    tail = "".join(verdict.notes)
    print(f"retrieval gate (profile {settings.profile.name}): {held} of {len(verdict.items)} checks held{tail}")
    result = outcome.result
    if args.log and result is not None:
        _write(args.log, run_log(result.run))
    details = ""
    if result is not None:  # its run's report below the verdicts, without a baseline (the verdicts compare)
        report = build_report(
            result.run,
            result.dataset.documents,
            settings.prices,
            dropped_questions=result.dataset.dropped_questions,
            tolerance=settings.tolerance,
        )
        details = render_markdown(report, decimals=DIGITS)
    _write_gate_summary(args, render_gate_summary(verdict, details))
    # As the plugin at session finish: a recording is committed once its secrets item held (every
    # item with --update-baseline); an update is written only when every check held.
    writes = outcome.pending is not None and not failed
    recording = result.recording if result is not None else None
    if recording is not None:
        if writes or (not args.update_baseline and verdict.item("secrets").ok):
            recording.commit()
        else:
            recording.discard()
            print("--record committed nothing (the cassettes are as they were): a check failed", file=sys.stderr)
    if writes and outcome.pending is not None:
        from retrieval.gate.accept import accept

        print(accept(outcome.pending, allow_regression=args.allow_regression or False))
    elif args.update_baseline:
        print(f"--update-baseline wrote nothing: {len(failed)} check(s) failed", file=sys.stderr)
    return 1 if failed else 0


# A pull-request comment holds 65,536 characters at most (a character is one byte or more).
COMMENT_BYTES = 60_000


def _write_gate_summary(args: argparse.Namespace, markdown: str) -> None:
    if args.output:
        _write(args.output, markdown)
    if args.summary_output:
        _write(args.summary_output, fit(markdown))
    if args.comment_output:
        _write(args.comment_output, fit(markdown, COMMENT_BYTES))


def _gate_stopped(args: argparse.Namespace, message: str) -> None:
    """--gate stopped before its verdicts (a wrong project file): the summary still says why."""
    from retrieval.gate.verdicts import verdicts_of

    profile = args.profile or "?"
    verdict = verdicts_of(None, f"error: {message}", [], profile=profile)
    with contextlib.suppress(OSError):  # the error itself is what the run prints
        _write_gate_summary(args, render_gate_summary(verdict))


def _main(args: argparse.Namespace) -> int:
    # --baseline names the file to compare with, not the project's `baseline` setting.
    flags = ("baseline", "baseline_ref", "gate", "update_baseline", "allow_regression", "run", "export_trec")
    settings = load_settings(".", {k: v for k, v in vars(args).items() if k not in flags})
    if args.run:  # a path given on the command line is the shell's: from the working directory
        runs = tuple(f"trec:{Path(file).resolve()}" for file in args.run)
        settings = replace(settings, methods=tuple(dict.fromkeys((*settings.methods, *runs))))
    recover(settings)  # a killed update's half-written baseline set is put back before anything reads it
    keep_freed_memory()  # here: a refused command line or project file ends without numpy (it imports it)
    from retrieval.evaluation.evaluate import evaluate
    from retrieval.evaluation.progress import stderr_progress
    from retrieval.gate.result import importable
    from retrieval.report.build import build_report, render_json
    from retrieval.report.sections import render_markdown

    if args.gate:
        return _gate(settings, args)
    dataset = load_dataset(
        settings.dataset, settings.split, settings.relevant_grade, accept_llm=settings.accept_llm_judgments
    )
    # The dataset (and every module) lives as long as the command: the cycle collector's full
    # passes need not walk its hundreds of thousands of objects again and again. Frozen objects are
    # still freed by their reference counts; a cycle among them waits for main's unfreeze.
    gc.freeze()
    if args.compact_store or args.convert_corpus_cassette:
        from retrieval.evaluation.corpus_vectors import store_command

        print(store_command(settings, dataset, "compact" if args.compact_store else "convert"), file=sys.stderr)
        return 0
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
        mode: Mode = "record" if args.record else "live" if args.live else "replay"
        with importable(settings.root):  # a `module:factory` of the project, from any subfolder
            run = evaluate(dataset, settings, mode=mode, progress=stderr_progress)
        for line in run.drift:  # a recording: what changed against the cassettes it replaced
            print(line, file=sys.stderr)
    if args.log:
        _write(args.log, run_log(run))
    if args.export_trec:
        # As one set: a folder holds one run's files, never some of this run's and some of another's.
        replace_files(args.export_trec, trec_files(run))
    entry, notice, accepted = None, None, None
    if args.baseline_ref and args.baseline is None:
        raise ConfigError("--baseline-ref REF compares with a baseline: give it with --baseline.")
    if args.baseline is not None:
        baseline = args.baseline or settings.baseline  # a bare --baseline: the project's, wherever the cwd
        profile = str(run.config.get("profile", settings.profile.name))
        if args.baseline_ref:
            entry = baseline_at(args.baseline_ref, baseline)["profiles"].get(profile)
            accepted = (load_baseline(baseline)["profiles"].get(profile) or {}).get("accepted")
        elif not Path(baseline).is_file():
            raise BaselineError(f"{baseline}: no such baseline file.")
        else:
            entry = load_baseline(baseline)["profiles"].get(profile)
            accepted = (entry or {}).get("accepted")
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
                    f"with the baseline's, each on its own questions (the gate compares {data.where})."
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
        tolerance=settings.tolerance,
        accepted=accepted,
        llm_checks=dataset.llm_checks,
        unused_judgments=dataset.unused_judgments,
        llm_judgments=sum(j.kind == "llm" for j in dataset.judgment_records),
    )
    text = render_json(report, notice) if args.format == "json" else render_markdown(report, notice=notice)
    if args.output:
        _write(args.output, text)
    else:
        sys.stdout.write(text)
    if args.summary_output:
        markdown = text if args.format == "markdown" else render_markdown(report, notice=notice)
        _write(args.summary_output, fit(markdown))
    if _left_to_exit is not None:
        _left_to_exit.extend((dataset, run, report))
    # After the report, so that it is still written: a method that degraded everywhere fails the run.
    degraded = _all_degraded(run)
    for line in degraded:
        print(line, file=sys.stderr)
    return 1 if degraded else 0
