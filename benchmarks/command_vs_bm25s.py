"""The whole command against bm25s, as processes, in paired rounds: wall and CPU seconds, recall@5, MRR.

    pip install -e '.[bench]'                     # bm25s and PyStemmer (this script installs nothing)
    python benchmarks/french_corpus.py ... --out /tmp/kb-fr100k      # a real French corpus (its docstring)
    python benchmarks/command_vs_bm25s.py /tmp/kb-fr100k --rounds 5          # cold: no analysis cache
    python benchmarks/command_vs_bm25s.py /tmp/kb-fr100k --rounds 5 --warm   # the analysis cache kept

Each round runs, one after the other, in an order that alternates from round to round:
- ours: `python -m retrieval --dataset DIR --methods bm25 --format json`, a new process in a
  scratch folder (its `.cache/bm25-analysis` removed before each cold round; kept, and filled once
  before the rounds, with --warm), as a user or a CI job runs it: start-up, loading and
  fingerprinting the dataset, BM25 (analysis, index, 1,000 questions at depth 1,000), the report;
- bm25s: a new process (this file with --bm25s-child) that reads the same corpus.jsonl and
  questions.jsonl, tokenizes them with French stop words and PyStemmer's French stemmer, indexes
  (`BM25.index`) and retrieves the same depth (`BM25.retrieve`, on every core the machine has:
  `n_threads`), and writes its rankings, which this process scores.
A round's ratio is ours / bm25s for wall seconds and for CPU seconds (user + system of the
process and every process it waited for: our analysis workers are included); the figure is the
median of the rounds' ratios, whose pairs ran in the same minute. Calibration
(`sum(range(3*10**7))`, benchmarks/gate_time.py: about 0.35 s idle) and the load average are
printed before and after. Quality: recall@5 and MRR of both, from the same judgements
(`retrieval.measures.metrics.score_method`), with the paired 95 % bootstrap interval of ours -
bm25s (`retrieval.measures.paired`, the gate's own).

Both sides import compiled bytecode, as an installed package does: pip compiles bm25s's and every
wheel's modules when it installs them, so this package's are compiled once before the rounds
(`compileall`, into its own `__pycache__`), or under `PYTHONDONTWRITEBYTECODE=1` and an editable
install ours alone would compile its modules in every round (about 0.2 s of CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_time import calibration

TIMEOUT = 1800  # seconds per process: a hung round ends the run
METRICS = ["recall@5", "mrr"]
TARGET = 0.45


def bm25s_child(dataset: Path, out: Path, depth: int, threads: int) -> None:
    """What the bm25s process does: read, tokenize (French stop words, Snowball stemmer), index, retrieve."""
    import bm25s
    import Stemmer

    start = time.perf_counter()
    ids, texts = [], []
    with open(dataset / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            document = json.loads(line)
            ids.append(document["id"])
            # The text bm25s sees is ours: title and text (retrieval.data.dataset.Document.content).
            texts.append(f"{document['title']}\n{document['text']}" if document.get("title") else document["text"])
    questions = _questions(dataset)
    stemmer = Stemmer.Stemmer("french")
    corpus = bm25s.tokenize(texts, stopwords="fr", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=1.5, b=0.75)
    retriever.index(corpus, show_progress=False)
    queries = bm25s.tokenize([q["text"] for q in questions], stopwords="fr", stemmer=stemmer, show_progress=False)
    found, _ = retriever.retrieve(queries, k=min(depth, len(ids)), show_progress=False, n_threads=threads)
    ranked = {q["id"]: [ids[int(i)] for i in row] for q, row in zip(questions, found, strict=True)}
    seconds = time.perf_counter() - start
    out.write_text(json.dumps({"rankings": ranked, "seconds": seconds}), encoding="utf-8")


def _questions(dataset: Path) -> list[dict[str, object]]:
    with open(dataset / "questions.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _run(command: list[str], cwd: Path, stdout: Path) -> tuple[float, float]:
    """(wall s, CPU s of the process and its waited-for descendants) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(stdout, "wb") as handle:
        done = subprocess.run(command, cwd=cwd, stdout=handle, stderr=subprocess.PIPE, timeout=TIMEOUT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed (exit {done.returncode}):\n{done.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _ours_scores(report: Path) -> dict[str, dict[str, float]]:
    per_question = json.loads(report.read_text(encoding="utf-8"))["scores"]["bm25"]["per_question"]
    return {m: {q: values[m] for q, values in per_question.items()} for m in METRICS}


def _bm25s_scores(dataset: Path, rankings: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    from retrieval.measures.metrics import score_method

    questions = _questions(dataset)
    relevant = {q["id"]: set(q["relevant"]) for q in questions}
    types = {q["id"]: q.get("type", "") for q in questions}
    per_question = score_method(rankings, relevant, types, METRICS).per_question
    return {m: {q: values[m] for q, values in per_question.items()} for m in METRICS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path, help="a native dataset folder: corpus.jsonl and questions.jsonl")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm", action="store_true", help="keep our analysis cache (filled once before the rounds)")
    parser.add_argument("--depth", type=int, default=1000, help="bm25s's depth: the command's default depth")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="bm25s's retrieve n_threads")
    parser.add_argument("--bm25s-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    dataset = args.dataset.resolve()
    if args.bm25s_child:
        bm25s_child(dataset, args.bm25s_child, args.depth, args.threads)
        return 0
    if not (dataset / "corpus.jsonl").is_file():
        raise SystemExit(f"{dataset}: no corpus.jsonl (build one with benchmarks/french_corpus.py)")
    scratch = Path(tempfile.mkdtemp(prefix="command-vs-bm25s-"))
    ours_command = [sys.executable, "-m", "retrieval", "--dataset", str(dataset), "--methods", "bm25"]
    ours_command += ["--format", "json"]
    theirs_command = [sys.executable, __file__, str(dataset), "--depth", str(args.depth)]
    theirs_command += ["--threads", str(args.threads)]
    cache = scratch / ".cache" / "bm25-analysis"
    import compileall

    import retrieval

    compileall.compile_dir(str(Path(retrieval.__file__).parent), quiet=1)
    try:
        if args.warm:
            _run(ours_command, scratch, scratch / "ours.json")
        print(f"calibration before: {calibration():.2f} s, load average {_load()}")
        print(f"{'warm' if args.warm else 'cold'} rounds: {dataset.name}, bm25s n_threads={args.threads}")
        print("| round | ours wall s | bm25s wall s | wall ratio | ours CPU s | bm25s CPU s | CPU ratio |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        walls, cpus, inner = [], [], []
        for number in range(1, args.rounds + 1):
            times: dict[str, tuple[float, float]] = {}
            for side in ("ours", "bm25s") if number % 2 else ("bm25s", "ours"):
                if side == "ours":
                    if not args.warm:
                        shutil.rmtree(cache, ignore_errors=True)
                    times[side] = _run(ours_command, scratch, scratch / "ours.json")
                else:
                    out = scratch / "bm25s.json"
                    times[side] = _run([*theirs_command, "--bm25s-child", str(out)], scratch, scratch / "bm25s.log")
                    inner.append(json.loads(out.read_text())["seconds"])
            (ow, oc), (tw, tc) = times["ours"], times["bm25s"]
            walls.append(ow / tw)
            cpus.append(oc / tc)
            row = f"| {number} | {ow:.2f} | {tw:.2f} | {ow / tw:.2f} | {oc:.2f} | {tc:.2f} | {oc / tc:.2f} |"
            print(row, flush=True)
        print(f"calibration after: {calibration():.2f} s, load average {_load()}")
        print(
            f"median ratio ours / bm25s: wall {statistics.median(walls):.2f}, CPU {statistics.median(cpus):.2f}"
            f" (target <= {TARGET}); bm25s's own read + tokenize + index + retrieve, in its process:"
            f" median {statistics.median(inner):.2f} s"
        )
        from retrieval.measures.paired import compare

        ours = _ours_scores(scratch / "ours.json")
        theirs = _bm25s_scores(dataset, json.loads((scratch / "bm25s.json").read_text())["rankings"])
        for metric in METRICS:
            c = compare(theirs[metric], ours[metric], metric, "bm25s", "ours")
            mine, other = statistics.fmean(ours[metric].values()), statistics.fmean(theirs[metric].values())
            print(
                f"{metric}: ours {mine:.4f}, bm25s {other:.4f}; ours - bm25s {c.difference:+.4f},"
                f" 95 % interval [{c.low:+.4f}, {c.high:+.4f}]"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
