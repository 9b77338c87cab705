"""One method run over every question: its own exception named, its rankings checked (count,
ids, scores), its calls counted, a refused connection or replay miss explained in one line."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext

import numpy as np

from retrieval.config import ConfigError
from retrieval.data.dataset import Dataset
from retrieval.executors.executor import LOCAL, Executor
from retrieval.methods.base import Context, Declaration, Method
from retrieval.providers.base import ProviderError, ReplayMissError, cause_of
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.misses import missed_request
from retrieval.recording.network import NetworkBlockedError, running
from retrieval.recording.ranking_cassettes import method_code, source_code
from retrieval.recording.recorder import Mode, Recorder
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking, RankingError
from retrieval.text.redaction import redacted

__all__ = ["raising_method", "ranks_here", "run_method", "timed"]


@contextmanager
def timed(usage: Usage) -> Iterator[None]:
    # Wall time of the stage, replacing the providers' per-call sum (calls may overlap).
    started = time.perf_counter()
    try:
        yield
    finally:
        usage.seconds = time.perf_counter() - started


_RAISED_BY = "raised by method "


def raising_method(exc: BaseException) -> str | None:
    """The name of the method whose `rank` raised `exc` (as noted by the evaluator), or None."""
    for note in getattr(exc, "__notes__", ()):
        if note.startswith(_RAISED_BY):
            return str(note[len(_RAISED_BY) :].strip("'\""))
    return None


def _method_error(exc: Exception, declared: Declaration) -> Exception | None:
    """The one-line error a method's failure stands for; None when it shows as raised (already
    one line, or a bug to show with its traceback)."""
    name = declared.name
    if isinstance(exc, RankingError):
        return ConfigError(f"method {name!r}: {exc}")
    if isinstance(exc, ReplayMissError | CassetteError):
        return None
    missed = missed_request(exc)
    if missed is not None:
        # The method's own HTTP client met vcrpy's refusal: one line, not vcrpy's advice.
        return ReplayMissError(f"method {name!r}: no recorded answer for {missed}", "replay miss")
    blocked = cause_of(exc, NetworkBlockedError)
    if blocked is not None:
        return CassetteError(str(blocked))
    if declared.calls == "http" and not isinstance(exc, ProviderError) and cause_of(exc, ConnectionError):
        # The method's service is down or elsewhere (live or recording): not a bug to trace.
        # Redacted: a client's message may hold the URL, and a key in its query string.
        detail = redacted(f"{type(exc).__name__}: {exc}")
        return ProviderError(
            f"method {name!r} could not reach its service ({detail}): start it or check its address, then run again",
            "connect",
        )
    return None


def _checked(declared: Declaration, rankings: object, dataset: Dataset) -> list[Ranking]:
    """A method's output, refused in one line when it breaks the contract (a user method's bug
    would otherwise surface as an IndexError deep in the scoring)."""
    fix = "rank(context) must return one retrieval.run.ranking.Ranking per question, in dataset order"
    if not isinstance(rankings, list | tuple):
        raise ConfigError(f"method {declared.name!r} returned {type(rankings).__name__}: {fix}.")
    expected = len(dataset.questions)
    if len(rankings) != expected:
        raise ConfigError(
            f"method {declared.name!r} returned {len(rankings)} rankings for {expected} questions: {fix}."
        )
    for question, ranking in zip(dataset.questions, rankings, strict=True):
        if not isinstance(ranking, Ranking):
            raise ConfigError(
                f"method {declared.name!r} returned {type(ranking).__name__} for question {question.id}: {fix}."
            )
    # Every question's indices in one array, question i's as i * n + index: one range check and
    # one sort for the whole method instead of one per question; the loop only names the culprit.
    n = len(dataset.documents)
    indices = [np.asarray(r.indices) for r in rankings]
    for question, got in zip(dataset.questions, indices, strict=True):
        if len(got) and not np.issubdtype(got.dtype, np.integer):
            raise ConfigError(
                f"method {declared.name!r} ranked {got.dtype} indices for question {question.id}: indices are "
                "integers that point into context.dataset.documents."
            )
    indices = [i.astype(np.int64, copy=False) for i in indices]
    flat = np.concatenate([np.empty(0, dtype=np.int64), *indices])
    keys = flat + np.repeat(np.arange(len(indices), dtype=np.int64) * n, [len(i) for i in indices])
    if len(flat) and (flat.min() < 0 or flat.max() >= n or bool((np.diff(np.sort(keys)) == 0).any())):
        question = next(
            q
            for q, i in zip(dataset.questions, indices, strict=True)
            if len(i) and (i.min() < 0 or i.max() >= n or len(np.unique(i)) != len(i))
        )
        raise ConfigError(
            f"method {declared.name!r} ranked an index outside the corpus (0..{n - 1}) or the same document "
            f"twice for question {question.id}: indices point into context.dataset.documents."
        )
    return list(rankings)


async def _await(awaitable: Awaitable[object]) -> object:
    return await awaitable


def _resolved(result: object) -> object:
    """What `rank` returned; for an `async def rank`, what its coroutine returns, run on an event
    loop of its own (in a worker thread when this thread already runs one, under pytest-asyncio
    for instance): a team's retriever is often its async search client."""
    if not inspect.isawaitable(result):
        return result
    import asyncio  # here: only an async method needs it (a tenth of the command's imports)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(result))
    with ThreadPoolExecutor(1) as worker:
        return worker.submit(asyncio.run, _await(result)).result()


def _counters(context: Context) -> dict[str, tuple[int, int, int]]:
    return {stage: (u.calls, u.input_tokens, u.output_tokens) for stage, u in context.usage.items()}


def ranks_here(declared: Declaration, mode: Mode) -> bool:
    """Whether the method's `rank` runs (a replayed ranking cassette stands for it otherwise)."""
    return not (declared.calls == "rankings" and mode == "replay")


def run_method(
    method: Method,
    declared: Declaration,
    context: Context,
    recorder: Recorder,
    mode: Mode,
    root: str,
    executor: Executor = LOCAL,
) -> None:
    """Run one method through the channel it declares, timing it and keeping its usage; `root`
    is the project root its declared `sources` resolve from."""
    usage = Usage()
    rankings: object
    # What ranked, recorded with a ranking cassette and checked against it on replay; for an HTTP
    # method, its declared sources (the service's code in the repository), kept in its cassette.
    code = method_code(method, declared.sources, root, declared.config) if declared.calls == "rankings" else None
    served = source_code(declared.name, declared.sources, root) if declared.calls == "http" else None
    answered, counted = recorder.calls.get(declared.channel, 0), _counters(context)
    try:
        with timed(usage), running(f"method {declared.name!r}"):
            if not ranks_here(declared, mode):
                rankings = recorder.replay_rankings(declared.channel, context.dataset, context.depth, code)
            else:
                with (
                    recorder.stage(declared.channel, count_live=True, code=served)
                    if declared.calls == "http"
                    else nullcontext()
                ):
                    rankings = _resolved(executor.rank(method, context))
    except Exception as exc:
        error = _method_error(exc, declared)
        if error is not None:
            raise error from None
        # Whatever else a method raises shows with its traceback; the note names the method.
        exc.add_note(f"{_RAISED_BY}{declared.name!r}")
        raise
    checked = _checked(declared, rankings, context.dataset)
    if declared.calls == "rankings" and mode == "record":
        recorder.record_rankings(declared.channel, context.dataset, declared.name, checked, code)
    context.rankings[declared.name] = checked
    own = context.usage.get(declared.name)
    if own is not None:  # the method's provider counted its calls and tokens
        usage.add(own.calls, own.input_tokens, own.output_tokens, search_units=own.search_units)
    elif declared.calls == "http" and _counters(context) == counted:
        # A method that counts none of its calls (a team's search client) is charged with those its
        # cassette answered (a live run counts them on their way out).
        usage.add(recorder.calls.get(declared.channel, 0) - answered)
    context.usage[declared.name] = usage
