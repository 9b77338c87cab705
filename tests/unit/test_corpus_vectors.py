"""The corpus's vectors through the store, end to end with the fake embeddings server (a FIXTURE):
one store read by live runs, recordings and replays; a re-recording that appends only what changed;
a commit that fails midway; float16; compaction; the conversion of an older corpus cassette."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from demo_fixture import DEMO_CASSETTES, demo_dataset, demo_settings
from fake_embeddings import FakeEmbeddingsServer, make_profile

from retrieval.config import Settings
from retrieval.data.dataset import Dataset
from retrieval.evaluation.corpus_vectors import compact_store, corpus_space, recorder_for
from retrieval.evaluation.evaluate import evaluate
from retrieval.files import atomic
from retrieval.providers.openai_embeddings import OpenAIEmbeddings
from retrieval.recording.cache import CacheMismatch
from retrieval.recording.cassette_files import STORE_MANIFEST, CassetteError, scan_cassettes
from retrieval.recording.vector_store import Space, VectorStore
from retrieval.run.results import Run

METHODS = ("bm25", "vector", "hybrid")


def _settings(tmp_path: Path, url: str, **changes: object) -> Settings:
    return Settings(
        profile=make_profile(url),
        methods=METHODS,
        cassettes=str(tmp_path / "cassettes"),
        cache=str(tmp_path / "cache"),
        **changes,  # type: ignore[arg-type]
    )


def _small() -> Dataset:
    demo = demo_dataset()
    return replace(demo, questions=demo.questions[::5])


def _sent(server: FakeEmbeddingsServer) -> list[str]:
    """Every text the server was asked to embed, documents ("passage") only."""
    bodies = [json.loads(r["raw"]) for r in server.posts]
    return [text for body in bodies if body.get("input_type") == "passage" for text in body["input"]]


def _figures(run: Run) -> list[tuple[str, str, list[str], list[float]]]:
    return [
        (r.question.id, m, r.methods[m].ids[:10], r.methods[m].scores[:10]) for r in run.results for m in run.methods
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, FakeEmbeddingsServer, Run]]:
    """The small demo recorded once for the module (its folder, the server it was recorded from,
    kept running, and the recording's run): a test that starts from a committed recording copies
    the folder (`_from_recording`) instead of recording again."""
    server = FakeEmbeddingsServer()
    folder = tmp_path_factory.mktemp("recorded")
    try:
        yield folder, server, evaluate(_small(), _settings(folder, server.url), mode="record")
    finally:
        server.stop()


def _from_recording(tmp_path: Path, recorded: tuple[Path, FakeEmbeddingsServer, Run]) -> Settings:
    """The module's recording copied to tmp_path: its settings there."""
    folder, server, _ = recorded
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    return _settings(tmp_path, server.url)


def _segment_files(tmp_path: Path) -> dict[str, tuple[bytes, int]]:
    folder = tmp_path / "vectors" / "fixture"
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_live_record_and_replay_read_the_same_stored_vectors(
    tmp_path: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    dataset, settings = _small(), _settings(tmp_path, embeddings_server.url)
    recorded = evaluate(dataset, settings, mode="record")
    assert sorted(_sent(embeddings_server)) == sorted(d.content for d in dataset.documents)
    assert not (tmp_path / "cassettes" / "fixture" / "corpus-embeddings.json").exists()
    replayed = evaluate(dataset, settings, mode="replay")
    embeddings_server.requests.clear()
    live = evaluate(dataset, replace(settings, cache=str(tmp_path / "empty-cache")), mode="live")
    assert _sent(embeddings_server) == []  # the store answered for the corpus, not the cache
    assert _figures(recorded) == _figures(replayed) == _figures(live)
    assert STORE_MANIFEST in replayed.cassettes


def test_re_recording_one_changed_document_appends_one_vector_and_modifies_no_file(
    tmp_path: Path, recorded: tuple[Path, FakeEmbeddingsServer, Run]
) -> None:
    dataset, settings, embeddings_server = _small(), _from_recording(tmp_path, recorded), recorded[1]
    before = _segment_files(tmp_path)
    manifest = tmp_path / "cassettes" / "fixture" / STORE_MANIFEST
    [first] = json.loads(manifest.read_text())["segments"]
    edited = replace(
        dataset,
        documents=(replace(dataset.documents[0], text=dataset.documents[0].text + " Révisé."), *dataset.documents[1:]),
    )
    embeddings_server.requests.clear()
    evaluate(edited, settings, mode="record")
    assert _sent(embeddings_server) == [edited.documents[0].content]
    after = _segment_files(tmp_path)
    assert {name: after[name] for name in before} == before  # no existing file rewritten
    segments = json.loads(manifest.read_text())["segments"]
    assert segments[0] == first and [s["count"] for s in segments] == [64, 1]
    assert len(after) == len(before) + 2
    # The edited corpus replays; the old document's vector stays until a compaction drops it.
    evaluate(edited, settings, mode="replay")
    recorder = recorder_for(settings, "replay")
    embedder = OpenAIEmbeddings(settings.profile, replay=True)
    space = corpus_space(embedder, settings.profile.embeddings)
    embedder.close()
    old_bytes, new_bytes = compact_store(recorder, space, [d.content for d in edited.documents])
    assert new_bytes < old_bytes
    assert [s["count"] for s in json.loads(manifest.read_text())["segments"]] == [64]
    assert len(list((tmp_path / "vectors" / "fixture").iterdir())) == 2
    evaluate(edited, settings, mode="replay")


def test_growth_after_changing_one_percent_of_the_documents(tmp_path: Path) -> None:
    """Issue 26's target: <= 2 % of the store's bytes (1,000 texts of 384 dimensions, 10 changed)."""
    store = VectorStore.open(tmp_path / "corpus-vectors.json", tmp_path / "vectors")
    space = Space("openai", "fixture-e5", 384, "document")
    rng = np.random.default_rng(0)
    texts = [f"document {i}" for i in range(1000)]
    store.add(store.write_segment(space, texts, rng.standard_normal((1000, 384)), "float32"))
    store.save_manifest()
    size = store.nbytes()
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "vectors").iterdir()}
    store.add(
        store.write_segment(
            space, [f"document {i} révisé" for i in range(10)], rng.standard_normal((10, 384)), "float32"
        )
    )
    store.save_manifest()
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "vectors").iterdir()}
    assert {name: after[name] for name in before} == before
    assert (store.nbytes() - size) / size <= 0.02


@pytest.mark.parametrize("step", ["segment", "exchange"])
def test_a_recording_failing_midway_leaves_the_old_store_whole(
    tmp_path: Path, recorded: tuple[Path, FakeEmbeddingsServer, Run], monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    dataset, settings, first = _small(), _from_recording(tmp_path, recorded), recorded[2]
    cassettes = tmp_path / "cassettes" / "fixture"
    committed = {p.name: p.read_bytes() for p in cassettes.iterdir()}
    segments = _segment_files(tmp_path)
    edited = replace(
        dataset, documents=(replace(dataset.documents[0], text="Tout autre texte."), *dataset.documents[1:])
    )

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device (simulated)")

    if step == "segment":  # the new segment's file cannot be written
        monkeypatch.setattr("retrieval.recording.vector_store.atomic_write", fail)
    else:  # the segment is written, then the cassette set cannot be swapped in
        monkeypatch.setattr(atomic, "_exchange", fail)
    # The disk is full for the embedding cache too: said in one warning, the recording's error is the store's.
    full_cache = pytest.warns(CacheMismatch, match="embedding cache not saved") if step == "segment" else nullcontext()
    with pytest.raises((CassetteError, OSError), match="No space left on device"), full_cache:
        evaluate(edited, settings, mode="record")
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in cassettes.iterdir()} == committed
    assert _segment_files(tmp_path) == segments  # the new segment's files removed, the old untouched
    assert _figures(evaluate(dataset, settings, mode="replay")) == _figures(first)


def test_float16_rounds_the_corpus_in_every_mode(tmp_path: Path, embeddings_server: FakeEmbeddingsServer) -> None:
    dataset = _small()
    full = _settings(tmp_path, embeddings_server.url)
    half = _settings(tmp_path / "half", embeddings_server.url, vector_precision="float16")
    evaluate(dataset, full, mode="record")
    recorded = evaluate(dataset, half, mode="record")
    [segment] = json.loads((tmp_path / "half" / "cassettes" / "fixture" / STORE_MANIFEST).read_text())["segments"]
    assert segment["precision"] == "float16"
    live = evaluate(dataset, replace(half, cassettes=str(tmp_path / "nothing" / "cassettes")), mode="live")
    replayed = evaluate(dataset, half, mode="replay")
    from_full = evaluate(dataset, replace(full, vector_precision="float16"), mode="replay")
    assert _figures(recorded) == _figures(live) == _figures(replayed) == _figures(from_full)
    assert _figures(replayed) != _figures(evaluate(dataset, full, mode="replay"))  # rounded: other scores
    # The setting is in the configuration the baseline keeps only when it rounds.
    assert recorded.config["vector_precision"] == "float16"
    assert "vector_precision" not in evaluate(dataset, full, mode="replay").config
    # A float32 run cannot use vectors stored in float16: they are missing to it.
    with pytest.raises(Exception, match="no stored vector"):
        evaluate(dataset, replace(half, vector_precision="float32"), mode="replay")


def test_the_manifest_is_scanned_for_secrets(tmp_path: Path) -> None:
    folder = tmp_path / "local"
    shutil.copytree(DEMO_CASSETTES / "local", folder)
    manifest = folder / STORE_MANIFEST
    manifest.write_text(
        manifest.read_text().replace('"variant"', '"sk-proj-0123456789abcdefghijklmnopqrstuv", "variant"')
    )
    assert [line.split(":")[0] for line in scan_cassettes(folder, {})] == [str(manifest)]


def test_an_older_corpus_cassette_is_named_with_its_conversion(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes" / "local"
    shutil.copytree(DEMO_CASSETTES / "local", folder)
    (folder / STORE_MANIFEST).unlink()
    (folder / "corpus-embeddings.json").write_text('{"interactions": []}')
    with pytest.raises(CassetteError) as caught:
        evaluate(demo_dataset(), demo_settings(cassettes=str(tmp_path / "cassettes")), mode="replay")
    assert str(caught.value) == (
        f"{folder / 'corpus-embeddings.json'} holds the corpus vectors in the format before the vector store: "
        "convert it with `python -m retrieval --convert-corpus-cassette --profile local` (same vectors, same "
        "figures) or re-record with `pytest --record --retrieval-profile local`"
    )


def test_converting_an_older_corpus_cassette_keeps_its_vectors_and_figures(
    tmp_path: Path, recorded: tuple[Path, FakeEmbeddingsServer, Run]
) -> None:
    from retrieval.evaluation.corpus_vectors import LEGACY_STAGE, convert_corpus_cassette
    from retrieval.evaluation.embeddings import embed_texts
    from retrieval.recording.network import closed_network

    dataset, settings = _small(), _from_recording(tmp_path, recorded)
    first = recorded[2]
    folder = tmp_path / "cassettes" / "fixture"
    # An older recording: the corpus's calls in a cassette of their own, no store.
    (folder / STORE_MANIFEST).unlink()
    shutil.rmtree(tmp_path / "vectors")
    documents = [d.content for d in dataset.documents]
    recorder = recorder_for(settings, "record")
    live = OpenAIEmbeddings(settings.profile)
    with recorder.stage(LEGACY_STAGE):
        legacy = embed_texts(live, documents, "document")
    live.close()
    recorder.commit({})
    assert (folder / "corpus-embeddings.json").is_file()

    embedder = OpenAIEmbeddings(settings.profile, replay=True)
    with closed_network():
        convert_corpus_cassette(recorder_for(settings, "replay"), embedder, settings, documents)
    embedder.close()
    assert not (folder / "corpus-embeddings.json").exists()
    store = recorder_for(settings, "replay").committed_store()
    vectors, found = store.lookup(corpus_space(embedder, settings.profile.embeddings), documents)
    assert found.all()
    np.testing.assert_array_equal(vectors, legacy)
    assert _figures(evaluate(dataset, settings, mode="replay")) == _figures(first)


def test_the_repository_commits_no_corpus_vectors_in_cassettes() -> None:
    root = Path(__file__).resolve().parents[2]
    for folder in (root / "cassettes", DEMO_CASSETTES):
        assert sorted(p.name for p in folder.rglob("corpus-embeddings.json")) == []
        for manifest in folder.rglob(STORE_MANIFEST):
            assert json.loads(manifest.read_text())["segments"]  # a manifest: names and digests only


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (np.nan, "NaN or infinite values"),
        (0.0, "only zeros"),
        (np.inf, "NaN or infinite values"),
        (1e30, "values so large that its norm overflows"),
    ],
    ids=["NaN", "zero", "infinity", "1e30"],
)
def test_a_replay_refuses_a_bad_stored_vector_whose_digests_agree(
    tmp_path: Path, recorded: tuple[Path, FakeEmbeddingsServer, Run], row: float, problem: str
) -> None:
    dataset, settings = _small(), _from_recording(tmp_path, recorded)
    manifest = tmp_path / "cassettes" / "fixture" / STORE_MANIFEST
    # The segment rewritten with one bad row and the manifest's digests made to agree with it: only
    # the values can tell (what a hand edit, a bad merge or a buggy version could commit).
    store = VectorStore.open(manifest, tmp_path / "vectors" / "fixture")
    [segment] = store.segments
    keys, vectors = (np.array(a) for a in store.arrays(segment))
    vectors[5] = row
    forged = VectorStore(manifest, store.folder)
    forged.add(forged._write(segment.space, keys, vectors, "float32"))
    forged.save_manifest()
    with pytest.raises(CassetteError) as caught:
        evaluate(dataset, settings, mode="replay")
    [written] = forged.segments
    assert str(caught.value) == (
        f"{store.folder / written.files[1]}: the vector of row 5 holds {problem}, which would score 0 against "
        f"everything; restore it with `git checkout -- {manifest.parent} {store.folder}` or re-record with "
        "`pytest --record --retrieval-profile fixture`"
    )


def test_a_recording_embeds_from_the_provider_never_from_the_cache(
    tmp_path: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    # The cache is what a live run kept; a recording commits what the provider answers now.
    dataset, settings = _small(), _settings(tmp_path, embeddings_server.url)
    evaluate(dataset, settings, mode="live")
    embeddings_server.requests.clear()
    assert _sent(embeddings_server) == []
    evaluate(dataset, settings, mode="record")
    assert sorted(_sent(embeddings_server)) == sorted(d.content for d in dataset.documents)


def test_a_server_that_changed_its_width_gets_every_document_embedded_again(
    tmp_path: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    # A profile without `dimensions`: the server chooses, and may change its mind between recordings.
    dataset = _small()
    settings = replace(
        _settings(tmp_path, embeddings_server.url), profile=make_profile(embeddings_server.url, dimensions=0)
    )
    evaluate(dataset, settings, mode="record")
    edited = replace(
        dataset, documents=(replace(dataset.documents[0], text="Tout autre texte."), *dataset.documents[1:])
    )
    embeddings_server.dimensions = 6
    embeddings_server.requests.clear()
    evaluate(edited, settings, mode="record")
    # The edited document, then every one: the stored vectors of the old width cannot be mixed with the new.
    contents = [d.content for d in edited.documents]
    assert sorted(_sent(embeddings_server)) == sorted([contents[0], *contents])
    manifest = json.loads((tmp_path / "cassettes" / "fixture" / STORE_MANIFEST).read_text())
    assert [(s["count"], s["width"]) for s in manifest["segments"]] == [(64, 4), (64, 6)]
    replayed = evaluate(edited, settings, mode="replay")
    live = evaluate(edited, replace(settings, cache=str(tmp_path / "other-cache")), mode="live")
    assert _figures(replayed) == _figures(live)
