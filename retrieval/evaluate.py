"""Run retrieval methods over a dataset and collect a Run.

The only place that wires providers, cache, recording and methods together: the
CLI and the pytest gate both call `evaluate`, so no evaluation logic lives in tests.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from retrieval.cache import EmbeddingCache
from retrieval.config import ConfigError, Settings
from retrieval.cost import Usage
from retrieval.dataset import Dataset
from retrieval.embeddings import embed_texts
from retrieval.methods.base import Context, Method, ProgressFactory
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.hybrid import HybridMethod
from retrieval.methods.vector import VectorMethod
from retrieval.metrics import MRR_DEPTH
from retrieval.providers.base import ReplayMissError
from retrieval.ranking import Ranking, rank_of
from retrieval.recording import CassetteError, Mode, Recorder, record_command
from retrieval.run import MethodResult, QuestionResult, Run

__all__ = ["BUILTIN_METHODS", "evaluate", "rerank_stage"]

BUILTIN_METHODS = ("bm25", "vector", "hybrid", "rerank")
CORPUS_STAGE = "corpus-embeddings"
QUESTION_STAGE = "question-embeddings"
LOG_DEPTH = 20


def rerank_stage(model: str) -> str:
    """The cassette stage of one rerank model: each model has its own cassette."""
    return "rerank-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", model)


def _plugin(spec: str, settings: Settings) -> Method:
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"method {spec!r}: cannot import it ({exc}); use module.path:factory") from exc
    method = factory(settings)
    for needed in ("name", "requires", "needs_vectors", "rank"):
        if not hasattr(method, needed):
            raise ConfigError(
                f"method {spec!r}: the object it built has no {needed!r} (see retrieval.methods.base.Method)"
            )
    return method


def _build(name: str, settings: Settings, mode: Mode) -> Method:
    if name == "bm25":
        return BM25Method()
    if name == "vector":
        return VectorMethod()
    if name == "hybrid":
        return HybridMethod(rrf_k=settings.rrf_k)
    if name == "rerank":
        from retrieval.methods.rerank import RerankMethod
        from retrieval.providers import make_generator

        generator = make_generator(settings.profile, replay=mode == "replay")
        assert generator is not None
        return RerankMethod(generator, candidates=settings.candidates, workers=settings.profile.rerank_workers)
    if ":" in name:
        return _plugin(name, settings)
    raise ConfigError(f"unknown method {name!r}: choose among {', '.join(BUILTIN_METHODS)} or give module:factory")


def _plan(
    requested: Sequence[str], settings: Settings, mode: Mode, extra: Sequence[Method]
) -> tuple[list[Method], list[str]]:
    """Methods in dependency order (what a method requires runs before it), and the names of
    the requested ones (a `module:factory` spec is known by the name of the method it builds)."""
    built: dict[str, Method] = {m.name: m for m in extra}
    order: list[Method] = []

    def visit(name: str, chain: tuple[str, ...]) -> str:
        if name in chain:
            raise ConfigError(f"methods require each other in a cycle: {' -> '.join((*chain, name))}")
        if any(m.name == name for m in order):
            return name
        method = built.get(name) or _build(name, settings, mode)
        for dependency in method.requires:
            visit(dependency, (*chain, name))
        order.append(method)
        return method.name

    wanted = [visit(name, ()) for name in [*requested, *(m.name for m in extra if m.name not in requested)]]
    return order, wanted


def _pipeline(method: str, plan: Sequence[Method]) -> list[str]:
    by_name = {m.name: m for m in plan}
    stages: list[str] = []

    def visit(name: str) -> None:
        for dependency in by_name[name].requires:
            visit(dependency)
        if name not in stages:
            stages.append(name)

    visit(method)
    return stages


@contextmanager
def _timed(usage: Usage) -> Iterator[None]:
    # Wall time of the stage, replacing the providers' per-call sum (calls may overlap).
    started = time.perf_counter()
    try:
        yield
    finally:
        usage.seconds = time.perf_counter() - started


@contextmanager
def _naming_misses(recorder: Recorder, stage: str, context: Context, prefixes: tuple[str, ...]) -> Iterator[None]:
    """On a replay miss, name the documents or questions the stage's cassette has never seen."""
    try:
        yield
    except ReplayMissError as exc:
        recorded = recorder.recorded_strings(stage)
        if stage == CORPUS_STAGE:
            items = [(d.id, d.content) for d in context.dataset.documents]
        else:
            items = [(q.id, q.text) for q in context.dataset.questions]
        # The profile may prefix texts ("query: ..."): strip the prefixes once, then look up in a set.
        recorded |= {r.removeprefix(p) for r in recorded for p in prefixes if p and r.startswith(p)}
        new = [(i, t) for i, t in items if t not in recorded]
        if not new:
            raise
        what = "documents" if stage == CORPUS_STAGE else "questions"
        listed = "; ".join(f"{i} «{' '.join(t.split())[:60]}»" for i, t in new[:5]) + (
            f" and {len(new) - 5} more" if len(new) > 5 else ""
        )
        raise ReplayMissError(
            f"{exc}; {what} new or changed since {recorder.path(stage)} was recorded: {listed}", exc.reason
        ) from exc


def _embed(context: Context, settings: Settings, mode: Mode, recorder: Recorder, stack: ExitStack) -> None:
    from retrieval.providers import make_embedder
    from retrieval.providers.local_server import ensure_server

    profile = settings.profile
    if mode != "replay":
        stack.enter_context(ensure_server(profile.server, profile.embedding_base_url))
    embedder = make_embedder(profile, replay=mode == "replay")
    if hasattr(embedder, "close"):
        stack.callback(embedder.close)

    # Only the corpus is cached. Replays must give the recorded vectors, not whatever a local
    # cache holds; a recording must capture every call, so it fills the cache but never reads it.
    cache = None
    if mode != "replay":
        # Same model name, other server or other prefixes: other vectors, so another cache file.
        variant = hashlib.sha256(
            f"{profile.embedding_base_url}|{profile.input_type}|{profile.document_prefix}".encode()
        ).hexdigest()[:8]
        cache = EmbeddingCache(
            settings.cache, embedder.provider, embedder.model, embedder.dimensions, "document", variant
        )
    documents = [d.content for d in context.dataset.documents]
    embedder.usage = Usage()
    with (
        _timed(embedder.usage),
        recorder.stage(CORPUS_STAGE),
        _naming_misses(recorder, CORPUS_STAGE, context, (profile.document_prefix,)),
    ):
        vectors = embed_texts(embedder, documents, "document", cache if mode == "live" else None, context.progress)
    if cache is not None and mode == "record":
        cache.store(documents, vectors)
        cache.save()
    context.document_vectors = vectors
    context.usage["corpus embeddings"] = embedder.usage

    # All questions in one batched call (up to the batch size), shared by every method.
    embedder.usage = Usage()
    with (
        _timed(embedder.usage),
        recorder.stage(QUESTION_STAGE),
        _naming_misses(recorder, QUESTION_STAGE, context, (profile.query_prefix,)),
    ):
        questions = [q.text for q in context.dataset.questions]
        context.question_vectors = embed_texts(embedder, questions, "query", None, context.progress)
    context.usage["question embeddings"] = embedder.usage


def _results(context: Context, plan: Sequence[Method], keep: int) -> list[QuestionResult]:
    ids = context.dataset.doc_ids
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    results = []
    for qi, question in enumerate(context.dataset.questions):
        per_method = {}
        for method in plan:
            ranking: Ranking = context.rankings[method.name][qi]
            top = ranking.indices[:keep]
            per_method[method.name] = MethodResult(
                ids=[ids[i] for i in top],
                scores=[float(s) for s in ranking.scores[:keep]],
                relevant_ranks={d: rank_of(ranking, position[d]) for d in question.relevant},
                status=ranking.status,
            )
        results.append(QuestionResult(question, per_method))
    return results


# Degraded answers that were errors: vcrpy does not record them, so a replay would miss.
UNRECORDED_REASONS = ("http ", "timeout", "connect")


def _refuse_unreplayable(context: Context, recorder: Recorder) -> None:
    """A recording in which some call failed cannot be replayed: keep the committed cassettes."""
    failed = [
        f"{method} of {question.id} ({ranking.status.removeprefix('degraded: ')})"
        for method, rankings in context.rankings.items()
        for question, ranking in zip(context.dataset.questions, rankings, strict=True)
        if ranking.status.removeprefix("degraded: ").startswith(UNRECORDED_REASONS)
    ]
    if failed:
        recorder.discard()
        shown = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        raise CassetteError(
            f"recording not kept: {shown} failed, and a failed call has no recorded answer, so the gate "
            "could never replay it. Nothing was replaced; record again when the provider answers."
        )


def evaluate(
    dataset: Dataset,
    settings: Settings,
    *,
    mode: Mode = "replay",
    methods: Sequence[str] | None = None,
    extra: Sequence[Method] = (),
    progress: ProgressFactory | None = None,
) -> Run:
    """Run the requested methods (and what they require) over every question.

    `mode` says where model calls go: recorded cassettes (replay), the providers (live),
    or the providers with their answers recorded (record). `extra` adds user-supplied
    Method objects. Methods the profile cannot provide (rerank without a reranker) are
    skipped with the reason in `Run.skipped`; in replay, a missing cassette raises CassetteError.
    """
    profile = settings.profile
    requested = list(methods if methods is not None else settings.methods)
    recorder = Recorder(mode, Path(settings.cassettes) / profile.name, profile.name, profile.api_key_env)
    skipped: dict[str, str] = {}
    # Only what the profile cannot provide is skipped; a missing cassette fails in replay (CassetteError).
    if "rerank" in requested and not profile.has_reranker:
        skipped["rerank"] = f"profile {profile.name!r} has no reranker (set rerank_provider and rerank_model)"
        requested.remove("rerank")
    if not requested and not extra:
        reasons = "; ".join(f"{m} skipped: {why}" for m, why in skipped.items())
        raise ConfigError(f"nothing to evaluate: {reasons or 'no method requested'}")
    plan, wanted = _plan(requested, settings, mode, extra)
    context = Context(dataset=dataset, depth=settings.depth, progress=progress)
    try:
        with ExitStack() as stack:
            if any(m.needs_vectors for m in plan):
                _embed(context, settings, mode, recorder, stack)
            for method in plan:
                usage = Usage()
                stage = (
                    recorder.stage(rerank_stage(profile.rerank_model or "")) if method.name == "rerank" else ExitStack()
                )
                with _timed(usage), stage:
                    context.rankings[method.name] = method.rank(context)
                own = context.usage.get(method.name)
                if own is not None:  # the method's provider counted calls and tokens
                    usage.add(own.calls, own.input_tokens, own.output_tokens)
                if method.name == "vector" and "question embeddings" in context.usage:
                    q = context.usage.pop("question embeddings")
                    usage.add(q.calls, q.input_tokens, q.output_tokens, q.seconds)
                context.usage[method.name] = usage
                produced, expected = len(context.rankings[method.name]), len(dataset.questions)
                if produced != expected:
                    raise RuntimeError(f"method {method.name!r} returned {produced} rankings for {expected} questions")
    except ReplayMissError as exc:
        recorder.discard()
        recorded_for = recorder.metadata().get("fingerprint")
        data = (
            f" They were recorded for other data (fingerprint {recorded_for}; {dataset.name} is {dataset.fingerprint})."
            if recorded_for and recorded_for != dataset.fingerprint
            else ""
        )
        raise ReplayMissError(
            f"{exc}. The cassettes in {recorder.directory} do not hold this request: the dataset, the models "
            f"or the prompt changed since they were recorded.{data} Re-record with `{record_command(profile.name)}` "
            "(it replaces them), or run without cassettes: --live, or --methods bm25.",
            "replay miss",
        ) from exc
    except BaseException:
        recorder.discard()
        raise
    names = [m.name for m in plan]
    run = Run(
        dataset=dataset.name,
        fingerprint=dataset.fingerprint,
        config=settings.describe(),
        methods=[n for n in names if n in wanted],
        # Enough of each ranking for every metric (recall@k, MRR@10) and the candidate pool.
        results=_results(context, plan, max(LOG_DEPTH, settings.candidates, settings.k, MRR_DEPTH)),
        usage=context.usage,
        skipped=skipped,
        mode=mode,
        pipelines={n: _pipeline(n, plan) for n in names},
    )
    if mode == "record":
        _refuse_unreplayable(context, recorder)
        recorder.commit(
            {
                "fingerprint": dataset.fingerprint,
                "config": settings.describe(),
                "usage": {stage: u.as_dict() for stage, u in run.usage.items()},
            }
        )
    elif mode == "replay":
        run.recorded_usage = recorder.metadata().get("usage", {})
    return run
