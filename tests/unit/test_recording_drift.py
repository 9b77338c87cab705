"""Re-recording drift, end to end: `python -m retrieval --record` twice against the fake
embeddings server (a FIXTURE), the second time with slightly drifted vectors; the drift printed
on stderr, kept in recording.json and shown by `pytest --record`. The server's vectors, the
drift rule and the figures below are FIXTURES of these tests, never a baseline.

A re-recording embeds only the documents the vector store lacks: the drifted server's document
vectors are never asked for again (the corpus line shows 0 changed), its question vectors are."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from demo_fixture import demo_dataset
from fake_embeddings import FakeEmbeddingsServer, make_profile
from test_pytest_plugin import UNREAD

from retrieval import Context, Ranking
from retrieval.cli import main
from retrieval.config import Settings
from retrieval.data.dataset import Dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.recording.drift import FIRST_RECORDING

DRIFT_MODULUS = 11  # texts whose length is a multiple of it drift
DRIFT = 0.5  # added to their first component
ALSO_DRIFTING = "query"  # and every question (documents are not re-embedded: the store holds them)


class DriftingEmbeddingsServer(FakeEmbeddingsServer):
    """FIXTURE: the fake embeddings server; once `drifted`, every text whose length is a multiple
    of 11, and every question, gets +0.5 on its first component (of 1 to 17), as another CPU's
    slightly different embeddings of the same texts."""

    drifted = False

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes]:
        status, raw = super().answer(body)
        if not self.drifted:
            return status, raw
        answer = json.loads(raw)
        for row in answer["data"]:
            if len(body["input"][row["index"]]) % DRIFT_MODULUS and body.get("input_type") != ALSO_DRIFTING:
                continue
            if isinstance(row["embedding"], str):
                vector = np.frombuffer(base64.b64decode(row["embedding"]), dtype="<f4").copy()
                vector[0] += DRIFT
                row["embedding"] = base64.b64encode(vector.tobytes()).decode()
            else:
                row["embedding"][0] += DRIFT
        return status, json.dumps(answer).encode()


@pytest.fixture
def drifting_server() -> Iterator[DriftingEmbeddingsServer]:
    """The drifting FIXTURE server on 127.0.0.1, stopped after the test."""
    server = DriftingEmbeddingsServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def small_demo() -> Dataset:
    """FIXTURE dataset: the demo corpus with every fifth question (5, of each type)."""
    demo = demo_dataset()
    return replace(demo, questions=demo.questions[::5])


def _project(folder: Path, dataset: Dataset, url: str) -> Path:
    """FIXTURE project: the small demo as a native dataset, a profile on the fake server."""
    data = folder / "data"
    data.mkdir(parents=True)
    (data / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"id": d.id, "title": d.title, "text": d.text, "metadata": d.metadata}, ensure_ascii=False)
            + "\n"
            for d in dataset.documents
        ),
        encoding="utf-8",
    )
    (data / "questions.jsonl").write_text(
        "".join(
            json.dumps({"id": q.id, "text": q.text, "type": q.type, "relevant": list(q.relevant)}, ensure_ascii=False)
            + "\n"
            for q in dataset.questions
        ),
        encoding="utf-8",
    )
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "drifting"\nversion = "0"\n\n'
        '[tool.retrieval]\ndataset = "data"\nprofile = "fake"\nmethods = ["bm25", "vector", "hybrid"]\n\n'
        "[tool.retrieval.profiles.fake]\nembedding_provider = 'openai'\nembedding_model = 'fixture-e5'\n"
        f"embedding_base_url = '{url}/v1'\ndimensions = 4\ninput_type = true\n",
        encoding="utf-8",
    )
    return folder


# What the second recording prints on stderr: no document vector asked again (the store holds
# them all), every question vector drifted; vector's top 10 held, hybrid's (which fuses deeper
# than 10) moved for 3 questions, no figure with them.
DRIFT_LINES = [
    "Drift of this recording against the committed one:",
    "  corpus-vectors: 0 of 64 vectors changed, largest difference 0",
    "  question-embeddings: 5 of 5 vectors changed, largest difference 0.5",
    "  bm25: top 10 changed for 0 of 5 questions; every figure unchanged",
    "  vector: top 10 changed for 0 of 5 questions; every figure unchanged",
    "  hybrid: top 10 changed for 3 of 5 questions; every figure unchanged",
]


def test_record_then_record_again_prints_and_keeps_the_drift(
    tmp_path: Path,
    small_demo: Dataset,
    drifting_server: DriftingEmbeddingsServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = _project(tmp_path / "project", small_demo, drifting_server.url)
    monkeypatch.chdir(project)
    meta = project / "cassettes" / "fake" / "recording.json"

    assert main(["--record"]) == 0
    first = capsys.readouterr().err.splitlines()
    assert first == ["Drift of this recording against the committed one:", f"  {FIRST_RECORDING}"]
    assert json.loads(meta.read_text())["drift"] == {
        "cassettes": {},
        "previous": FIRST_RECORDING,
        "summary": first,
    }

    # The same server again: an identical recording, an identical recording.json (no timestamp).
    committed = {p.name: p.read_bytes() for p in meta.parent.iterdir() if p.name != "recording.json"}
    assert main(["--record"]) == 0
    same = capsys.readouterr().err.splitlines()
    assert same == [
        "Drift of this recording against the committed one:",
        "  corpus-vectors: 0 of 64 vectors changed, largest difference 0",
        "  question-embeddings: 0 of 5 vectors changed, largest difference 0",
        "  bm25: top 10 changed for 0 of 5 questions; every figure unchanged",
        "  vector: top 10 changed for 0 of 5 questions; every figure unchanged",
        "  hybrid: top 10 changed for 0 of 5 questions; every figure unchanged",
    ]
    assert {p.name: p.read_bytes() for p in meta.parent.iterdir() if p.name != "recording.json"} == committed
    # The drift kept is identical too (the rest of recording.json holds the measured seconds).
    before = json.loads(meta.read_text())["drift"]
    assert before["summary"] == same
    assert main(["--record"]) == 0
    capsys.readouterr()
    assert json.loads(meta.read_text())["drift"] == before

    drifting_server.drifted = True
    assert main(["--record"]) == 0
    assert capsys.readouterr().err.splitlines() == DRIFT_LINES
    drift = json.loads(meta.read_text())["drift"]
    assert drift == {
        "cassettes": {
            "corpus-vectors": {
                "stage": "corpus-vectors",
                "vectors": 64,
                "changed": 0,
                "largest": 0.0,
                "reshaped": 0,
                "only_old": 0,
                "only_new": 0,
            },
            "question-embeddings": {
                "stage": "question-embeddings",
                "vectors": 5,
                "changed": 5,
                "largest": 0.5,
                "reshaped": 0,
                "only_old": 0,
                "only_new": 0,
            },
        },
        "methods": {
            "bm25": {"top_changed": [], "figures": {}},
            "vector": {"top_changed": [], "figures": {}},
            "hybrid": {"top_changed": ["q01", "q06", "q11"], "figures": {}},
        },
        "questions": 5,
        "summary": DRIFT_LINES,
    }


class NearestEngine:
    """FIXTURE: an engine reached without HTTP (calls = "rankings"), ranking the corpus by
    Euclidean distance between the embedded question and each document: its rankings follow the
    vectors, so drifted vectors change some of them."""

    name = "engine"
    requires: tuple[str, ...] = ()
    needs_vectors = True
    calls = "rankings"

    def rank(self, context: Context) -> list[Ranking]:
        assert context.question_vectors is not None and context.document_vectors is not None
        rankings = []
        for question in context.question_vectors:
            distances = np.linalg.norm(context.document_vectors - question, axis=1)
            order = np.argsort(distances, kind="stable")[:10]
            rankings.append(Ranking(order, -distances[order]))
        return rankings


def _settings(tmp_path: Path, url: str) -> Settings:
    return Settings(
        profile=make_profile(url),
        methods=("vector",),
        cassettes=str(tmp_path / "cassettes"),
        cache=str(tmp_path / "cache"),
    )


def test_ranking_cassettes_count_the_questions_whose_recorded_ranking_changed(
    tmp_path: Path, small_demo: Dataset, drifting_server: DriftingEmbeddingsServer
) -> None:
    settings = _settings(tmp_path, drifting_server.url)
    first = evaluate(small_demo, settings, mode="record", extra=[NearestEngine()])
    assert first.methods == ["vector", "engine"]
    drifting_server.drifted = True
    again = evaluate(small_demo, settings, mode="record", extra=[NearestEngine()])
    assert again.drift == [
        "Drift of this recording against the committed one:",
        "  corpus-vectors: 0 of 64 vectors changed, largest difference 0",
        "  engine.rankings: recorded rankings changed for 5 of 5 questions",
        "  question-embeddings: 5 of 5 vectors changed, largest difference 0.5",
        # The engine's scores (distances) moved with every question vector, not its top 10s.
        "  vector: top 10 changed for 0 of 5 questions; every figure unchanged",
        "  engine: top 10 changed for 0 of 5 questions; every figure unchanged",
    ]
    kept = json.loads((tmp_path / "cassettes" / "fixture" / "recording.json").read_text())["drift"]
    assert kept["rankings"] == {
        "engine.rankings": {"stage": "engine.rankings", "questions": 5, "changed": 5, "only_old": 0, "only_new": 0}
    }
    assert kept["summary"] == again.drift


def test_committed_cassettes_that_do_not_replay_the_new_data_are_not_compared(
    tmp_path: Path, small_demo: Dataset, drifting_server: DriftingEmbeddingsServer
) -> None:
    settings = _settings(tmp_path, drifting_server.url)
    evaluate(small_demo, settings, mode="record")
    # A question rewritten since the recording: the committed cassettes miss it on replay.
    edited = replace(
        small_demo,
        questions=(replace(small_demo.questions[0], text="Que veut dire HEL-4040 ?"), *small_demo.questions[1:]),
    )
    recorded = evaluate(edited, settings, mode="record")
    assert recorded.drift == [
        "Drift of this recording against the committed one:",
        "  corpus-vectors: 0 of 64 vectors changed, largest difference 0",
        "  question-embeddings: 0 of 4 vectors changed, largest difference 0, 1 text no longer asked, 1 new text",
        "  no comparable previous recording: the committed cassettes do not replay this run (replay miss)",
    ]
    # A method whose cassette was never committed: no comparable run either, and no error.
    added = evaluate(edited, settings, mode="record", extra=[NearestEngine()])
    assert added.drift[-1] == (
        "  no comparable previous recording: a cassette this run needs is not committed or not readable"
    )
    meta = json.loads((tmp_path / "cassettes" / "fixture" / "recording.json").read_text())
    assert meta["drift"]["previous"] == added.drift[-1].strip()
    assert "methods" not in meta["drift"]


def test_pytest_record_shows_the_drift_in_the_terminal_summary(
    pytester: pytest.Pytester, small_demo: Dataset, drifting_server: DriftingEmbeddingsServer
) -> None:
    _project(pytester.path, small_demo, drifting_server.url)
    # No plugin no assertion reads (benchmark runs git, hg and file at each session start): UNREAD.
    quiet = ("-p", "no:cacheprovider", *UNREAD, "-W", "ignore::pytest.PytestAssertRewriteWarning")
    first = pytester.runpytest_inprocess(*quiet, "--record", "--update-baseline")
    # The gate's items are named before the first baseline exists: the gate, its 5 integrity
    # items and a top-10 snapshot per method (retrieval/gate/verdicts.py); then one per figure too.
    first.assert_outcomes(passed=9)
    first.stdout.fnmatch_lines(
        ["*= recording drift =*", "Drift of this recording against the committed one:", f"  {FIRST_RECORDING}"]
    )
    drifting_server.drifted = True
    again = pytester.runpytest_inprocess(*quiet, "--record", "--update-baseline")
    again.assert_outcomes(passed=27)
    again.stdout.fnmatch_lines(["*= recording drift =*", *DRIFT_LINES, "*= baseline updated =*"])
    replayed = pytester.runpytest_inprocess(*quiet)
    replayed.assert_outcomes(passed=27)
    assert "recording drift" not in replayed.stdout.str()


def test_a_commit_without_drift_drops_the_previous_recordings_drift(
    tmp_path: Path, small_demo: Dataset, drifting_server: DriftingEmbeddingsServer
) -> None:
    from retrieval.recording.recorder import Recorder

    settings = _settings(tmp_path, drifting_server.url)
    recorded = evaluate(small_demo, settings, mode="record")
    directory = tmp_path / "cassettes" / "fixture"
    assert json.loads((directory / "recording.json").read_text())["drift"]["summary"] == recorded.drift
    recorder = Recorder("record", directory, "fixture")
    ranking = Ranking(np.arange(3), np.array([3.0, 2.0, 1.0]))
    recorder.record_rankings("engine", small_demo, "engine", [ranking] * len(small_demo.questions))
    assert recorder.commit({}) == [directory / "engine.rankings.json"]
    assert "drift" not in json.loads((directory / "recording.json").read_text())


def test_a_recording_too_large_for_github_ends_its_summary_with_a_note(
    tmp_path: Path, small_demo: Dataset, drifting_server: DriftingEmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval.recording import cassette_files as recording

    monkeypatch.setattr(recording, "LARGE_FILE", 1100)
    recorded = evaluate(small_demo, _settings(tmp_path, drifting_server.url), mode="record")
    folder = tmp_path / "cassettes" / "fixture"
    notes = [line for line in recorded.drift if line.startswith("note: ")]
    assert recorded.drift[-len(notes) :] == notes
    # The corpus vectors' manifest is small; its segment (64 keys, 64 x 4 floats) passes the limit.
    segments = sorted((tmp_path / "vectors" / "fixture").glob("seg-*"))
    assert [p.name.split(".", 1)[1] for p in segments] == ["keys.npy", "vectors.npy"]
    questions = folder / "question-embeddings.json"
    assert notes == [
        f"note: {recording.large_file_notice(questions.name, questions.stat().st_size)}",
        *(f"note: {recording.large_file_notice(p.name, p.stat().st_size, 'vectors/**/*.npy')}" for p in segments),
    ]
    assert "`git lfs track 'vectors/**/*.npy'`" in notes[-1]
