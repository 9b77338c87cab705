"""Scale check: bm25, vector, hybrid and the metrics on a synthetic corpus, timed per stage.

    python benchmarks/scale.py                      # 1,000 questions x 100,000 documents
    python benchmarks/scale.py --documents 1000000 --timeout 3300   # a million (issue 26)
    python benchmarks/scale.py --documents 10000 --questions 100 --engine rank-bm25
    python benchmarks/scale.py --documents 100000 --project kb100k  # a project, to time the gate
    python benchmarks/scale.py --project kb100kv --fixture-embeddings http://127.0.0.1:18931/v1

Generates French-like documents (Zipfian vocabulary, elisions, accents, identifiers such
as HEL-1234), questions with 1 or 2 relevant documents each, and random float32 unit
embeddings (no model: questions are their relevant documents' vectors plus noise), the
documents' written to a temporary .npy and memory-mapped back (`corpus_vectors`, the seam for
the vector store; --in-memory-vectors keeps them in RAM). Then
runs the project's own BM25Method, VectorMethod, HybridMethod and score_method on a
retrieval.data.dataset.Dataset and prints a Markdown table: seconds and peak memory per stage.

Memory columns:
- "peak RSS": the process's resident high-water mark during the stage (Linux: VmHWM,
  reset before each stage through /proc/self/clear_refs; elsewhere the process maximum
  so far from getrusage, which never goes down).
- "peak traced" (with --tracemalloc): the peak of Python allocations during the stage,
  numpy arrays included (numpy reports its buffers to tracemalloc). Tracing slows
  allocation-heavy code such as the analyzer, so times are only honest without it.

The run is bounded: sizes are capped, the work is fixed by the arguments, and
--timeout (default 600 s) aborts it through SIGALRM.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import signal
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Runs from a checkout without installation: `python benchmarks/scale.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.data.analyzer import analyze
from retrieval.data.corpus_terms import analyze_corpus, forget_analyses
from retrieval.data.dataset import Dataset, Document, Question
from retrieval.measures.metrics import metric_names, score_method
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.hybrid import HybridMethod
from retrieval.methods.support.bm25_engine import QUESTION_BATCH
from retrieval.methods.vector import VectorMethod
from retrieval.run.ranking import Ranking

MAX_DOCUMENTS = 2_000_000
MAX_QUESTIONS = 100_000
# Targets: (seconds, bytes) by corpus size, issue 6 (100,000 documents) and issue 26 (a million).
TARGETS = {100_000: (60.0, 4 * 1024**3), 1_000_000: (120.0, 8 * 1024**3)}
MIB = 1024**2

# French-like words: syllables with accents, glued two to four at a time, plus endings.
_ONSETS = ["b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "ch", "gr", "pl"]
_ONSETS += ["pr", "tr", "cr", "br", "qu", "j"]
_VOWELS = ["a", "e", "i", "o", "u", "é", "è", "ê", "à", "ou", "ai", "au", "eu"]
_ENDINGS = ["", "", "", "r", "s", "t", "l", "n", "ment", "tion", "ité", "eur", "age", "ère", "ée"]
# Real stop words at the top of the distribution, as in French text (the analyzer drops them).
_STOP = ["de", "la", "le", "les", "des", "et", "un", "une", "en", "du", "pour", "sur", "dans"]
_STOP += ["par", "avec", "est", "que", "qui", "au", "ne", "pas", "se"]
_ELIDED = ["l'", "d'", "qu'", "n'", "s'"]
_PREFIXES = ["HEL", "ERR", "SYN", "NET", "DB"]
_QUESTION_STARTS = ["Comment", "Pourquoi", "Que faire si", "Où trouver", "Quand"]


def french_vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    """`size` distinct French-looking words, stop words first (the most frequent ranks)."""
    words = dict.fromkeys(_STOP)
    while len(words) < size:
        n = int(rng.integers(2, 5))
        onsets = rng.choice(_ONSETS, n)
        vowels = rng.choice(_VOWELS, n)
        word = "".join(o + v for o, v in zip(onsets, vowels, strict=True))
        words[word + _ENDINGS[int(rng.integers(len(_ENDINGS)))]] = None
    return list(words)


def zipf_probabilities(size: int, exponent: float = 1.05) -> np.ndarray:
    """Zipf-Mandelbrot word frequencies: p(rank) proportional to 1 / (rank + 2.7)^exponent."""
    weights = 1.0 / (np.arange(1, size + 1) + 2.7) ** exponent
    return weights / weights.sum()


@dataclass(frozen=True)
class Synthetic:
    """A generated dataset and its embeddings."""

    dataset: Dataset
    question_vectors: np.ndarray
    document_vectors: np.ndarray


def _sentence_text(words: list[str], rng: np.random.Generator) -> str:
    """Words into sentences of 8 to 20 words: capitals, commas, full stops, some elisions."""
    out: list[str] = []
    i = 0
    while i < len(words):
        n = int(rng.integers(8, 21))
        sentence = words[i : i + n]
        i += n
        if len(sentence) > 3:
            k = int(rng.integers(1, len(sentence)))
            if sentence[k][0] in "aeiouéèê":
                sentence[k] = _ELIDED[k % len(_ELIDED)] + sentence[k]
            sentence[k // 2] += ","
        sentence[0] = sentence[0][:1].upper() + sentence[0][1:]
        out.append(" ".join(sentence) + ".")
    return " ".join(out)


def generate(
    n_documents: int,
    n_questions: int,
    dim: int,
    seed: int,
    vocabulary_size: int = 50_000,
    mean_length: int = 120,
    vectors_dir: Path | None = None,
) -> Synthetic:
    """A reproducible synthetic corpus, question set and float32 unit embeddings.

    With `vectors_dir`, the document vectors are written there (corpus_vectors) and come back
    memory-mapped, as a vector store serves them; the dataset and the figures are the same.
    """
    rng = np.random.default_rng(seed)
    vocabulary = french_vocabulary(vocabulary_size, rng)
    lengths = rng.integers(mean_length // 2, mean_length * 3 // 2 + 1, n_documents)
    tokens = rng.choice(len(vocabulary), int(lengths.sum()), p=zipf_probabilities(len(vocabulary)))
    tokens = tokens.astype(np.int32)
    ends = np.cumsum(lengths)
    # About a third of the documents define an error code; codes repeat across documents.
    n_codes = max(10, n_documents // 5)
    has_code = rng.random(n_documents) < 0.35
    codes = rng.integers(0, n_codes, n_documents)

    documents: list[Document] = []
    # A document's words are rebuilt from `tokens` when a question needs them (a list of
    # strings per document would cost more than the corpus at a million documents).
    code_at = np.full(n_documents, -1, dtype=np.int64)
    doc_codes: list[str | None] = []
    for i in range(n_documents):
        words = [vocabulary[t] for t in tokens[ends[i] - lengths[i] : ends[i]]]
        code = None
        if has_code[i]:
            code = f"{_PREFIXES[codes[i] % len(_PREFIXES)]}-{1000 + codes[i]}"
            code_at[i] = int(rng.integers(len(words)))
            words.insert(int(code_at[i]), code)
        title = " ".join(words[:4]).capitalize()
        documents.append(Document(f"doc-{i:07d}", title, _sentence_text(words, rng)))
        doc_codes.append(code)

    def doc_words(i: int) -> list[str]:
        words = [vocabulary[t] for t in tokens[ends[i] - lengths[i] : ends[i]]]
        if doc_codes[i] is not None:
            words.insert(int(code_at[i]), doc_codes[i])
        return words

    questions: list[Question] = []
    relevant_sets: list[np.ndarray] = []
    for j in range(n_questions):
        relevant = rng.choice(n_documents, 2 if rng.random() < 0.3 else 1, replace=False)
        picked: list[str] = []
        for r in relevant:
            words = doc_words(int(r))
            picked += [words[int(x)] for x in rng.integers(0, len(words), int(rng.integers(3, 7)))]
        kind = "multi" if len(relevant) == 2 else "lexical"
        code = doc_codes[relevant[0]]
        if code is not None and rng.random() < 0.5:
            picked.append(code if rng.random() < 0.5 else code.replace("-", " "))
            kind = "identifier"
        start = _QUESTION_STARTS[j % len(_QUESTION_STARTS)]
        text = f"{start} {' '.join(picked)} ?"
        ids = tuple(documents[r].id for r in relevant)
        questions.append(Question(f"q-{j:06d}", text, kind, ids))
        relevant_sets.append(relevant)

    document_vectors = corpus_vectors(rng, n_documents, dim, vectors_dir)
    # A question points towards its relevant documents, more or less clearly.
    question_vectors = np.empty((n_questions, dim), dtype=np.float32)
    for j, relevant in enumerate(relevant_sets):
        # Noise of norm 0.5 to 4: cosine with the relevant document from about 0.9 to 0.25,
        # while unrelated documents stay near 0 (within a few times 1 / sqrt(dim)).
        scale = rng.uniform(0.5, 4.0) / np.sqrt(dim)
        noise = rng.standard_normal(dim, dtype=np.float32) * np.float32(scale)
        question_vectors[j] = document_vectors[relevant].mean(axis=0) + noise
    question_vectors = _unit(question_vectors)
    dataset = Dataset(
        name=f"synthetic-{n_documents}x{n_questions}",
        documents=tuple(documents),
        questions=tuple(questions),
        fingerprint=f"synthetic:{n_documents}:{n_questions}:{dim}:{seed}",
    )
    return Synthetic(dataset, question_vectors, document_vectors)


# Rows of document vectors drawn and normalised at once (the same random stream as one draw).
_VECTOR_ROWS = 65_536


def corpus_vectors(rng: np.random.Generator, n_documents: int, dim: int, folder: Path | None) -> np.ndarray:
    """Random float32 unit vectors, one per document: in memory, or written to
    `folder/documents.npy` and memory-mapped back (np.load(mmap_mode="r")).

    The seam for the vector store (issue 26): until it lands, a plain .npy stands for it; a
    store's reader returns the same kind of read-only float32 array, read by blocks.
    """
    if folder is None:
        return _unit(rng.standard_normal((n_documents, dim), dtype=np.float32))
    path = folder / "documents.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n_documents, dim))
    for start in range(0, n_documents, _VECTOR_ROWS):
        rows = min(_VECTOR_ROWS, n_documents - start)
        out[start : start + rows] = _unit(rng.standard_normal((rows, dim), dtype=np.float32))
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


# --- measurement --------------------------------------------------------------------------


def _read_hwm() -> int | None:
    """The process's resident high-water mark in bytes (Linux), else None."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so that each stage gets its own peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _max_rss() -> int:
    """The process's maximum RSS so far, in bytes (ru_maxrss is KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def _children_cpu() -> float:
    """CPU seconds of this process's finished child processes (BM25's analysis workers, joined
    within their stage)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def _cpu_seconds() -> float:
    """CPU seconds of this process (all threads) and of its finished child processes."""
    return time.process_time() + _children_cpu()


@dataclass
class Stage:
    name: str
    seconds: float
    cpu: float  # CPU seconds of the process and its workers: what load on a shared machine does not add
    peak_rss: int
    peak_traced: int | None
    counted: bool  # part of the target (evaluation), not of the set-up


class Recorder:
    """Times stages and records their memory peaks."""

    def __init__(self, trace: bool) -> None:
        self.trace = trace
        self.stages: list[Stage] = []
        self.per_stage_rss = _reset_hwm() and _read_hwm() is not None

    @contextmanager
    def stage(self, name: str, counted: bool = True) -> Iterator[None]:
        gc.collect()
        if self.per_stage_rss:
            _reset_hwm()
        if self.trace:
            tracemalloc.reset_peak()
        start, cpu, workers = time.perf_counter(), _cpu_seconds(), _children_cpu()
        yield
        seconds, cpu, workers = time.perf_counter() - start, _cpu_seconds() - cpu, _children_cpu() - workers
        traced = tracemalloc.get_traced_memory()[1] if self.trace else None
        rss = _read_hwm() if self.per_stage_rss else None
        self.stages.append(Stage(name, seconds, cpu, rss or _max_rss(), traced, counted))
        # A worker's peak RSS counts the pages it shares with this process since the fork.
        worker_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
        of_workers = (
            f", {workers:.2f} s of it in worker processes; largest worker peak RSS {worker_peak / MIB:,.0f} MiB"
            if workers
            else ""
        )
        print(f"  {name}: {seconds:.2f} s ({cpu:.2f} s CPU{of_workers})", file=sys.stderr, flush=True)


def _ids(rankings: list[Ranking], doc_ids: list[str]) -> dict[int, list[str]]:
    return {i: [doc_ids[j] for j in r.indices] for i, r in enumerate(rankings)}


def run(args: argparse.Namespace) -> tuple[Recorder, dict[str, dict[str, float]]]:
    """Generate, then run bm25, vector, hybrid and the metrics as separate stages."""
    recorder = Recorder(args.tracemalloc)
    if args.tracemalloc:
        tracemalloc.start()
    with recorder.stage("generate corpus, questions, embeddings (set-up)", counted=False):
        data = generate(args.documents, args.questions, args.dim, args.seed, vectors_dir=args.vectors_dir)
    dataset = data.dataset
    context = Context(
        dataset=dataset,
        depth=args.depth,
        question_vectors=data.question_vectors,
        document_vectors=data.document_vectors,
    )
    methods: list[Any] = [BM25Method(engine=args.engine), VectorMethod(), HybridMethod()]
    labels = {
        "bm25": f"bm25 ({args.engine}: analyze, index, query)",
        "vector": "vector (cosine, batched matrix products)",
        "hybrid": "hybrid (RRF of bm25 and vector)",
    }
    for method in methods:
        with recorder.stage(labels[method.name]):
            context.rankings[method.name] = method.rank(context)

    if args.breakdown:
        # Where bm25's time goes: the same steps as BM25Method.rank, timed one by one.
        bm25 = methods[0]
        with recorder.stage("  bm25 breakdown: analyze corpus (not counted)", counted=False):
            forget_analyses()
            corpus = analyze_corpus(d.content for d in dataset.documents)
        with recorder.stage("  bm25 breakdown: build index (not counted)", counted=False):
            index = bm25.build_index(corpus)
        del corpus
        with recorder.stage("  bm25 breakdown: score, top_k (not counted)", counted=False):
            queries = [analyze(q.text) for q in dataset.questions]
            for start in range(0, len(queries), QUESTION_BATCH):
                index.rankings(queries[start : start + QUESTION_BATCH], args.depth)
        del index

    overall: dict[str, dict[str, float]] = {}
    with recorder.stage("metrics (ids, score_method x 3 methods)"):
        doc_ids = dataset.doc_ids
        qids = [q.id for q in dataset.questions]
        relevant = {q.id: q.relevant for q in dataset.questions}
        types = {q.id: q.type for q in dataset.questions}
        for name, rankings in context.rankings.items():
            ranked = {qids[i]: ids for i, ids in _ids(rankings, doc_ids).items()}
            scores = score_method(ranked, relevant, types, metric_names(5, extra=True))
            overall[name] = scores.overall
    if args.save_top is not None:
        doc_ids = dataset.doc_ids
        top = {
            name: {q.id: [doc_ids[i] for i in r.indices[:10]] for q, r in zip(dataset.questions, rankings, strict=True)}
            for name, rankings in context.rankings.items()
        }
        args.save_top.write_text(json.dumps({"figures": overall, "top10": top}, sort_keys=True))
    return recorder, overall


def machine() -> str:
    """One line: CPU count and model, RAM, Python and numpy versions."""
    model = platform.processor() or "unknown CPU"
    ram = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        ram = f", {pages / 1024**3:.1f} GiB RAM"
    except (OSError, ValueError):
        pass
    return f"{os.cpu_count()} CPUs ({model}){ram}, Python {platform.python_version()}, numpy {np.__version__}"


def table(recorder: Recorder) -> str:
    """The Markdown table of the stages, with the total of the counted ones."""
    traced = recorder.trace
    head = "| stage | seconds | CPU seconds | peak RSS (MiB) |" + (" peak traced (MiB) |" if traced else "")
    rule = "| --- | ---: | ---: | ---: |" + (" ---: |" if traced else "")
    lines = [head, rule]
    for s in recorder.stages:
        row = f"| {s.name} | {s.seconds:.2f} | {s.cpu:.2f} | {s.peak_rss / MIB:,.0f} |"
        if traced:
            row += f" {(s.peak_traced or 0) / MIB:,.0f} |"
        lines.append(row)
    counted = [s for s in recorder.stages if s.counted]
    total = sum(s.seconds for s in counted)
    cpu = sum(s.cpu for s in counted)
    peak = max(s.peak_rss for s in recorder.stages)
    row = f"| **total: bm25 + vector + hybrid + metrics** | **{total:.2f}** | **{cpu:.2f}** | **{peak / MIB:,.0f}** |"
    if traced:
        row += f" {max((s.peak_traced or 0) for s in counted) / MIB:,.0f} |"
    lines.append(row)
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=384, help="embedding dimensions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--depth", type=int, default=1000, help="ranking depth (as the tool's)")
    parser.add_argument("--engine", choices=["sparse", "rank-bm25"], default="sparse")
    parser.add_argument("--breakdown", action="store_true", help="also time bm25's steps one by one (not counted)")
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations")
    parser.add_argument("--timeout", type=int, default=600, help="abort after this many seconds")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    parser.add_argument(
        "--in-memory-vectors", action="store_true", help="keep document vectors in memory (default: memory-mapped .npy)"
    )
    parser.add_argument("--workdir", type=Path, help="where the memory-mapped vectors go (default: a temporary folder)")
    parser.add_argument(
        "--save-top", type=Path, help="write each method's top 10 ids and figures (JSON) to compare versions"
    )
    parser.add_argument(
        "--project", type=Path, help="write a project (dataset + retrieval.toml) to this new folder and stop"
    )
    parser.add_argument(
        "--fixture-embeddings",
        metavar="URL",
        help="with --project: also vector and hybrid, embedded by the FIXTURE server at URL "
        "(benchmarks/fixture_embeddings_server.py, e.g. http://127.0.0.1:18931/v1)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.documents <= MAX_DOCUMENTS:
        parser.error(f"--documents must be between 1 and {MAX_DOCUMENTS:,}")
    if not 1 <= args.questions <= MAX_QUESTIONS:
        parser.error(f"--questions must be between 1 and {MAX_QUESTIONS:,}")
    if not 1 <= args.dim <= 4096 or args.depth < 1 or args.timeout < 1:
        parser.error("--dim must be 1..4096, --depth and --timeout positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def abort(signum: int, frame: object) -> None:
        raise TimeoutError(f"scale run stopped after --timeout {args.timeout} s")

    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, abort)
        signal.alarm(args.timeout)
    if args.project is not None:
        return write_project(args)
    print(f"{args.questions:,} questions x {args.documents:,} documents...", file=sys.stderr)
    try:
        with tempfile.TemporaryDirectory(prefix="scale-vectors-", dir=args.workdir) as folder:
            args.vectors_dir = None if args.in_memory_vectors else Path(folder)
            recorder, overall = run(args)
    except TimeoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if hasattr(signal, "SIGALRM"):
            signal.alarm(0)

    print(f"Machine: {machine()}")
    print(
        f"Run: {args.questions:,} questions x {args.documents:,} documents, dim {args.dim}, "
        f"depth {args.depth}, seed {args.seed}, bm25 engine {args.engine}"
        + (", tracemalloc on (times inflated)" if args.tracemalloc else "")
    )
    print()
    print(table(recorder))
    print()
    for name, values in overall.items():
        print(f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in values.items()))
    total = sum(s.seconds for s in recorder.stages if s.counted)
    peak = max(s.peak_rss for s in recorder.stages)
    seconds, limit = target(args.documents)
    ok_time, ok_mem = total <= seconds, peak <= limit
    print(
        f"\nTargets ({args.documents:,} documents): {total:.1f} s {'<=' if ok_time else '>'} {seconds:.0f} s; "
        f"peak RSS {peak / 1024**3:.2f} GiB {'<=' if ok_mem else '>'} {limit / 1024**3:.0f} GiB "
        f"(whole process, set-up included)"
    )
    print(f"Calibration: sum(range(3*10**7)) took {calibration():.2f} s (machine load; about 0.35 s idle)")
    return 1 if args.check and not (ok_time and ok_mem) else 0


def write_project(args: argparse.Namespace) -> int:
    """A project of the synthetic corpus, to measure the gate at scale: data/corpus.jsonl,
    data/questions.jsonl and retrieval.toml (bm25; with --fixture-embeddings also vector and
    hybrid, whose vectors the FIXTURE server gives when recording). Written to a temporary
    folder beside it, then renamed."""
    folder: Path = args.project
    if folder.exists():
        print(f"error: {folder} exists: give a new folder for --project", file=sys.stderr)
        return 2
    dataset = generate(args.documents, args.questions, 1, args.seed).dataset
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    (partial / "data").mkdir()
    with (partial / "data" / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for d in dataset.documents:
            out.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}, ensure_ascii=False) + "\n")
    with (partial / "data" / "questions.jsonl").open("w", encoding="utf-8") as out:
        for q in dataset.questions:
            row = {"id": q.id, "text": q.text, "type": q.type, "relevant": list(q.relevant)}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    if args.fixture_embeddings is None:
        (partial / "retrieval.toml").write_text('dataset = "data"\nprofile = "local"\nmethods = ["bm25"]\n')
    else:
        # Vector and hybrid too, embedded by the FIXTURE server (benchmarks/fixture_embeddings_server.py).
        (partial / "retrieval.toml").write_text(
            'dataset = "data"\nprofile = "fixture"\nmethods = ["bm25", "vector", "hybrid"]\n\n'
            '[profiles.fixture]\nembedding_provider = "openai"\nembedding_model = "fixture-random"\n'
            f'embedding_base_url = "{args.fixture_embeddings}"\ndimensions = {args.dim}\n'
        )
    # The project's own pytest root, as an adopting repository has.
    (partial / "pytest.ini").write_text("[pytest]\n")
    partial.rename(folder)
    print(f"Wrote {folder}: {args.documents:,} documents, {args.questions:,} questions. Then:")
    record = " --record" if args.fixture_embeddings else ""
    print(f"  cd {folder} && pytest{record} --update-baseline && /usr/bin/time -v pytest")
    return 0


def target(documents: int) -> tuple[float, int]:
    """The target for the nearest size at or above `documents` (the largest beyond them)."""
    sizes = sorted(TARGETS)
    return TARGETS[next((size for size in sizes if documents <= size), sizes[-1])]


def calibration() -> float:
    """The docs' calibration figure: how long this machine takes for a fixed piece of Python."""
    start = time.time()
    sum(range(3 * 10**7))
    return time.time() - start


if __name__ == "__main__":
    raise SystemExit(main())
