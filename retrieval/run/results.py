"""A Run: what an evaluation produced, as plain data, savable as JSONL and re-analysable offline."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retrieval.data.dataset import Question
from retrieval.files.atomic import atomic_write_text
from retrieval.run.cost import Usage
from retrieval.run.declaration import Declaration

__all__ = ["MethodResult", "QuestionResult", "Run", "RunLogError", "load_run", "run_log", "save_run"]

RUN_FORMAT = "retrieval-run-1"


@dataclass(frozen=True)
class MethodResult:
    """One method's answer to one question.

    `ids`/`scores` are the top of the ranking (at least the reranker's candidate pool);
    `relevant_ranks` gives each relevant document's 1-based rank in the full ranking,
    None beyond the run's depth; `status` is "ok" or "degraded: <reason>".
    """

    ids: list[str]
    scores: list[float]
    relevant_ranks: dict[str, int | None]
    status: str = "ok"
    # How many documents the full ranking held: a relevant document missing from a ranking
    # shorter than the run's depth was not retrieved at all (BM25 without a shared term).
    retrieved: int | None = None
    # How the figures depend on the order of tied documents (retrieval.measures.ties.TieInfo as a dict).
    ties: dict[str, Any] | None = None


@dataclass(frozen=True)
class QuestionResult:
    """Every method's answer to one question."""

    question: Question
    methods: dict[str, MethodResult]


@dataclass
class Run:
    """Per-question rankings of every method, with the configuration and usage that produced them."""

    dataset: str
    fingerprint: str
    config: dict[str, Any]
    methods: list[str]
    results: list[QuestionResult]
    usage: dict[str, Usage] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    mode: str = "replay"
    # method -> the stages it runs (hybrid: bm25, vector, hybrid), for the cost of a pipeline.
    pipelines: dict[str, list[str]] = field(default_factory=dict)
    # stage -> usage measured when the replayed cassettes were recorded (latency of a live run).
    recorded_usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    # method -> its declarations (retrieval.run.declaration.Declaration.as_dict), read by the
    # failure analysis and the report instead of method names.
    declarations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # stage -> the model whose price applies to its usage.
    cost_models: dict[str, str | None] = field(default_factory=dict)
    # method -> how many ids of each ranking the run kept (deeper for what the sweeps re-fuse).
    kept: dict[str, int] = field(default_factory=dict)
    # Record mode: the drift of this recording against the committed one (retrieval.recording.drift), printed
    # by the CLI and the pytest plugin; kept in recording.json, not in the run log.
    drift: list[str] = field(default_factory=list)
    # The cassette files (in the profile's folder) the run replayed or recorded.
    cassettes: tuple[str, ...] = ()
    # Digests of what the figures were computed from beside the cassettes, where a cache may hold
    # it (retrieval.methods.base.Context.inputs): the baseline records them with the cassettes'.
    inputs: dict[str, str] = field(default_factory=dict)
    # The documents and questions longer than the embedding model reads, named with the limit and
    # what became of them (retrieval.providers.long_inputs.long_inputs): the report's cost section says them.
    long_inputs: dict[str, Any] = field(default_factory=dict)
    # The corpus alone's fingerprint (retrieval.data.dataset.corpus_fingerprint): whether a baseline made
    # on other questions was made on the same documents ("" in a log written before it existed).
    corpus: str = ""
    # The model server that embedded (live, record) or recorded what was replayed, as
    # recording.json keeps it (retrieval.text.server_provenance); None when none is known.
    server: dict[str, Any] | None = None
    # Where the methods ran: {"name": "local"}, or {"name": "ray", "nodes": n, "cpus": c} for the
    # cluster (retrieval.executors); None in a log written before it was kept.
    executor: dict[str, Any] | None = None

    def declared(self, method: str) -> Declaration:
        """What a method declared (defaults for a log that did not record it)."""
        return Declaration.from_dict(method, self.declarations.get(method, {}))

    def ranked_ids(self, method: str) -> dict[str, list[str]]:
        """Question id -> ranked doc ids of one method."""
        return {r.question.id: r.methods[method].ids for r in self.results}

    def degraded(self, method: str) -> dict[str, str]:
        """Question id -> reason, for the questions where `method` fell back."""
        return {
            r.question.id: r.methods[method].status.removeprefix("degraded: ")
            for r in self.results
            if r.methods[method].status != "ok"
        }


def save_run(run: Run, path: str | Path) -> None:
    """Write the run log (see `run_log`) to a file, atomically: a crash leaves no half log."""
    atomic_write_text(path, run_log(run))


def _judged(run: Run, k: int) -> tuple[list[dict[str, float]], list[dict[str, list[str]]], dict[str, Any]]:
    """Judged@k of each method on each question (the share of its top k with a judgment, of min(k,
    its length)), the documents of each top k no judgment covers, and the means overall and per
    type: retrieval.measures.judged's figures, from what the log's lines hold (not read back)."""
    values: list[dict[str, float]] = []
    holes: list[dict[str, list[str]]] = []
    for result in run.results:
        judged = result.question.judgments
        tops = {name: m.ids[:k] for name, m in result.methods.items()}
        values.append({name: sum(d in judged for d in top) / len(top) if top else 1.0 for name, top in tops.items()})
        holes.append({name: [d for d in top if d not in judged] for name, top in tops.items()})
    means: dict[str, Any] = {}
    for method in run.methods:
        by_type: dict[str, list[float]] = {}
        for result, row in zip(run.results, values, strict=True):
            by_type.setdefault(result.question.type, []).append(row[method])
        every = [v for group in by_type.values() for v in group]
        means[method] = {
            "overall": sum(every) / len(every) if every else 1.0,
            "by_type": {t: sum(v) / len(v) for t, v in by_type.items()},
        }
    return values, holes, means


def run_log(run: Run) -> str:
    """The run log: a header line, then one line per question with every method's ranking."""
    k = int(run.config.get("k", 5))
    judged, unjudged, judged_means = _judged(run, k)
    header = {
        "format": RUN_FORMAT,
        "dataset": run.dataset,
        "fingerprint": run.fingerprint,
        "config": run.config,
        "methods": run.methods,
        # How many question lines follow: a log cut short is refused, not reported on.
        "questions": len(run.results),
        "mode": run.mode,
        "skipped": run.skipped,
        "pipelines": run.pipelines,
        "recorded_usage": run.recorded_usage,
        "declarations": run.declarations,
        "cost_models": run.cost_models,
        "kept": run.kept,
        "corpus": run.corpus,
        "server": run.server,
        "long_inputs": run.long_inputs,
        "executor": run.executor,
        # Seconds unrounded: a report made again from the log must add up to the same figures.
        "usage": {stage: {**u.as_dict(), "seconds": u.seconds} for stage, u in run.usage.items()},
        # Judged@k per method, overall and per question type (each line has its question's).
        f"judged@{k}": judged_means,
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    for result, values, holes in zip(run.results, judged, unjudged, strict=True):
        q = result.question
        lines.append(
            json.dumps(
                {
                    "question": q.id,
                    "text": q.text,
                    "type": q.type,
                    "relevant": list(q.relevant),
                    # Every judgment with its grade, when they say more than the relevant ids.
                    **({"grades": [[doc, grade] for doc, grade in q.grades]} if q.graded else {}),
                    "methods": {
                        name: {**asdict(m), "scores": [round(s, 6) for s in m.scores]}
                        for name, m in result.methods.items()
                    },
                    f"judged@{k}": values,
                    f"unjudged@{k}": holes,
                },
                ensure_ascii=False,
            )
        )
    return "\n".join(lines) + "\n"


class RunLogError(ValueError):
    """A file given as a run log is not one; the message names the file and the line."""


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _header_problem(header: Mapping[str, Any]) -> str | None:
    """What is wrong with the types of the header's methods and kept counts, or None."""
    if not _is_strings(header["methods"]):
        return f"methods is {header['methods']!r}, not a list of method names"
    kept = header.get("kept", {})
    if not isinstance(kept, dict) or not all(_is_count(n) for n in kept.values()):
        return f"kept is {kept!r}, not method -> a count of ids"
    return None


def _line_problem(row: Mapping[str, Any], methods: Mapping[str, MethodResult], listed: list[str]) -> str | None:
    """What is wrong with one question line (types the metrics and the report rely on), or None."""
    if not all(isinstance(row[key], str) for key in ("text", "type")):
        return "text and type must be strings"
    if not _is_strings(row["relevant"]) or not row["relevant"]:
        return f"relevant is {row['relevant']!r}, not a non-empty list of document ids"
    grades = row.get("grades", [])
    # A grade is a whole number, 0 or below for a document judged not relevant.
    if not isinstance(grades, list) or not all(
        isinstance(g, list) and len(g) == 2 and isinstance(g[0], str) and _is_count(g[1]) for g in grades
    ):
        return f"grades is {grades!r}, not a list of [document id, whole-number grade]"
    absent = [m for m in listed if m not in methods]
    if absent:
        return f"no ranking of {', '.join(absent)}, which the header lists"
    for name, m in methods.items():
        if not _is_strings(m.ids):
            return f"{name} ids is {m.ids!r}, not a list of document ids"
        if not isinstance(m.scores, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in m.scores
        ):
            return f"{name} scores is {m.scores!r}, not a list of numbers"
        ranks = m.relevant_ranks
        if not isinstance(ranks, dict) or not all(r is None or (_is_count(r) and r >= 1) for r in ranks.values()):
            return f"{name} relevant_ranks is {ranks!r}, not document id -> a rank from 1, or null"
        if not isinstance(m.status, str):
            return f"{name} status is {m.status!r}, not a string"
    return None


def load_run(path: str | Path) -> Run:
    """Read a run log written by `save_run`; RunLogError naming the file and the line when it is
    not one, is damaged, or holds fewer question lines than its header says (cut short)."""
    again = "Write it again with --log."
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunLogError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}): not a run log. {again}") from exc
    lines = text.splitlines()
    try:
        header = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError as exc:
        raise RunLogError(f"{path}:1: not a run log ({exc.msg}). Write one with --log.") from exc
    if not isinstance(header, dict) or header.get("format") != RUN_FORMAT:
        raise RunLogError(f"{path}:1: not a run log (expected format {RUN_FORMAT!r}). Write one with --log.")
    required = ("dataset", "fingerprint", "config", "methods", "usage", "questions")
    missing = [key for key in required if key not in header]
    if missing:
        raise RunLogError(f"{path}:1: the header lacks {', '.join(missing)} (damaged or older log). {again}")
    expected = header["questions"]
    if not isinstance(expected, int) or isinstance(expected, bool):
        raise RunLogError(f"{path}:1: questions is {expected!r}, not a count (damaged log). {again}")
    if text and not text.endswith("\n"):
        raise RunLogError(f"{path}:{len(lines)}: the last line is cut short (the log was truncated). {again}")
    problem = _header_problem(header)
    if problem:
        raise RunLogError(f"{path}:1: {problem} (damaged log). {again}")
    results = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            row = json.loads(line)
            grades = tuple((g[0], g[1]) for g in row.get("grades", []) if isinstance(g, list) and len(g) == 2)
            question = Question(row["question"], row["text"], row["type"], tuple(row["relevant"]), grades)
            methods = {name: MethodResult(**m) for name, m in row["methods"].items()}
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise RunLogError(f"{path}:{number}: unreadable run log line ({exc}). {again}") from exc
        if not isinstance(row["question"], str):
            raise RunLogError(f"{path}:{number}: question is {row['question']!r}, not an id (damaged log). {again}")
        problem = _line_problem(row, methods, header["methods"])
        if problem:
            raise RunLogError(f"{path}:{number}: question {question.id!r}: {problem} (damaged log). {again}")
        results.append(QuestionResult(question, methods))
    if len(results) != expected:
        raise RunLogError(
            f"{path}:{len(lines) + 1}: the log holds {len(results)} question lines, its header says {expected} "
            f"(the log was cut short or edited). {again}"
        )
    usage = {}
    try:
        for stage, u in header["usage"].items():
            usage[stage] = Usage()
            usage[stage].add(
                u["calls"],
                u["input_tokens"],
                u["output_tokens"],
                u["seconds"],
                u.get("truncated", 0),
                u.get("search_units", 0),
            )
    except (KeyError, TypeError, AttributeError) as exc:
        raise RunLogError(f"{path}:1: unreadable usage in the header ({exc}). {again}") from exc
    return Run(
        header["dataset"],
        header["fingerprint"],
        header["config"],
        header["methods"],
        results,
        usage,
        header.get("skipped", {}),
        header.get("mode", "replay"),
        header.get("pipelines", {}),
        header.get("recorded_usage", {}),
        header.get("declarations", {}),
        header.get("cost_models", {}),
        header.get("kept", {}),
        corpus=header.get("corpus", ""),
        server=header.get("server") if isinstance(header.get("server"), dict) else None,
        long_inputs={
            what: entry
            for what, entry in (header.get("long_inputs") or {}).items()
            if what in ("documents", "questions") and isinstance(entry, dict) and _is_strings(entry.get(what))
        }
        if isinstance(header.get("long_inputs"), dict)
        else {},
        executor=header.get("executor") if isinstance(header.get("executor"), dict) else None,
    )
