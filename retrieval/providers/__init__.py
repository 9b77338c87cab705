"""Model providers, built from a profile.

Provider modules are imported lazily: a keyless run with the local profile never
imports google-genai (slow to import), and a Gemini run never needs the local server code.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from retrieval.config import ConfigError, Profile

if TYPE_CHECKING:
    from retrieval.providers.base import EmbeddingProvider, GenerationProvider

__all__ = ["PROVIDERS", "make_embedder", "make_generator", "required_key"]

PROVIDERS = ("openai", "gemini")


def _unknown(profile: Profile, key: str, value: str | None) -> ConfigError:
    return ConfigError(
        f"profile {profile.name!r}: {key} = {value!r} is not a known provider; use one of {', '.join(PROVIDERS)}."
    )


def make_embedder(profile: Profile, *, replay: bool) -> EmbeddingProvider:
    """The embedding provider the profile names; `replay` means calls are answered by cassettes."""
    if profile.embedding_provider == "openai":
        from retrieval.providers.openai_embeddings import OpenAIEmbeddings

        return OpenAIEmbeddings(profile, replay=replay)
    if profile.embedding_provider == "gemini":
        from retrieval.providers.gemini import GeminiEmbeddings

        return GeminiEmbeddings(profile, replay=replay)
    raise _unknown(profile, "embedding_provider", profile.embedding_provider)


def make_generator(profile: Profile, *, replay: bool) -> GenerationProvider | None:
    """The reranker's generation provider, or None when the profile has no reranker."""
    if not profile.has_reranker:
        return None
    if profile.rerank_provider == "openai":
        from retrieval.providers.openai_chat import OpenAIChat

        return OpenAIChat(profile, replay=replay)
    if profile.rerank_provider == "gemini":
        from retrieval.providers.gemini import GeminiGenerator

        return GeminiGenerator(profile, replay=replay)
    raise _unknown(profile, "rerank_provider", profile.rerank_provider)


def required_key(profile: Profile) -> str | None:
    """The unset key variable(s) a live call with this profile needs; None when nothing is missing.

    Checked before recording starts, so a run fails in one line before its first call.
    """
    used = [profile.embedding_provider]
    if profile.has_reranker and profile.rerank_provider:
        used.append(profile.rerank_provider)
    missing: list[str] = []
    for provider in dict.fromkeys(used):
        if provider == "gemini":
            from retrieval.providers.gemini import gemini_api_key

            if gemini_api_key() is None:
                missing.append("GEMINI_API_KEY (or GOOGLE_API_KEY)")
        elif provider == "openai" and profile.api_key_env and not os.environ.get(profile.api_key_env, "").strip():
            missing.append(profile.api_key_env)
    return " and ".join(missing) or None
