"""Generation over any OpenAI-compatible `POST {base_url}/chat/completions` endpoint.

The request body is serialised deterministically by `post_json` (cassettes match it
byte for byte). Servers that do not implement `json_schema` response formats can be
used with `json_schema = false` in the profile: the answer is then only asked to be
a JSON object, and the reranker's strict parsing does the rest.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from retrieval.config.profile_checks import openai_llm as check
from retrieval.config.settings import Profile
from retrieval.providers.base import ProviderError, ShortAnswer
from retrieval.providers.http import HTTPProvider, post_json

__all__ = ["DEFAULT_BASE_URL", "OpenAIChat", "check"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIChat(HTTPProvider):
    """GenerationProvider for OpenAI-compatible chat completions, temperature 0.

    The API key comes from the environment variable named by `profile.api_key_env`
    (sent as a Bearer token); a profile without one talks to a keyless server. In
    replay no key is needed or sent: cassettes never hold it. `client` lets callers
    share one httpx.Client; its own timeout then applies instead of the profile's.
    """

    provider = "openai"

    def _configure(self, profile: Profile) -> tuple[str, str]:
        llm = profile.llm
        if not llm.model:
            raise ValueError(f"profile {profile.name!r}: rerank_model is empty")
        self.model = llm.model
        self.url = (llm.base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        self.json_schema = llm.json_schema
        return profile.api_key_env, "openai"

    def _response_format(self, schema: Mapping[str, Any], schema_name: str) -> dict[str, Any]:
        if self.json_schema:
            return {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema), "strict": True},
            }
        return {"type": "json_object"}

    def generate_json(self, prompt: str, schema: Mapping[str, Any], schema_name: str) -> str:
        """Return the raw content of one answer; ProviderError "blocked"/"empty" if none."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "response_format": self._response_format(schema, schema_name),
        }
        content, _ = self._complete(body)
        return content

    def generate_short(self, prompt: str, top_logprobs: int) -> ShortAnswer:
        """One token of answer with the `top_logprobs` likeliest first tokens (OpenAI's logprobs,
        served by vLLM, llama.cpp and Ollama too); a server that returns none gives the text alone."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": 1,
            "logprobs": True,
            "top_logprobs": top_logprobs,
        }
        content, choice = self._complete(body)
        logprobs = choice.get("logprobs")
        steps = logprobs.get("content") if isinstance(logprobs, dict) else None
        first = steps[0] if isinstance(steps, list) and steps and isinstance(steps[0], dict) else {}
        alternatives = first.get("top_logprobs")
        found = {
            str(a["token"]): float(a["logprob"])
            for a in (alternatives if isinstance(alternatives, list) else [])
            if isinstance(a, dict) and isinstance(a.get("token"), str) and _number(a.get("logprob"))
        }
        return ShortAnswer(content, found or None)

    def _complete(self, body: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The content of one answer and its choice, usage counted."""
        what = f"chat {self.model}"
        started = time.perf_counter()
        try:
            data = post_json(self._client, self.url, body, headers=self._headers, retry=self._retry, what=what)
        except ProviderError:
            # A failed call still cost a request and wall time; tokens are unknown.
            self.usage.add(1, seconds=time.perf_counter() - started)
            raise
        usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
        self.usage.add(
            1,
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
            seconds=time.perf_counter() - started,
        )
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderError(f"{what}: no choice in the answer", "empty")
        choice = choices[0]
        message: dict[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
        if choice.get("finish_reason") == "content_filter" or message.get("refusal"):
            raise ProviderError(f"{what}: answer refused or filtered", "blocked")
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ProviderError(f"{what}: empty answer (finish reason {choice.get('finish_reason')})", "empty")
        return content, choice


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _number(value: Any) -> bool:
    # A log-probability: finite or -inf (a server may give -9999.0 or -inf for an impossible token).
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value
