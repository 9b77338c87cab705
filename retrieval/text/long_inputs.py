"""The texts the embedding model could not read whole, in one line: what recording.json keeps under
"long_inputs" (retrieval.providers.long_inputs), said by the report and after a recording."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["long_inputs_said"]


def long_inputs_said(entry: Mapping[str, Any], what: str, shown: int = 10) -> str:
    """ "2 documents longer than max_input_chars = 2048 (the model reads 512 tokens) embedded
    truncated, ...: cnil-12, cnil-40"; `what` is "documents" or "questions"."""
    named = [str(name) for name in entry.get(what, ())]
    listed = ", ".join(named[:shown]) + (f" and {len(named) - shown} more" if len(named) > shown else "")
    model = f" (the model reads {entry['model_tokens']} tokens)" if entry.get("model_tokens") else ""
    noun = what if len(named) > 1 else what.removesuffix("s")
    if entry.get("long_inputs") == "chunk":
        became = "embedded in parts within the limit, each one's vector the mean of its parts'"
    else:
        became = (
            'embedded truncated, so retrieved on their first part only (long_inputs = "chunk" embeds them whole, '
            '"refuse" stops the run)'
        )
    return f"{len(named)} {noun} longer than {entry.get('limit', 'the limit')}{model} {became}: {listed}"
