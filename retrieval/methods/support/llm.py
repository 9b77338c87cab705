"""What the LLM-backed remedies (query rewriting, document enrichment) share: the profile's
generator or the reason there is none, their cassette names, and bounded concurrent calls.

The generator is the reranker's (the profile's rerank_provider and rerank_model): a profile
without one cannot provide these methods, which are then unavailable, never a failure. In
replay a method whose cassette was never recorded is unavailable too, its reason saying how
to record it: they are optional rows, not part of the default gate.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from retrieval.config import Settings
from retrieval.methods.base import Progress
from retrieval.providers.base import GenerationProvider, MissingKeyError, ProviderError, ReplayMissError
from retrieval.text.redaction import redacted

__all__ = ["channel_for", "generator_or_unavailable", "map_in_order"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def channel_for(prefix: str, model: str) -> str:
    """A cassette name per model (`rewrite-gemini-3.5-flash`): another model is another recording."""
    return f"{prefix}-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", model)


def generator_or_unavailable(settings: Settings, replay: bool, method: str, prefix: str) -> GenerationProvider:
    """The profile's LLM for `method`, or MethodUnavailable saying how to record the method."""
    from retrieval.methods.base import MethodUnavailable
    from retrieval.providers import PROVIDERS, make_generator
    from retrieval.recording.cassette_files import record_command

    profile = settings.profile
    if not profile.llm.configured:
        # The built-in profile with an LLM is the example the message gives.
        example = record_command("gemini", PROVIDERS["gemini"].needed)
        raise MethodUnavailable(
            f"profile {profile.name!r} has no LLM (rerank_provider, rerank_model): not recorded; record {method} "
            f"with a profile that has one, e.g. `{example}`"
        )
    # A missing cassette in replay is an error, like any other channel's: the evaluator says so.
    generator = make_generator(profile, replay=replay)
    assert generator is not None  # has_reranker was checked above
    return generator


def map_in_order(call: Callable[[int], T], count: int, workers: int, progress: Progress | None = None) -> list[T]:
    """`[call(0), ..., call(count - 1)]`, at most `workers` at a time, in index order whatever
    order they finish in. An exception from a call is raised once the calls already running end;
    the queued ones are cancelled (a missing key or a replay miss must not send the rest)."""
    results: dict[int, T] = {}
    executor = ThreadPoolExecutor(max_workers=min(workers, max(1, count)))
    try:
        futures: dict[Future[T], int] = {executor.submit(call, i): i for i in range(count)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=futures.__getitem__):
                results[futures[future]] = future.result()
                if progress:
                    progress.update(1)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        if progress:
            progress.close()
    return [results[i] for i in range(count)]


def ask_or_degrade(ask: Callable[[], T], what: str, model: str) -> T | ProviderError:
    """`ask()`, or the ProviderError of an outage (timeout, HTTP error after retries, empty,
    blocked or unparseable answer): the caller degrades that one item and the run goes on.

    A missing key or a replay miss is a setup problem, not an outage: raised, never degraded
    (a replay miss names `what` was asked, e.g. "rerank of question q03", and the model)."""
    try:
        return ask()
    except ReplayMissError as exc:
        raise ReplayMissError(f"{what} ({model}): {exc}", exc.reason) from exc
    except MissingKeyError:
        raise
    except ProviderError as exc:
        # The outage's message may quote the server's error body, which may echo the request.
        log.warning("%s degraded: %s", what, redacted(str(exc)))
        return exc
