"""Re-recording drift, on the demo fixture's local cassettes (a real recording, demo_fixture.py)
and FIXTURE copies made here with some vectors changed (never committed as recordings), on a
Gemini recording made against the fake Gemini server (a FIXTURE), and on runs replayed from both."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from demo_fixture import DEMO_CASSETTES, demo_dataset, demo_settings
from fake_servers import FakeGeminiServer, clean_gemini_env, gemini_profile

from retrieval.config import Settings
from retrieval.evaluation.evaluate import evaluate
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.drift import (
    CassetteDrift,
    RankingDrift,
    cassette_vectors,
    compare_cassettes,
    compare_runs,
    compare_stores,
    drift_to_dict,
    render_drift,
)
from retrieval.recording.vector_store import Space, VectorStore
from retrieval.run.results import MethodResult, QuestionResult, Run

LOCAL = DEMO_CASSETTES / "local"
# The fixture's corpus vectors (the recording's, converted to the vector store) and their manifest.
VECTORS = DEMO_CASSETTES.parent / "vectors" / "local"
MANIFEST = LOCAL / "corpus-vectors.json"


def _rewrite_vectors(path: Path, change: dict[str, np.ndarray]) -> None:
    """FIXTURE: rewrite the OpenAI-compatible answers of a cassette copy, text -> new float32 vector."""
    cassette = json.loads(path.read_text(encoding="utf-8"))
    for interaction in cassette["interactions"]:
        texts = json.loads(interaction["request"]["body"])["input"]
        body = json.loads(interaction["response"]["body"]["string"])
        for row in body["data"]:
            text = texts[row["index"]]
            if text in change:
                row["embedding"] = base64.b64encode(np.asarray(change[text], dtype="<f4").tobytes()).decode()
        body["data"].reverse()  # rows out of order, as some servers answer: pairing goes by "index"
        interaction["response"]["body"]["string"] = json.dumps(body)
    path.write_text(json.dumps(cassette), encoding="utf-8")


def _raw(path: Path) -> dict[str, np.ndarray]:
    """The float32 vectors of a committed base64 cassette, decoded independently of drift.py."""
    out: dict[str, np.ndarray] = {}
    for interaction in json.loads(path.read_text(encoding="utf-8"))["interactions"]:
        texts = json.loads(interaction["request"]["body"])["input"]
        for row in json.loads(interaction["response"]["body"]["string"])["data"]:
            out[texts[row["index"]]] = np.frombuffer(base64.b64decode(row["embedding"]), dtype="<f4")
    return out


def _stored() -> dict[str, np.ndarray]:
    """The fixture's corpus vectors by document content, read with numpy alone (not through the store)."""
    [segment] = json.loads(MANIFEST.read_text())["segments"]
    keys = np.load(VECTORS / f"{segment['name']}.keys.npy")
    vectors = np.load(VECTORS / f"{segment['name']}.vectors.npy")
    row = {key.tobytes(): i for i, key in enumerate(keys)}
    return {d.content: vectors[row[hashlib.sha256(d.content.encode()).digest()]] for d in demo_dataset().documents}


def test_identical_stores_show_no_drift() -> None:
    drift = compare_stores(MANIFEST, MANIFEST, VECTORS)
    assert drift == CassetteDrift("corpus-vectors", vectors=64, changed=0, largest=0.0)


def test_a_recording_that_changed_three_corpus_vectors(tmp_path: Path) -> None:
    original = _stored()
    texts = sorted(original)[:3]
    perturbed = {t: original[t].copy() for t in texts}
    perturbed[texts[0]][0] += np.float32(0.001)
    perturbed[texts[1]][5] -= np.float32(0.0004)
    perturbed[texts[2]][:] = perturbed[texts[2]][::-1]  # same values, another order
    folder = tmp_path / "vectors"
    shutil.copytree(VECTORS, folder)
    store = VectorStore.open(MANIFEST, folder)
    space = store.segments[0].space
    store.manifest = tmp_path / "corpus-vectors.json"
    store.add(store.write_segment(space, texts, np.stack([perturbed[t] for t in texts]), "float32"))
    store.add(store.write_segment(space, ["un texte nouveau"], np.ones((1, 384)), "float32"))
    store.save_manifest()

    drift = compare_stores(MANIFEST, store.manifest, folder)
    largest = max(float(np.max(np.abs(perturbed[t].astype(np.float64) - original[t]))) for t in texts)
    assert drift == CassetteDrift("corpus-vectors", vectors=64, changed=3, largest=largest, only_new=1)
    assert largest == float(np.max(np.abs(original[texts[2]][::-1].astype(np.float64) - original[texts[2]])))
    assert render_drift([drift], None) == [
        "Drift of this recording against the committed one:",
        f"  corpus-vectors: 3 of 64 vectors changed, largest difference {largest:.2g}, 1 new text",
    ]
    assert Space.from_dict(json.loads(MANIFEST.read_text())["segments"][0]["space"]) == space


def test_float_lists_pair_with_base64_and_texts_pair_whatever_the_batches(tmp_path: Path) -> None:
    # FIXTURE: the committed question cassette re-encoded as float lists, one text per interaction,
    # in reverse order, plus one text the committed cassette never asked.
    committed = json.loads((LOCAL / "question-embeddings.json").read_text(encoding="utf-8"))
    [interaction] = committed["interactions"]
    texts = json.loads(interaction["request"]["body"])["input"]
    vectors = _raw(LOCAL / "question-embeddings.json")
    split = []
    for text in [*reversed(texts), "une question nouvelle"]:
        request = {**interaction["request"], "body": json.dumps({"input": [text], "encoding_format": "float"})}
        vector = vectors.get(text, np.zeros(384, dtype=np.float32)).tolist()
        answer = {"data": [{"index": 0, "embedding": vector}]}
        split.append(
            {"request": request, "response": {**interaction["response"], "body": {"string": json.dumps(answer)}}}
        )
    copy = tmp_path / "question-embeddings.json"
    copy.write_text(json.dumps({"interactions": split, "version": 1}), encoding="utf-8")
    drift = compare_cassettes(LOCAL / "question-embeddings.json", copy)
    assert drift == CassetteDrift("question-embeddings", vectors=25, changed=0, largest=0.0, only_new=1)
    assert (
        render_drift([drift], None)[1]
        == "  question-embeddings: 0 of 25 vectors changed, largest difference 0, 1 new text"
    )


def test_gemini_cassettes_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real Gemini SDK recording against the fake server (FIXTURE vectors), of 3 questions.
    clean_gemini_env(monkeypatch)
    demo = demo_dataset()
    dataset = replace(demo, questions=demo.questions[:3])
    with FakeGeminiServer() as server:
        settings = Settings(
            profile=gemini_profile(server.url),
            methods=("vector",),
            cassettes=str(tmp_path / "cassettes"),
            cache=str(tmp_path / "cache"),
        )
        evaluate(dataset, settings, mode="record")
    recorded = tmp_path / "cassettes" / "fixture-gemini" / "question-embeddings.json"
    vectors = cassette_vectors(recorded)
    assert sorted(vectors) == sorted(q.text for q in dataset.questions)
    assert {len(v) for v in vectors.values()} == {8}

    copy = tmp_path / "copy.json"
    cassette = json.loads(recorded.read_text(encoding="utf-8"))
    body = json.loads(cassette["interactions"][0]["response"]["body"]["string"])
    body["embeddings"][1]["values"][2] += 0.25
    body["embeddings"][2]["values"] = body["embeddings"][2]["values"][:4]
    cassette["interactions"][0]["response"]["body"]["string"] = json.dumps(body)
    copy.write_text(json.dumps(cassette), encoding="utf-8")
    drift = compare_cassettes(recorded, copy)
    assert drift == CassetteDrift("copy", vectors=3, changed=2, largest=0.25, reshaped=1)


def test_unreadable_cassettes_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(CassetteError) as caught:
        cassette_vectors(bad)
    assert str(caught.value).startswith(f"{bad}: not a readable cassette (")
    rerank = tmp_path / "rerank.json"
    rerank.write_text(
        json.dumps(
            {"interactions": [{"request": {"body": '{"messages": []}'}, "response": {"body": {"string": "{}"}}}]}
        ),
        encoding="utf-8",
    )
    with pytest.raises(CassetteError) as caught:
        cassette_vectors(rerank)
    assert str(caught.value) == (
        f"{rerank}: interaction 1 is not an embedding call this tool reads ('no input, requests or content'). "
        "Re-record it."
    )


def test_a_changed_question_vector_moves_one_question_and_the_figures(tmp_path: Path) -> None:
    # FIXTURE recording: a copy of the committed cassettes where q11's question vector is the
    # vector of its relevant document, so vector ranks that document first for q11 only.
    demo = demo_dataset()
    q11 = next(q for q in demo.questions if q.id == "q11")
    [relevant] = q11.relevant
    content = next(d.content for d in demo.documents if d.id == relevant)
    copy = tmp_path / "cassettes" / "local"
    shutil.copytree(LOCAL, copy)
    shutil.copytree(VECTORS, tmp_path / "vectors" / "local")
    _rewrite_vectors(copy / "question-embeddings.json", {q11.text: _stored()[content]})

    settings = demo_settings(cache=str(tmp_path / "cache"))
    methods = ["bm25", "vector", "hybrid"]
    old = evaluate(demo, replace(settings, cassettes=str(LOCAL.parent)), mode="replay", methods=methods)
    new = evaluate(demo, replace(settings, cassettes=str(copy.parent)), mode="replay", methods=methods)
    cassettes = [
        compare_stores(MANIFEST, copy / "corpus-vectors.json", tmp_path / "vectors" / "local"),
        compare_cassettes(LOCAL / "question-embeddings.json", copy / "question-embeddings.json"),
    ]
    assert [(c.changed, c.vectors) for c in cassettes] == [(0, 64), (1, 25)]

    drift = compare_runs(old, new)
    old_rank = old.results[10].methods["vector"].relevant_ranks[relevant]
    assert old_rank == 7
    assert new.results[10].methods["vector"].ids[0] == relevant
    assert drift.top_changed["bm25"] == [] and drift.top_changed["vector"] == ["q11"]
    old_mrr, new_mrr = drift.figures["vector"]["mrr"]
    assert new_mrr - old_mrr == pytest.approx((1 - 1 / 7) / 25, abs=1e-12)
    assert all(o == n for o, n in drift.figures["bm25"].values())
    lines = render_drift(cassettes, drift)
    assert lines[3] == "  bm25: top 10 changed for 0 of 25 questions; every figure unchanged"
    assert lines[4].startswith("  vector: top 10 changed for 1 of 25 questions; ")
    assert f"mrr {old_mrr:.4f} -> {new_mrr:.4f} (+0.0343)" in lines[4]
    recorded = drift_to_dict(cassettes, drift)
    assert recorded["cassettes"]["question-embeddings"]["changed"] == 1
    assert recorded["methods"]["vector"]["top_changed"] == ["q11"]
    assert recorded["methods"]["vector"]["figures"]["mrr"] == {"old": old_mrr, "new": new_mrr}
    assert recorded["methods"]["bm25"] == {"top_changed": [], "figures": {}}
    assert json.loads(json.dumps(recorded)) == recorded


def _run(question_ids: list[str], ranked: dict[str, list[list[str]]]) -> Run:
    from retrieval.data.dataset import Question

    results = [
        QuestionResult(
            Question(qid, "texte", "t", ("a",)),
            {m: MethodResult(lists[i], [1.0] * len(lists[i]), {}) for m, lists in ranked.items()},
        )
        for i, qid in enumerate(question_ids)
    ]
    return Run("d", "sha256:x", {}, list(ranked), results)


def test_runs_over_other_questions_are_refused() -> None:
    with pytest.raises(ValueError) as caught:
        compare_runs(_run(["q1"], {"m": [["a"]]}), _run(["q1", "q2"], {"m": [["a"], ["a"]]}))
    assert str(caught.value) == (
        "drift: the two runs are not over the same questions (1 and 2); compare a re-recording of the same dataset"
    )


def test_methods_only_in_one_run_are_named() -> None:
    old = _run(["q1"], {"m": [["a", "b"]], "gone": [["a"]]})
    new = _run(["q1"], {"m": [["b", "a"]], "fresh": [["a"]]})
    drift = compare_runs(old, new)
    assert (drift.only_old, drift.only_new, drift.top_changed) == (["gone"], ["fresh"], {"m": ["q1"]})
    assert render_drift([], drift) == [
        "Drift of this recording against the committed one:",
        "  m: top 10 changed for 1 of 1 questions; mrr 1.0000 -> 0.5000 (-0.5000), mrr t 1.0000 -> 0.5000 (-0.5000)",
        "  fresh: new in this recording",
        "  gone: no longer recorded",
    ]


def test_counts_in_a_drift_line_agree_with_their_noun() -> None:
    lines = render_drift(
        [
            CassetteDrift("corpus-embeddings", vectors=9, changed=2, largest=0.5, reshaped=1, only_old=2, only_new=1),
            RankingDrift("engine", questions=5, changed=1, only_old=1, only_new=3),
        ],
        None,
    )
    assert lines[1:] == [
        "  corpus-embeddings: 2 of 9 vectors changed, largest difference 0.5, 1 of another length, "
        "2 texts no longer asked, 1 new text",
        "  engine: recorded rankings changed for 1 of 5 questions, 1 question no longer asked, 3 new questions",
    ]
