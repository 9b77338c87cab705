"""What a method costs: calls, tokens, wall time, and an estimate from an editable price table."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["PRICE_KEYS", "Usage", "estimate_cost"]


@dataclass
class Usage:
    """Counters a provider adds to as it calls a model; safe to share between threads."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    # Inputs cut to the model's limit (the profile's max_input_chars) before being sent.
    truncated: int = 0
    # What a service bills other than tokens: Cohere's rerank search units (a query with up to 100
    # documents, as its answer's meta.billed_units reports them).
    search_units: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(
        self,
        calls: int = 1,
        input_tokens: int = 0,
        output_tokens: int = 0,
        seconds: float = 0.0,
        truncated: int = 0,
        search_units: int = 0,
    ) -> None:
        """Count one (or more) calls and their token usage."""
        with self._lock:
            self.calls += calls
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.seconds += seconds
            self.truncated += truncated
            self.search_units += search_units

    def as_dict(self) -> dict[str, float | int]:
        """The counters as plain data (run log, recording metadata, JSON report)."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "seconds": round(self.seconds, 3),
            # Only when something was cut: logs and recordings of runs without long inputs stay as they were.
            **({"truncated": self.truncated} if self.truncated else {}),
            # Only for a service billed so: every other stage's counters are what they were.
            **({"search_units": self.search_units} if self.search_units else {}),
        }


# What a price table entry may hold: USD per million input or output tokens (models, token-billed
# rerank APIs such as Jina's), USD per call (services priced per request: a hosted search), USD per
# search unit (Cohere Rerank: one query over up to 100 documents).
PRICE_KEYS = ("input", "output", "call", "search_unit")


def estimate_cost(usage: Usage, model: str, prices: Mapping[str, Mapping[str, float]]) -> float | None:
    """Estimated cost in the price table's currency (tokens per million, plus calls and search
    units); None if the model has no price."""
    price = prices.get(model)
    if price is None:
        return None
    tokens = usage.input_tokens * float(price.get("input", 0.0)) + usage.output_tokens * float(price.get("output", 0.0))
    units = usage.calls * float(price.get("call", 0.0)) + usage.search_units * float(price.get("search_unit", 0.0))
    return tokens / 1_000_000 + units
