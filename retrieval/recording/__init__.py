"""Recording and replay: cassettes, the vector store, ranking cassettes, closed network, drift."""

from typing import Any


def __getattr__(name: str) -> Any:
    """The names 0.1's `retrieval/recording.py` exported, kept as deprecated aliases until 0.3.0 (retrieval.moved)."""
    from retrieval.moved import moved_name

    return moved_name(__name__, name)
