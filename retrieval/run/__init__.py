"""What a run is made of, as plain data: rankings, usage and cost, method declarations, the Run itself."""

from typing import Any


def __getattr__(name: str) -> Any:
    """The names 0.1's `retrieval/run.py` exported, kept as deprecated aliases until 0.3.0 (retrieval.moved)."""
    from retrieval.moved import moved_name

    return moved_name(__name__, name)
