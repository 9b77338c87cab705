"""Each provider's rules for the profile group it serves, as plain functions over the settings.

They sit with the configuration, not in the provider modules, so that loading a project file
never imports a provider (and through it the recorder): the configuration is the lowest layer.
The provider modules import their limits from here. A check returns (field, what is wrong and
the fix) pairs, empty when the group can be used.
"""

from __future__ import annotations

from collections.abc import Callable

from retrieval.config.settings import EmbeddingSettings, LLMSettings, Profile

__all__ = [
    "CHECKS",
    "DEFAULT_DIMENSIONS",
    "ENCODINGS",
    "LONG_INPUTS",
    "MAX_BATCH",
    "check_profile",
    "input_limits",
    "url_problems",
]

# OpenAI-compatible embeddings: how vectors may come back.
ENCODINGS = ("float", "base64")
# What a text longer than the profile's limit becomes (retrieval.providers.long_inputs).
LONG_INPUTS = ("truncate", "refuse", "chunk")
# Gemini embeds at most this many texts per call, at this width unless the profile asks another.
MAX_BATCH = 100
DEFAULT_DIMENSIONS = 768

Problems = list[tuple[str, str]]


def url_problems(key: str, url: str) -> Problems:
    """A base URL's problem for a provider's `check`: it must be http(s), or empty where allowed."""
    if url and not url.startswith(("http://", "https://")):
        return [(key, f'= {url!r} is not an http(s) URL; write it whole, e.g. "http://127.0.0.1:8765/v1".')]
    return []


def openai_embeddings(settings: EmbeddingSettings) -> Problems:
    """An OpenAI-compatible server's embeddings group. A group without a model is not used, so
    not checked for its URL (a bm25-only profile needs no server)."""
    problems: Problems = []
    if settings.model and not settings.base_url:
        problems.append(
            ("base_url", 'is empty: an OpenAI-compatible server needs its URL, e.g. "http://127.0.0.1:11434/v1".')
        )
    problems += url_problems("base_url", settings.base_url)
    if settings.batch_size < 1:
        problems.append(("batch_size", f"must be at least 1, got {settings.batch_size}."))
    if settings.dimensions < 0:
        problems.append(("dimensions", f"must be 0 (the model's own) or more, got {settings.dimensions}."))
    if settings.encoding_format not in ENCODINGS:
        problems.append(("encoding_format", f'must be "float" or "base64", got {settings.encoding_format!r}.'))
    return problems + input_limits(settings)


def input_limits(settings: EmbeddingSettings) -> Problems:
    """What any provider's long texts obey (retrieval.providers.long_inputs)."""
    problems: Problems = []
    if settings.max_input_chars < 0:
        problems.append(("max_input_chars", "must be 0 (no limit) or more."))
    if settings.max_input_tokens < 0:
        problems.append(("max_input_tokens", "must be 0 (no limit) or more."))
    if settings.long_inputs not in LONG_INPUTS:
        problems.append(("long_inputs", 'must be "truncate", "refuse" or "chunk".'))
    return problems


def openai_llm(settings: LLMSettings) -> Problems:
    """An OpenAI-compatible server's LLM group: an empty base_url means OpenAI itself."""
    return url_problems("base_url", settings.base_url)


def gemini_embeddings(settings: EmbeddingSettings) -> Problems:
    """Gemini's embeddings group (checked without the SDK: a keyless run never imports it)."""
    problems = url_problems("base_url", settings.base_url)
    if not 1 <= settings.batch_size <= MAX_BATCH:
        problems.append(
            (
                "batch_size",
                f"must be from 1 to {MAX_BATCH} (Gemini embeds at most {MAX_BATCH} texts per call), "
                f"got {settings.batch_size}.",
            )
        )
    if settings.dimensions < 0:
        problems.append(("dimensions", f"must be 0 ({DEFAULT_DIMENSIONS}) or more, got {settings.dimensions}."))
    return problems + input_limits(settings)


def gemini_llm(settings: LLMSettings) -> Problems:
    """Gemini generation's LLM group (an empty base_url is Google's endpoint)."""
    return url_problems("base_url", settings.base_url)


# provider -> (its embeddings check, its LLM check). A new provider adds its line here and its
# credentials in retrieval.providers.PROVIDERS.
CHECKS: dict[str, tuple[Callable[[EmbeddingSettings], Problems], Callable[[LLMSettings], Problems]]] = {
    "openai": (openai_embeddings, openai_llm),
    "gemini": (gemini_embeddings, gemini_llm),
}
_KNOWN = f"use one of {', '.join(CHECKS)}."


def check_profile(profile: Profile) -> list[tuple[str, str, str]]:
    """Each group's problems as its provider sees them: (group, field, what is wrong and the fix).

    An LLM group is checked when it names a provider; a profile without one has no LLM.
    """
    embeddings = profile.embeddings
    if embeddings.provider not in CHECKS:
        return [("embeddings", "provider", f"= {embeddings.provider!r} is not a known provider; {_KNOWN}")]
    problems = [("embeddings", key, problem) for key, problem in CHECKS[embeddings.provider][0](embeddings)]
    llm = profile.llm
    if llm.provider is None:
        return problems
    if llm.provider not in CHECKS:
        return [*problems, ("llm", "provider", f"= {llm.provider!r} is not a known provider; {_KNOWN}")]
    return problems + [("llm", key, problem) for key, problem in CHECKS[llm.provider][1](llm)]
