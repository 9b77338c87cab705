"""The rerank APIs the `rerank_api` method speaks, as plain data: each one's endpoint, request and
answer fields, credentials and what it bills.

They share one shape (a query and the candidate texts in, an index and a relevance score per text
out) and differ in names: TEI takes `texts` and answers a bare list scored `score`, Voyage takes
`top_k` and answers under `data`, Mixedbread takes `input` and `top_k` and answers `data` scored
`score`, Cohere bills search units where the others count tokens. The
configuration checks a profile against this table without importing the provider
(retrieval.providers.rerank_api), which reads the same records to build requests and read answers.

Shapes as each project defines them: Cohere's v2 API reference (POST /v2/rerank); Jina's
(POST /v1/rerank); Voyage's (POST /v1/rerank); Mixedbread's (POST /v1/reranking, `{model, query,
input, top_k, return_input}` -> `{data: [{index, score}], usage}`); text-embeddings-inference's router
(`RerankRequest {query, texts, truncate, raw_scores, return_text}` -> `[Rank {index, score}]`,
router/src/http/types.rs); vLLM's `RerankRequest`/`RerankResponse` (served at /rerank, /v1/rerank
and /v2/rerank); Infinity's (`RerankInput {query, documents, return_documents, raw_scores, model,
top_n}` -> `ReRankResult {results: [{relevance_score, index}], usage}`, served at /rerank, under
the server's --url-prefix); llama.cpp's server (`/rerank`, `/v1/rerank`, Jina's format).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

__all__ = ["SERVICES", "RerankService"]


@dataclass(frozen=True)
class RerankService:
    """One rerank API: where it answers and how its requests and answers are spelled.

    `url` is the hosted endpoint ("" for a self-hosted server: the profile gives its URL);
    `key_variable` the environment variable its key is read from by default ("" keyless, a
    self-hosted server started without --api-key), sent as a Bearer token; `sends_model` whether
    the request names the model (TEI serves one and takes no model field); `top_n` the field that
    asks for every candidate back (None: the server answers for all); `results` the answer's list
    (None: the answer is the list); `score` each result's score field; `usage` the path to the
    count it bills and `billing` what that count is ("tokens", "search_units", or "none" when the
    answer holds none); `extra` fields sent with every request (TEI's `truncate`, so that a long
    document is cut by the server instead of refused); `example_model` is for messages.
    """

    name: str
    path: str
    example_model: str = "BAAI/bge-reranker-v2-m3"
    url: str = ""
    key_variable: str = ""
    documents: str = "documents"
    sends_model: bool = True
    top_n: str | None = "top_n"
    results: str | None = "results"
    score: str = "relevance_score"
    usage: tuple[str, ...] = ()
    billing: Literal["tokens", "search_units", "none"] = "none"
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def hosted(self) -> bool:
        """A service at a fixed address (a profile may still point it elsewhere, at a proxy)."""
        return bool(self.url)


SERVICES: dict[str, RerankService] = {
    service.name: service
    for service in (
        RerankService(
            "cohere",
            "/v2/rerank",
            "rerank-v3.5",
            url="https://api.cohere.com/v2/rerank",
            key_variable="COHERE_API_KEY",
            usage=("meta", "billed_units", "search_units"),
            billing="search_units",
        ),
        RerankService(
            "jina",
            "/v1/rerank",
            "jina-reranker-v2-base-multilingual",
            url="https://api.jina.ai/v1/rerank",
            key_variable="JINA_API_KEY",
            usage=("usage", "total_tokens"),
            billing="tokens",
            # Jina returns each document's text by default: the cassette would hold the corpus twice.
            extra=MappingProxyType({"return_documents": False}),
        ),
        RerankService(
            "voyage",
            "/v1/rerank",
            "rerank-2.5",
            url="https://api.voyageai.com/v1/rerank",
            key_variable="VOYAGE_API_KEY",
            top_n="top_k",
            results="data",
            usage=("usage", "total_tokens"),
            billing="tokens",
        ),
        RerankService(
            "mixedbread",
            "/v1/reranking",
            "mixedbread-ai/mxbai-rerank-large-v2",
            url="https://api.mixedbread.com/v1/reranking",
            key_variable="MXBAI_API_KEY",
            documents="input",
            top_n="top_k",
            results="data",
            score="score",
            usage=("usage", "total_tokens"),
            billing="tokens",
            # As Jina's: the texts are not sent back into the cassette.
            extra=MappingProxyType({"return_input": False}),
        ),
        RerankService(
            "tei",
            "/rerank",
            documents="texts",
            sends_model=False,
            top_n=None,
            results=None,
            score="score",
            extra=MappingProxyType({"truncate": True}),
        ),
        # vLLM's usage had only total_tokens before prompt_tokens was added; llama.cpp sends both.
        RerankService("vllm", "/v1/rerank", usage=("usage", "total_tokens"), billing="tokens"),
        RerankService("llamacpp", "/v1/rerank", usage=("usage", "total_tokens"), billing="tokens"),
        RerankService("infinity", "/rerank", usage=("usage", "total_tokens"), billing="tokens"),
    )
}
