"""A Run: what an evaluation produced, as plain data, savable as JSONL and re-analysable offline."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retrieval.cost import Usage
from retrieval.dataset import Question

__all__ = ["MethodResult", "QuestionResult", "Run", "load_run", "save_run"]

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


@dataclass(frozen=True)
class QuestionResult:
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
    """Write the run log: a header line, then one line per question with every method's ranking."""
    header = {
        "format": RUN_FORMAT,
        "dataset": run.dataset,
        "fingerprint": run.fingerprint,
        "config": run.config,
        "methods": run.methods,
        "mode": run.mode,
        "skipped": run.skipped,
        "usage": {stage: u.as_dict() for stage, u in run.usage.items()},
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    for result in run.results:
        q = result.question
        lines.append(
            json.dumps(
                {
                    "question": q.id,
                    "text": q.text,
                    "type": q.type,
                    "relevant": list(q.relevant),
                    "methods": {
                        name: {**asdict(m), "scores": [round(s, 6) for s in m.scores]}
                        for name, m in result.methods.items()
                    },
                },
                ensure_ascii=False,
            )
        )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def load_run(path: str | Path) -> Run:
    """Read a run log written by `save_run`."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    if header.get("format") != RUN_FORMAT:
        raise ValueError(f"{path}:1: not a run log (format {header.get('format')!r}, expected {RUN_FORMAT!r})")
    results = []
    for line in lines[1:]:
        row = json.loads(line)
        question = Question(row["question"], row["text"], row["type"], tuple(row["relevant"]))
        methods = {name: MethodResult(**m) for name, m in row["methods"].items()}
        results.append(QuestionResult(question, methods))
    usage = {}
    for stage, u in header["usage"].items():
        usage[stage] = Usage()
        usage[stage].add(u["calls"], u["input_tokens"], u["output_tokens"], u["seconds"])
    return Run(
        header["dataset"],
        header["fingerprint"],
        header["config"],
        header["methods"],
        results,
        usage,
        header.get("skipped", {}),
        header.get("mode", "replay"),
    )
