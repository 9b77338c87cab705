"""Run retrieval methods over a dataset and collect a Run.

The only place that wires providers, cache, recording and methods together: the
CLI and the pytest gate both call `evaluate`, so no evaluation logic lives in tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.config import ConfigError, Settings
from retrieval.data.dataset import Dataset, corpus_fingerprint
from retrieval.evaluation.corpus_vectors import LEGACY_STAGE, corpus_vectors, embedding_variant, recorder_for
from retrieval.evaluation.embeddings import embed_texts
from retrieval.evaluation.method_run import ranks_here, run_method, timed
from retrieval.evaluation.pipeline import Plan, plan
from retrieval.executors.executor import LOCAL, Executor, open_executor
from retrieval.measures.metrics import MRR_DEPTH
from retrieval.measures.refusion import keep_depths
from retrieval.measures.ties import tie_summary
from retrieval.methods.base import UNRECORDED_REASONS, Context, Embed, Method, ProgressFactory, Rankings
from retrieval.providers.base import EmbeddingProvider, Kind, ReplayMissError
from retrieval.providers.long_inputs import long_inputs
from retrieval.recording.cache import EmbeddingCache
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.drift import recording_drift, replay_previous
from retrieval.recording.network import closed_network
from retrieval.recording.recorder import Mode, Recorder
from retrieval.run.cost import Usage
from retrieval.run.ranking import rank_of
from retrieval.run.results import MethodResult, QuestionResult, Run
from retrieval.text.long_inputs import long_inputs_said
from retrieval.text.redaction import declare_key_variables
from retrieval.text.server_provenance import served_by

__all__ = ["QUESTION_STAGE", "StagedRecording", "evaluate"]

# The cassette of the question embeddings every vector-reading method shares (the corpus's
# vectors are in the vector store: retrieval.evaluation.corpus_vectors).
QUESTION_STAGE = "question-embeddings"
# 0.1's name of the corpus cassette of recordings made before the store, served to
# `retrieval.evaluate.CORPUS_STAGE` (a deprecated path, retrieval.moved) until 0.3.0.
CORPUS_STAGE = LEGACY_STAGE
# Their names in the usage and cost tables.
INDEXING = "corpus embeddings"
QUERY_EMBEDDINGS = "question embeddings"
LOG_DEPTH = 20


@contextmanager
def _naming_new_questions(recorder: Recorder, context: Context, prefixes: tuple[str, ...]) -> Iterator[None]:
    """On a replay miss of the question embeddings, name the questions their cassette has never seen."""
    try:
        yield
    except ReplayMissError as exc:
        recorded = recorder.recorded_strings(QUESTION_STAGE)
        # The profile may prefix texts ("query: ..."): strip the prefixes once, then look up in a set.
        recorded |= {r.removeprefix(p) for r in recorded for p in prefixes if p and r.startswith(p)}
        new = [(q.id, q.text) for q in context.dataset.questions if q.text not in recorded]
        if not new:
            raise
        listed = "; ".join(f"{i} «{' '.join(t.split())[:60]}»" for i, t in new[:5]) + (
            f" and {len(new) - 5} more" if len(new) > 5 else ""
        )
        raise ReplayMissError(
            f"{exc}; questions new or changed since {recorder.path(QUESTION_STAGE)} was recorded: {listed}", exc.reason
        ) from exc


def _embed(
    context: Context, settings: Settings, mode: Mode, recorder: Recorder, stack: ExitStack, executor: Executor = LOCAL
) -> None:
    from retrieval.providers import make_embedder
    from retrieval.providers.local_server import ensure_server

    profile = settings.profile
    embedding = profile.embeddings
    if mode != "replay":
        # The server proves its model and width first; which one it was goes to recording.json.
        served = stack.enter_context(
            ensure_server(profile.server, embedding.base_url, embedding.model, embedding.dimensions)
        )
        recorder.server = served.as_dict() if served else None
    embedder = make_embedder(profile, replay=mode == "replay")
    if hasattr(embedder, "close"):
        stack.callback(embedder.close)

    # Only the corpus is cached. Replays must give the stored vectors, not whatever a local cache
    # holds; a recording embeds what the store lacks from the provider, and fills the cache.
    cache = None
    if mode != "replay":
        cache = EmbeddingCache(
            settings.cache,
            embedder.provider,
            embedder.model,
            embedder.dimensions,
            "document",
            embedding_variant(embedding),
        )
    embedder.usage = Usage()
    with timed(embedder.usage):
        vectors = corpus_vectors(
            embedder,
            context.dataset.doc_ids,
            [d.content for d in context.dataset.documents],
            settings,
            mode,
            recorder,
            cache,
            context.progress,
            executor,
        )
    context.document_vectors = vectors
    context.usage[INDEXING] = embedder.usage

    # All questions in one batched call (up to the batch size), shared by every method.
    embedder.usage = Usage()
    with (
        timed(embedder.usage),
        recorder.stage(QUESTION_STAGE),
        _naming_new_questions(recorder, context, (embedding.query_prefix,)),
    ):
        questions = [q.text for q in context.dataset.questions]
        context.question_vectors = embed_texts(embedder, questions, "query", None, context.progress)
    context.usage[QUERY_EMBEDDINGS] = embedder.usage
    context.embed = _shared_embed(embedder, cache, mode, context)


def _shared_embed(embedder: EmbeddingProvider, cache: EmbeddingCache | None, mode: Mode, context: Context) -> Embed:
    """`Context.embed`: a method's own texts through the shared embedder, counted apart from the
    shared stages. No stage of its own: the calls go to the calling method's cassette. Documents
    follow the corpus cache policy (read live, filled when recording)."""
    lock = threading.Lock()

    def embed(texts: Sequence[str], kind: Kind) -> tuple[np.ndarray, Usage]:
        with lock:  # the embedder's counters are swapped for the call
            shared, embedder.usage = embedder.usage, Usage()
            try:
                documents = cache if kind == "document" else None
                vectors = embed_texts(embedder, texts, kind, documents if mode == "live" else None, context.progress)
                if documents is not None and mode == "record":
                    documents.store(texts, vectors)
                    documents.save()
            finally:
                spent, embedder.usage = embedder.usage, shared
        return vectors, spent

    return embed


def _kept(chosen: Plan, settings: Settings, at_least: int = 0) -> dict[str, int]:
    """How many ids of each ranking the run keeps: enough for every metric (recall@k, MRR@10, and
    recall at `at_least`, a base branch's k) and the candidate pool, and, for what the what-if
    sweeps fuse again or widen, enough for their results to be exact."""
    base = max(LOG_DEPTH, settings.candidates, settings.k, MRR_DEPTH, at_least)
    deeper = keep_depths(
        {m: d.requires for m, d in chosen.declarations.items()},
        {m: d.candidate_source for m, d in chosen.declarations.items()},
    )
    return {m: min(max(base, deeper.get(m, 0)), settings.depth) for m in chosen.declarations}


def _results(context: Context, chosen: Plan, kept: dict[str, int], k: int) -> list[QuestionResult]:
    ids = context.dataset.doc_ids
    position = context.dataset.positions
    results = []
    for qi, question in enumerate(context.dataset.questions):
        per_method = {}
        for name in chosen.declarations:
            ranking = context.rankings[name][qi]
            keep = kept[name]
            top = ranking.indices[:keep]
            per_method[name] = MethodResult(
                ids=[ids[i] for i in np.asarray(top).tolist()],
                scores=np.asarray(ranking.scores[:keep], dtype=np.float64).tolist(),
                relevant_ranks={d: rank_of(ranking, position[d]) for d in question.relevant},
                status=ranking.status,
                retrieved=len(ranking),
                # On the full ranking: a tied group may reach beyond what the run keeps.
                ties=tie_summary(ranking, [position[d] for d in question.relevant], k, context.depth).as_dict(),
            )
        results.append(QuestionResult(question, per_method))
    return results


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


def _explain_miss(exc: ReplayMissError, recorder: Recorder, dataset: Dataset) -> ReplayMissError:
    recorded_for = recorder.metadata().get("fingerprint")
    data = (
        f" They were recorded for other data (fingerprint {recorded_for}; {dataset.name} is {dataset.fingerprint})."
        if recorded_for and recorded_for != dataset.fingerprint
        else ""
    )
    return ReplayMissError(
        f"{exc}. The cassettes in {recorder.directory} no longer match this run: the dataset, a model, a prompt "
        f"or a method (its requests or its code) changed since they were recorded.{data} Re-record with "
        f"`{recorder.record_command}` (it replaces them).",
        "replay miss",
    )


def _configuration(settings: Settings, chosen: Plan) -> dict[str, Any]:
    """The settings shared by the run, then each method's own as `<method>.<key>`."""
    config = settings.describe()
    for name, declared in chosen.declarations.items():
        config.update({f"{name}.{key}": value for key, value in declared.config.items()})
    return config


def _pipelines(chosen: Plan) -> dict[str, list[str]]:
    """The stages each method's figures cost: what it runs through, with the shared question
    embeddings where the pipeline reads vectors (the corpus embeddings are indexing, shown once)."""
    pipelines = {}
    for name in chosen.declarations:
        stages = chosen.pipeline(name)
        if chosen.needs_vectors(name):
            stages.insert(0, QUERY_EMBEDDINGS)
        pipelines[name] = stages
    return pipelines


def _run_pipeline(context: Context, chosen: Plan, settings: Settings, mode: Mode, recorder: Recorder) -> dict[str, Any]:
    """The shared embeddings, then every method in dependency order, each through its channel;
    returns where they ran (the executor's description)."""
    # The embedder (and the local server) stay open for methods that embed their own texts.
    # The cluster is joined before replay closes the network (Ray's client opens Python sockets).
    with (
        open_executor(settings.executor, settings.ray_timeout, str(Path(settings.cache) / "ray")) as executor,
        closed_network() if mode == "replay" else nullcontext(),
        ExitStack() as stack,
    ):
        # Work a method can do while the others rank starts first (bm25's corpus analysis),
        # and that method ranks when nothing else can. With nothing else to do meanwhile (one
        # method ranks here, no shared embeddings), nothing is started early: the method's own
        # rank does that work, at no cost of starting it elsewhere (bm25: no worker forked).
        here = [m for m in chosen.methods if ranks_here(chosen.declarations[m.name], mode)]
        embeds = any(d.needs_vectors for d in chosen.declarations.values())
        prepared: list[str] = []
        for method in here if embeds or len(here) > 1 else ():
            stop = executor.prepare(method, context)
            if stop is not None:
                stack.callback(stop)
                prepared.append(method.name)
        if embeds:
            _embed(context, settings, mode, recorder, stack, executor)
        for method in chosen.order(late=prepared):
            run_method(method, chosen.declarations[method.name], context, recorder, mode, settings.root, executor)
        return executor.describe()


def _collect(
    dataset: Dataset, settings: Settings, chosen: Plan, context: Context, mode: Mode, at_least: int = 0
) -> Run:
    """The Run: per-question results of every method, with what produced them."""
    embedding_model = settings.profile.embeddings.model or None
    kept = _kept(chosen, settings, at_least)
    return Run(
        dataset=dataset.name,
        fingerprint=dataset.fingerprint,
        config=_configuration(settings, chosen),
        methods=chosen.wanted,
        results=_results(context, chosen, kept, settings.k),
        usage=context.usage,
        skipped=chosen.unavailable,
        mode=mode,
        pipelines=_pipelines(chosen),
        declarations={name: d.as_dict() for name, d in chosen.declarations.items()},
        cost_models={
            INDEXING: embedding_model,
            QUERY_EMBEDDINGS: embedding_model,
            **context.cost_models,
            **{name: d.cost_model for name, d in chosen.declarations.items()},
        },
        kept=kept,
        corpus=corpus_fingerprint(dataset.documents),
        # The texts the model could not read whole, named in every mode (the store's vectors obey the same rule).
        long_inputs=long_inputs(
            settings.profile,
            [(d.id, d.content) for d in dataset.documents],
            [(q.id, q.text) for q in dataset.questions],
        )
        if any(d.needs_vectors for d in chosen.declarations.values())
        else {},
    )


def _commit_recording(run: Run, context: Context, recorder: Recorder, previous: Any, settings: Settings) -> None:
    """Replace the profile's cassettes with this recording (all or nothing), with its drift."""
    _refuse_unreplayable(context, recorder)
    written = recorder.commit(
        {
            "fingerprint": run.fingerprint,
            "config": run.config,
            "usage": {stage: u.as_dict() for stage, u in run.usage.items()},
            **({"server": recorder.server} if recorder.server else {}),
            "long_inputs": run.long_inputs,  # always: a previous recording's names say nothing of this one
        },
        drift=lambda staged: recording_drift(recorder.directory, staged, previous, run, settings.k, recorder.vectors),
    )
    if written:  # nothing recorded (bm25 alone): no drift to show
        run.drift = [*recorder.metadata()["drift"]["summary"], *(f"note: {n}" for n in recorder.notices)]
        if recorder.server:
            run.drift.append(f"note: {served_by(recorder.server, 'recorded')}")
        run.drift += [f"note: {long_inputs_said(entry, what)}" for what, entry in run.long_inputs.items()]


@dataclass(frozen=True)
class StagedRecording:
    """A recording checked and staged, not yet in place (the pytest gate commits it at session
    finish): `staged` maps each cassette file to its staged copy; `commit()` replaces the
    profile's cassettes (all or none, with the drift), `discard()` forgets the recording."""

    staged: dict[str, Path]
    commit: Callable[[], object]
    discard: Callable[[], None]


def evaluate(
    dataset: Dataset,
    settings: Settings,
    *,
    mode: Mode = "replay",
    methods: Sequence[str] | None = None,
    extra: Sequence[Method] = (),
    progress: ProgressFactory | None = None,
    verify_code: bool = True,
    on_staged: Callable[[StagedRecording], None] | None = None,
    baseline_inputs: Mapping[str, str] | None = None,
    keep_at_least: int = 0,
    baseline_ref: str | None = None,
) -> Run:
    """Run the requested methods (and what they require) over every question.

    `mode` says where calls go: recorded cassettes (replay; no connection may leave the
    process), the providers and services (live), or those with their answers recorded
    (record). `extra` adds method objects built by the caller. A built-in the profile cannot
    provide (a reranker without a model) is left out, its reason in `Run.skipped`; a missing
    cassette is an error, never a skip. A recording first replays the committed cassettes, and
    its drift against them (retrieval.recording.drift) goes to `Run.drift` and recording.json; that
    replay reads ranking cassettes whatever code recorded them (`verify_code=False`: the old
    code's rankings are what the drift compares with). With `on_staged`, a recording is not
    committed: it is handed over staged (`StagedRecording`), for the caller to commit or discard.
    `baseline_inputs` (the gate's: the digests its baseline records) makes a method that reads an
    input from a cache (bm25's analysed corpus) use only the one the baseline's figures came from
    (`Context.baseline_inputs`); the digests of the inputs used are in `Run.inputs`.
    `keep_at_least` is a cut-off another side measures at (a base branch's k): every ranking keeps
    at least that many ids. `baseline_ref` is the git ref whose gate the run serves when it
    evaluates what that ref measures besides this project (`retrieval.gate.base_judging`): only a
    recording made with that ref holds it, so a replay miss names that command.
    """
    requested = list(methods if methods is not None else settings.methods)
    recorder = recorder_for(settings, mode, baseline_ref)
    recorder.verify_code = verify_code
    if mode == "record":
        recorder.hold()  # one recording of a profile at a time, from here to its commit or discard
    try:
        recorder.recover()  # a commit a killed run left half done: the old set or the new, before any read
        # Before anything is recorded: what the committed cassettes give, for the drift of the recording.
        previous = (
            replay_previous(
                recorder.has_any(),
                lambda: evaluate(
                    dataset,
                    settings,
                    mode="replay",
                    methods=requested,
                    extra=extra,
                    verify_code=False,
                    baseline_inputs=baseline_inputs,
                    keep_at_least=keep_at_least,
                    baseline_ref=baseline_ref,
                ),
            )
            if mode == "record"
            else None
        )
        chosen = plan(requested, settings, replay=mode == "replay", extra=extra)
        # The methods' own credentials join the providers': a recording holding a value is refused.
        declared_keys = (k for d in chosen.declarations.values() for k in d.key_variables)
        recorder.key_variables = tuple(dict.fromkeys((*recorder.key_variables, *declared_keys)))
        # Whatever the run prints from here on (a warning, a traceback) hides their values too.
        declare_key_variables(recorder.key_variables)
        if not chosen.wanted:
            reasons = "; ".join(f"{m} unavailable: {why}" for m, why in chosen.unavailable.items())
            raise ConfigError(f"nothing to evaluate: {reasons or 'no method requested'}")
    except BaseException:
        recorder.discard()  # the recording lock, released
        raise
    context = Context(
        dataset=dataset,
        depth=settings.depth,
        progress=progress,
        mode=mode,
        rankings=Rankings(chosen.aliases),
        baseline_inputs=baseline_inputs,
    )
    try:
        ran_on = _run_pipeline(context, chosen, settings, mode, recorder)
        run = _collect(dataset, settings, chosen, context, mode, keep_at_least)
        run.executor = ran_on
        if mode == "record" and on_staged is not None:
            _refuse_unreplayable(context, recorder)
            on_staged(
                StagedRecording(
                    recorder.staged,
                    lambda: _commit_recording(run, context, recorder, previous, settings),
                    recorder.discard,
                )
            )
        elif mode == "record":
            _commit_recording(run, context, recorder, previous, settings)
    except ReplayMissError as exc:
        recorder.discard()
        raise _explain_miss(exc, recorder, dataset) from exc
    except BaseException:
        # Whatever stopped the run, a recording in progress replaces nothing and leaves nothing.
        recorder.discard()
        raise
    if mode == "replay":
        run.recorded_usage = recorder.metadata().get("usage", {})
    # Which model server embedded: this run's, or the one that recorded what was replayed.
    run.server = recorder.server if mode != "replay" else recorder.metadata().get("server")
    run.cassettes = tuple(sorted(recorder.used))
    run.inputs = dict(sorted(context.inputs.items()))
    return run
