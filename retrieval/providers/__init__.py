"""Model providers, built from a profile.

Provider modules are imported lazily: a keyless run with the local profile never
imports google-genai (slow to import), and a Gemini run never needs the local server code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrieval.config.profile_checks import check_profile
from retrieval.config.settings import ConfigError, Profile

if TYPE_CHECKING:
    from retrieval.providers.base import EmbeddingProvider, GenerationProvider

__all__ = [
    "PROVIDERS",
    "Credentials",
    "check_profile",
    "credentials",
    "make_embedder",
    "make_generator",
    "required_key",
]


@dataclass(frozen=True)
class Credentials:
    """What a provider authenticates with, declared for the recorder: the environment variables
    whose values must never reach a cassette (a recording holding one is refused)."""

    key_variables: tuple[str, ...] = ()
    # The variable a live run must set (the first is named in the record command).
    needed: tuple[str, ...] = ()


# Each provider's declaration. Kept here rather than in the provider modules so that the
# recorder can read them without importing google-genai (slow) for a keyless run.
PROVIDERS: dict[str, Credentials] = {
    # OpenAI-compatible servers: a Bearer key from the variable the profile names (api_key_env).
    "openai": Credentials(key_variables=("OPENAI_API_KEY",)),
    # The SDK reads either variable (GOOGLE_API_KEY wins) and sends the key in x-goog-api-key.
    "gemini": Credentials(key_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY"), needed=("GEMINI_API_KEY",)),
}


def credentials(profile: Profile) -> Credentials:
    """The union of the declarations of the providers a profile uses, with its own api_key_env."""
    used = [profile.embeddings.provider, *([profile.llm.provider] if profile.llm.configured else [])]
    own = [profile.api_key_env] if profile.api_key_env else []
    keys, needed = list(own), list(own)
    for name in used:
        declared = PROVIDERS.get(name or "", Credentials())
        keys += declared.key_variables
        needed += declared.needed
    return Credentials(*(tuple(dict.fromkeys(values)) for values in (keys, needed)))


def _unknown(profile: Profile, key: str, value: str | None) -> ConfigError:
    return ConfigError(
        f"profile {profile.name!r}: {key} = {value!r} is not a known provider; use one of {', '.join(PROVIDERS)}."
    )


def make_embedder(profile: Profile, *, replay: bool) -> EmbeddingProvider:
    """The embedding provider the profile names, its long texts handled as the profile says
    (retrieval.providers.long_inputs); `replay` means calls are answered by cassettes."""
    from retrieval.providers.long_inputs import limited

    if profile.embeddings.provider == "openai":
        from retrieval.providers.openai_embeddings import OpenAIEmbeddings

        return limited(OpenAIEmbeddings(profile, replay=replay), profile)
    if profile.embeddings.provider == "gemini":
        from retrieval.providers.gemini import GeminiEmbeddings

        return limited(GeminiEmbeddings(profile, replay=replay), profile)
    raise _unknown(profile, "embedding_provider", profile.embeddings.provider)


def make_generator(profile: Profile, *, replay: bool) -> GenerationProvider | None:
    """The reranker's generation provider, or None when the profile has no reranker."""
    if not profile.llm.configured:
        return None
    if profile.llm.provider == "openai":
        from retrieval.providers.openai_chat import OpenAIChat

        return OpenAIChat(profile, replay=replay)
    if profile.llm.provider == "gemini":
        from retrieval.providers.gemini import GeminiGenerator

        return GeminiGenerator(profile, replay=replay)
    raise _unknown(profile, "rerank_provider", profile.llm.provider)


def required_key(profile: Profile) -> str | None:
    """The unset key variable(s) a live call with this profile needs; None when nothing is missing.

    Checked before recording starts, so a run fails in one line before its first call.
    """
    used = [profile.embeddings.provider]
    if profile.llm.configured and profile.llm.provider:
        used.append(profile.llm.provider)
    missing: list[str] = []
    for provider in dict.fromkeys(used):
        if provider == "gemini":
            from retrieval.providers.gemini import gemini_api_key

            if gemini_api_key() is None:
                missing.append("GEMINI_API_KEY (or GOOGLE_API_KEY)")
        elif provider == "openai" and profile.api_key_env and not os.environ.get(profile.api_key_env, "").strip():
            missing.append(profile.api_key_env)
    return " and ".join(missing) or None
