"""A fake search service on 127.0.0.1, and a user retriever that calls it over HTTP: fixtures.

The service ranks documents by the number of words they share with the query. What it
answers is not a figure of any engine: the tests use it to prove that a user method
declaring `calls = "http"` is recorded, replayed with the service stopped, and that an
undeclared one cannot reach the network in replay.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import numpy as np
from loopback_http import LoopbackHTTPServer

from retrieval import Context, Ranking
from retrieval.providers.http import new_client, tls_context

URL_VARIABLE = "FIXTURE_SEARCH_URL"


class _JsonService:
    """A JSON-over-POST service on 127.0.0.1 that keeps every request body; `answer` makes the
    answer of a body."""

    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200  # set to 500 to make every call fail
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                service.requests.append(body)
                payload = json.dumps(answer(body)).encode()
                self.send_response(service.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = LoopbackHTTPServer(Handler)
        self.url = f"http://127.0.0.1:{self._server.port}/search"

    def stop(self) -> None:
        self._server.stop()


class FakeSearchService(_JsonService):
    """POST /search {"query": text, "documents": [[id, text], ...]} -> {"hits": [[index, score], ...]}."""

    def __init__(self) -> None:
        def answer(body: dict[str, Any]) -> dict[str, Any]:
            words = set(body["query"].lower().split())
            hits = [[i, len(words & set(text.lower().split()))] for i, (_, text) in enumerate(body["documents"])]
            return {"hits": sorted((h for h in hits if h[1]), key=lambda h: (-h[1], h[0]))}

        super().__init__(answer)


class IdSearchService(_JsonService):
    """POST /search {"query": text, "size": n} -> {"hits": [{"id": doc_id, "score": s}, ...]}:
    the protocol of the documented retriever (docs/methods.md), over `documents` ((id, text) pairs) as its index."""

    def __init__(self, documents: Sequence[tuple[str, str]]) -> None:
        index = [(doc_id, set(text.lower().split())) for doc_id, text in documents]

        def answer(body: dict[str, Any]) -> dict[str, Any]:
            words = set(body["query"].lower().split())
            scored = sorted(((len(words & terms), doc_id) for doc_id, terms in index), key=lambda h: (-h[0], h[1]))
            return {"hits": [{"id": doc_id, "score": score} for score, doc_id in scored[: body["size"]] if score]}

        super().__init__(answer)


def _ranking(hits: Sequence[Sequence[float]]) -> Ranking:
    return Ranking(np.asarray([int(h[0]) for h in hits], dtype=np.int64), np.asarray([float(h[1]) for h in hits]))


class SearchRetriever:
    """The team's retriever: one HTTP call per question to their search service (httpx)."""

    name = "search"
    requires: tuple[str, ...] = ()
    needs_vectors = False
    calls = "http"
    sent = 8  # documents sent with each query: an edit of it changes every request

    def rank(self, context: Context) -> list[Ranking]:
        documents = [[d.id, d.content] for d in context.dataset.documents[: self.sent]]
        # The package's client: it shares one TLS context (an httpx.Client builds its own, ~20 ms).
        with new_client(5) as client:
            return [
                _ranking(
                    client.post(os.environ[URL_VARIABLE], json={"query": q.text, "documents": documents}).json()["hits"]
                )
                for q in context.dataset.questions
            ]


class UrllibRetriever(SearchRetriever):
    """The same retriever through the standard library (http.client), as older code does."""

    name = "search-urllib"

    def rank(self, context: Context) -> list[Ranking]:
        documents = [[d.id, d.content] for d in context.dataset.documents[: self.sent]]
        rankings = []
        for q in context.dataset.questions:
            body = json.dumps({"query": q.text, "documents": documents}).encode()
            request = urllib.request.Request(os.environ[URL_VARIABLE], body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=5) as answer:
                rankings.append(_ranking(json.loads(answer.read())["hits"]))
        return rankings


class AsyncRetriever(SearchRetriever):
    """The same retriever written `async def rank`, its questions sent concurrently through
    httpx's AsyncClient, as a team whose search client is async writes it."""

    name = "search-async"

    async def rank(self, context: Context) -> list[Ranking]:  # type: ignore[override]
        documents = [[d.id, d.content] for d in context.dataset.documents[: self.sent]]
        # On the package's TLS context, as the sync one: an AsyncClient of its own loads certifi's
        # roots again (about 20 ms of CPU a call, 25 calls a run of the suite), for a plain-HTTP service.
        async with httpx.AsyncClient(timeout=5, verify=tls_context()) as client:

            async def one(text: str) -> Ranking:
                answer = await client.post(os.environ[URL_VARIABLE], json={"query": text, "documents": documents})
                return _ranking(answer.json()["hits"])

            return list(await asyncio.gather(*(one(q.text) for q in context.dataset.questions)))


class AiohttpRetriever(SearchRetriever):
    """The async retriever on aiohttp, its bodies sent with `json=` (vcrpy keeps them as objects)."""

    name = "search-aiohttp"

    async def rank(self, context: Context) -> list[Ranking]:  # type: ignore[override]
        import aiohttp

        documents = [[d.id, d.content] for d in context.dataset.documents[: self.sent]]
        async with aiohttp.ClientSession() as session:

            async def one(text: str) -> Ranking:
                body = {"query": text, "documents": documents}
                async with session.post(os.environ[URL_VARIABLE], json=body) as answer:
                    return _ranking((await answer.json())["hits"])

            return list(await asyncio.gather(*(one(q.text) for q in context.dataset.questions)))


class UndeclaredAsyncRetriever(AsyncRetriever):
    """The async retriever without its calls declared: replay must refuse its connection too."""

    name = "search-async-undeclared"
    calls = "none"


class RequestsRetriever(SearchRetriever):
    """The same retriever through requests (urllib3), with its key in the URL, as some hosted
    search APIs take it."""

    name = "search-requests"

    def rank(self, context: Context) -> list[Ranking]:
        import requests

        documents = [[d.id, d.content] for d in context.dataset.documents[: self.sent]]
        with requests.Session() as session:
            return [
                _ranking(
                    session.post(
                        f"{os.environ[URL_VARIABLE]}?api_key=fixture-secret-0123",
                        json={"query": q.text, "documents": documents},
                        timeout=5,
                    ).json()["hits"]
                )
                for q in context.dataset.questions
            ]


class CheckedRetriever(SearchRetriever):
    """Through requests with `raise_for_status`: its error names the URL, which holds a key in
    its query and a token in its path (as some hosted APIs take them)."""

    name = "search-checked"

    def rank(self, context: Context) -> list[Ranking]:
        import requests

        url = f"{os.environ[URL_VARIABLE]}/{os.environ['FIXTURE_SEARCH_TOKEN']}?api_key=fixture-secret-0123"
        documents = [[d.id, d.content] for d in context.dataset.documents[: self.sent]]
        rankings = []
        with requests.Session() as session:
            for question in context.dataset.questions:
                answer = session.post(url, json={"query": question.text, "documents": documents}, timeout=5)
                answer.raise_for_status()
                rankings.append(_ranking(answer.json()["hits"]))
        return rankings


class KeyedRetriever(SearchRetriever):
    """Sends its key in the body (some services take it there) and declares the variable."""

    name = "search-keyed"
    key_variables = ("FIXTURE_SEARCH_KEY",)

    def rank(self, context: Context) -> list[Ranking]:
        with new_client(5) as client:
            body = {"query": "", "documents": [], "auth": os.environ["FIXTURE_SEARCH_KEY"]}
            return [
                _ranking(client.post(os.environ[URL_VARIABLE], json=body).json()["hits"])
                for _ in context.dataset.questions
            ]


class UndeclaredRetriever(SearchRetriever):
    """Calls the service but does not declare it: replay must refuse its connection."""

    name = "search-undeclared"
    calls = "none"


class SwallowingRetriever(SearchRetriever):
    """Catches the refused connection and returns empty rankings: the evaluator must still fail."""

    name = "search-swallowing"
    calls = "none"

    def rank(self, context: Context) -> list[Ranking]:
        try:
            return super().rank(context)
        except httpx.HTTPError:
            return [_ranking([]) for _ in context.dataset.questions]


def _edited(kind: type[SearchRetriever], on_failure: str = "") -> SearchRetriever:
    """The retriever after an edit that changed its requests (one more document sent). With
    `on_failure` "empty", a question whose call fails gets an empty ranking, as production code
    may do; with "raise", it then raises an error of its own, outside the handler (no chain)."""

    class Edited(kind):  # type: ignore[valid-type, misc]
        sent = 9

        def rank(self, context: Context) -> list[Ranking]:
            if not on_failure:
                return super().rank(context)
            rankings, failed = [], False
            for question in context.dataset.questions:
                alone = replace(context, dataset=replace(context.dataset, questions=(question,)))
                try:
                    rankings += super().rank(alone)
                except Exception:
                    failed = True
                    rankings.append(_ranking([]))
            if failed and on_failure == "raise":
                raise RuntimeError("search unavailable")
            return rankings

    return Edited()


def factory(settings: object) -> SearchRetriever:
    return SearchRetriever()


def urllib_factory(settings: object) -> UrllibRetriever:
    return UrllibRetriever()


class PricedRetriever(SearchRetriever):
    """The retriever of a service priced per request: its calls are charged at its price."""

    name = "search-priced"
    cost_model = "fixture-search"


def priced_factory(settings: object) -> PricedRetriever:
    return PricedRetriever()


class NarrowRetriever(SearchRetriever):
    """The same service asked about fewer documents, sharing the first retriever's cassette (its
    channel): one service, two configurations compared."""

    name = "search-narrow"
    channel = "search"
    sent = 4


def narrow_factory(settings: object) -> NarrowRetriever:
    return NarrowRetriever()


def async_factory(settings: object) -> AsyncRetriever:
    return AsyncRetriever()


def aiohttp_factory(settings: object) -> AiohttpRetriever:
    return AiohttpRetriever()


def edited_aiohttp_factory(settings: object) -> SearchRetriever:
    return _edited(AiohttpRetriever)


def undeclared_async_factory(settings: object) -> UndeclaredAsyncRetriever:
    return UndeclaredAsyncRetriever()


def edited_async_factory(settings: object) -> SearchRetriever:
    return _edited(AsyncRetriever)


def requests_factory(settings: object) -> RequestsRetriever:
    return RequestsRetriever()


def checked_factory(settings: object) -> CheckedRetriever:
    return CheckedRetriever()


def keyed_factory(settings: object) -> KeyedRetriever:
    return KeyedRetriever()


def undeclared_factory(settings: object) -> UndeclaredRetriever:
    return UndeclaredRetriever()


def swallowing_factory(settings: object) -> SwallowingRetriever:
    return SwallowingRetriever()


def edited_factory(settings: object) -> SearchRetriever:
    return _edited(SearchRetriever)


def edited_urllib_factory(settings: object) -> SearchRetriever:
    return _edited(UrllibRetriever)


def fallback_factory(settings: object) -> SearchRetriever:
    return _edited(SearchRetriever, "empty")


def fallback_urllib_factory(settings: object) -> SearchRetriever:
    return _edited(UrllibRetriever, "empty")


def raising_factory(settings: object) -> SearchRetriever:
    return _edited(SearchRetriever, "raise")
