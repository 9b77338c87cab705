"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_embeddings import FakeEmbeddingsServer


@pytest.fixture
def embeddings_server() -> Iterator[FakeEmbeddingsServer]:
    """A fake OpenAI-compatible embeddings server on 127.0.0.1, stopped after the test."""
    fake = FakeEmbeddingsServer()
    try:
        yield fake
    finally:
        fake.stop()
