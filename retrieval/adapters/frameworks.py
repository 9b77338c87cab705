"""LangChain, LlamaIndex and Haystack retrievers gated as methods, with no adapter to write.

Spec: `langchain:MODULE:OBJECT`, `llamaindex:MODULE:OBJECT` or `haystack:MODULE:OBJECT`, options
after `?`: `langchain:myapp.rag:retriever?id_key=doc_id&calls=http&name=docs`. OBJECT is the
retriever (a LangChain `BaseRetriever`, whose `invoke(query)` returns Documents; a LlamaIndex
`BaseRetriever`, whose `retrieve(query)` returns NodeWithScore; a Haystack retriever component,
whose `run(query=...)` returns `{"documents": [...]}`, or a Haystack `Pipeline`, run with the
question as its inputs `input` ("query" by default; "text" for a text embedder's; "text,query" for
a hybrid pipeline's embedder and BM25 retriever) and read at the
`documents` of its one component that outputs them, or of the component named by `output`), or a
function of the evaluated Dataset that builds one over its documents. In code,
`langchain_method(retriever, ...)`, `llamaindex_method(...)` and `haystack_method(...)` return the
same method for a `module:factory` of your own.

Each returned document is the dataset document named by its metadata's `id_key` ("id" by default;
a Haystack Document's own `id` is its metadata's "id" unless its `meta` has one, so that a store
written with `Document(id=dataset_id, ...)` needs no option, and split chunks name their document
with `id_key=source_id`); a document without one fails the run in one line, and an id the dataset
does not hold is refused (retrieval.run.ranking.ranking_from_ids). Chunks of one document count
once, at the rank of the first (the best) of them: the dataset judges documents, not chunks.
LangChain returns no scores, so the order is the ranking; LlamaIndex's and Haystack's scores are
kept when every document has one, best first.

`calls` says what the retriever reaches, as for any method (retrieval.run.declaration.Calls):
"rankings" by default, which records each question's ranking with `--record` and replays it
without the retriever (whatever it reaches: a hosted vector store, a database, a model), valid
while the retriever's module (and any `sources` declared), these options and the framework's
release are unchanged (`FrameworkRetriever.ranking_code`: not this adapter's bytes, so upgrading
this package keeps the recordings unless HITS_VERSION moved); "http" when it reaches services
over HTTP, whose calls are then recorded and replayed through the retriever's own code; "none"
when it runs in process (an in-memory store over a local embedding), run for real every time.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args
from urllib.parse import parse_qsl

from retrieval.config import ConfigError
from retrieval.config.spec_objects import spec_object
from retrieval.methods.base import Calls, Context
from retrieval.run.ranking import Ranking, ranking_from_ids

if TYPE_CHECKING:
    from retrieval.config import Settings
    from retrieval.data.dataset import Dataset, Question

__all__ = [
    "HITS_VERSION",
    "ID_KEY",
    "FrameworkRetriever",
    "haystack_from_spec",
    "haystack_method",
    "langchain_from_spec",
    "langchain_method",
    "llamaindex_from_spec",
    "llamaindex_method",
]

Framework = Literal["langchain", "llamaindex", "haystack"]
ID_KEY = "id"
_OPTIONS = ("id_key", "calls", "name")
# A Haystack Pipeline's input the question is given as, and the component whose documents are read.
_HAYSTACK_OPTIONS = ("input", "output")
Hit = tuple[Mapping[str, Any], float | None, str]
# How this adapter turns a framework's hits into a ranking (ids through id_key, a document's chunks
# at its best rank, the scores kept when they never rise): a `calls = "rankings"` recording is keyed
# to it, not to this file's bytes. Bump it when that translation changes (test_frameworks holds a
# digest of the code it names, which fails until it is bumped).
HITS_VERSION = "1"
# The distribution whose release decides what a framework's retrievers return.
DISTRIBUTIONS: dict[Framework, str] = {
    "langchain": "langchain-core",
    "llamaindex": "llama-index-core",
    "haystack": "haystack-ai",
}


def _langchain_hits(method: FrameworkRetriever, retriever: Any, query: str) -> list[Hit]:
    return [(doc.metadata or {}, None, doc.page_content) for doc in retriever.invoke(query)]


def _llamaindex_hits(method: FrameworkRetriever, retriever: Any, query: str) -> list[Hit]:
    return [(hit.node.metadata or {}, hit.score, hit.node.get_content()) for hit in retriever.retrieve(query)]


def quiet_haystack() -> None:
    """Turn Haystack's usage telemetry off for this process, as HAYSTACK_TELEMETRY_ENABLED=False does.

    A running Pipeline posts an event to PostHog from a background thread: in replay that is a
    connection the gate refuses, whenever the thread flushes (another method's stage, a later test),
    and the questions of an evaluation are nobody's usage to report. The variable is read when
    Haystack is imported; if it already was, its telemetry client is dropped."""
    os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    module = sys.modules.get("haystack.telemetry._telemetry")
    if module is not None:
        module.telemetry = None  # type: ignore[attr-defined]


def _is_pipeline(retriever: Any) -> bool:
    # Pipeline.run(data) takes the inputs as one mapping; a component's run takes them as keywords.
    return hasattr(retriever, "get_component") and hasattr(retriever, "run")


def _haystack_documents(method: FrameworkRetriever, retriever: Any, query: str) -> Any:
    if not _is_pipeline(retriever):
        return retriever.run(query=query).get("documents")
    # Every input named gets the question: a hybrid pipeline's text embedder (`text`) and BM25 retriever (`query`).
    data = dict.fromkeys(method.query_input.split(","), query)
    # A pipeline returns its leaves' outputs only: a named component inside it (a retriever before a
    # joiner or a ranker) is asked for.
    outputs = retriever.run(data, include_outputs_from={method.output}) if method.output else retriever.run(data)
    found = {name: out["documents"] for name, out in outputs.items() if isinstance(out, dict) and "documents" in out}
    if method.output:
        if method.output not in found:
            raise ConfigError(
                f"method {method.name!r}: the pipeline's component {method.output!r} output no documents "
                f"(components that did: {', '.join(sorted(found)) or 'none'}); name one with ?output=COMPONENT."
            )
        return found[method.output]
    if len(found) != 1:
        raise ConfigError(
            f"method {method.name!r}: the pipeline output documents from {len(found)} components "
            f"({', '.join(sorted(found)) or 'none'}): name the retriever's with ?output=COMPONENT."
        )
    return next(iter(found.values()))


def _haystack_hits(method: FrameworkRetriever, retriever: Any, query: str) -> list[Hit]:
    documents = _haystack_documents(method, retriever, query)
    if not isinstance(documents, list):
        raise ConfigError(
            f"method {method.name!r}: the retriever answered {type(documents).__name__}, not a list of documents "
            'under "documents": give a Haystack retriever component or a pipeline ending in one.'
        )
    return [({"id": doc.id, **(doc.meta or {})}, doc.score, doc.content or "") for doc in documents]


_HITS: dict[Framework, tuple[str, Callable[[FrameworkRetriever, Any, str], list[Hit]]]] = {
    "langchain": ("invoke", _langchain_hits),
    "llamaindex": ("retrieve", _llamaindex_hits),
    "haystack": ("run", _haystack_hits),
}


class FrameworkRetriever:
    """A framework's retriever as a method: one `invoke`/`retrieve` per question, in dataset order.

    `retriever` is the retriever, or a function of the Dataset returning one (built when the
    method ranks, over the evaluated documents); `sources` are the modules that define it (a
    `calls = "rankings"` replay is valid while they are unchanged)."""

    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(
        self,
        framework: Framework,
        retriever: Any,
        *,
        name: str,
        id_key: str = ID_KEY,
        calls: Calls = "rankings",
        sources: Sequence[str] = (),
        described: str = "",
        query_input: str = "query",
        output: str = "",
    ) -> None:
        if calls not in get_args(Calls):
            raise ConfigError(f"method {name!r}: calls must be one of {', '.join(get_args(Calls))}, got {calls!r}.")
        if framework == "haystack":
            quiet_haystack()
        self.framework = framework
        self.retriever = retriever
        self.name = name
        self.id_key = id_key
        self.calls = calls
        self.sources = tuple(sources)
        self.described = described or f"{type(retriever).__module__}.{type(retriever).__qualname__}"
        self.query_input = query_input
        self.output = output

    @property
    def ranking_code(self) -> dict[str, str]:
        """What decides the rankings a `calls = "rankings"` replay gives back, beside the declared
        `sources` (the adopter's module) and the options (`config`): the framework's release and
        this adapter's translation of hits (HITS_VERSION). A framework upgraded replays nothing of
        the old release; this package upgraded keeps the recordings (retrieval.recording.ranking_cassettes)."""
        distribution = DISTRIBUTIONS[self.framework]
        try:
            release = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            release = "not installed"
        return {__name__: HITS_VERSION, distribution: release}

    @property
    def config(self) -> dict[str, str]:
        """Recorded in the baseline configuration (and digested with a ranking cassette)."""
        config = {"framework": self.framework, "retriever": self.described, "id_key": self.id_key}
        if self.framework == "haystack":
            config |= {"input": self.query_input, "output": self.output}
        return config

    def _built(self, dataset: Dataset) -> Any:
        method, _ = _HITS[self.framework]
        if hasattr(self.retriever, method):
            return self.retriever
        retriever = self.retriever(dataset)
        if not hasattr(retriever, method):
            raise ConfigError(
                f"method {self.name!r}: {self.described}(dataset) returned {type(retriever).__name__}, which has no "
                f"{method}(query): return the {self.framework} retriever."
            )
        return retriever

    def _ids(self, question: Question, hits: Sequence[Hit]) -> list[str]:
        ids: list[str] = []
        for metadata, _, content in hits:
            value = metadata.get(self.id_key)
            if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
                shown = " ".join(str(content).split())[:60]
                raise ConfigError(
                    f"method {self.name!r}: the retriever returned a document without {self.id_key!r} in its metadata "
                    f"for question {question.id} («{shown}»): give each indexed document its dataset id as "
                    f"metadata[{self.id_key!r}], or name the key holding it with ?id_key=KEY."
                )
            ids.append(str(value))
        return ids

    def rank(self, context: Context) -> list[Ranking]:
        """The retriever's documents for every question, as dataset documents best first."""
        retriever = self._built(context.dataset)
        _, hits_of = _HITS[self.framework]
        rankings = []
        for question in context.dataset.questions:
            hits = hits_of(self, retriever, question.text)
            ids = self._ids(question, hits)
            first: dict[str, int] = {}
            for n, doc in enumerate(ids):
                first.setdefault(doc, n)  # a document's best chunk
            kept = list(first)[: context.depth]
            values = _scores([hits[first[d]][1] for d in kept])
            rankings.append(ranking_from_ids(kept, context.dataset, values))
        return rankings


def _scores(scores: Sequence[float | None]) -> list[float] | None:
    """The retriever's scores when every document has one and they never rise (best first), else
    None: the order alone is the ranking."""
    if not scores or not all(isinstance(s, int | float) for s in scores):
        return None
    values = [float(s) for s in scores if s is not None]
    return values if all(a >= b for a, b in itertools.pairwise(values)) else None


def _caller() -> tuple[str, ...]:
    """The module that called `langchain_method` & co. (the adopter's factory, where the retriever
    is built), as a source: a recording replays only while it is unchanged. Nothing when that
    module cannot be found again by name (a script run as __main__)."""
    name = str(sys._getframe(2).f_globals.get("__name__", ""))
    module = sys.modules.get(name)
    found = module is not None and getattr(module, "__spec__", None) is not None and getattr(module, "__file__", None)
    return (name,) if found else ()


def langchain_method(
    retriever: Any, *, name: str, id_key: str = ID_KEY, calls: Calls = "rankings", sources: Sequence[str] = ()
) -> FrameworkRetriever:
    """A LangChain retriever (or a function of the Dataset building one) as a method; see the module.
    `sources`: the modules or project files that decide its rankings; unset, the calling module."""
    return FrameworkRetriever(
        "langchain", retriever, name=name, id_key=id_key, calls=calls, sources=tuple(sources) or _caller()
    )


def llamaindex_method(
    retriever: Any, *, name: str, id_key: str = ID_KEY, calls: Calls = "rankings", sources: Sequence[str] = ()
) -> FrameworkRetriever:
    """A LlamaIndex retriever (or a function of the Dataset building one) as a method; see the module.
    `sources`: the modules or project files that decide its rankings; unset, the calling module."""
    return FrameworkRetriever(
        "llamaindex", retriever, name=name, id_key=id_key, calls=calls, sources=tuple(sources) or _caller()
    )


def haystack_method(
    retriever: Any,
    *,
    name: str,
    id_key: str = ID_KEY,
    calls: Calls = "rankings",
    sources: Sequence[str] = (),
    input: str = "query",
    output: str = "",
) -> FrameworkRetriever:
    """A Haystack retriever component or Pipeline (or a function of the Dataset building one) as a
    method; a Pipeline is given the question as its inputs `input` (comma-separated) and read at
    `output`'s documents (unset: its one component that outputs documents); see the module.
    `sources`: the modules or project files that decide its rankings; unset, the calling module."""
    return FrameworkRetriever(
        "haystack",
        retriever,
        name=name,
        id_key=id_key,
        calls=calls,
        sources=tuple(sources) or _caller(),
        query_input=input,
        output=output,
    )


def _from_spec(framework: Framework, rest: str) -> FrameworkRetriever:
    spec = f"{framework}:{rest}"
    target, _, query = rest.partition("?")
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ConfigError(
            f"method {spec!r}: give {framework}:MODULE:OBJECT, e.g. {framework}:myapp.rag:retriever "
            "(options after ?: id_key, calls, name)."
        )
    options = dict(parse_qsl(query, keep_blank_values=True))
    known = _OPTIONS + (_HAYSTACK_OPTIONS if framework == "haystack" else ())
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"method {spec!r}: unknown option {unknown[0]!r}; known: {', '.join(known)}.")
    if framework == "haystack":
        quiet_haystack()  # before the module imports Haystack
    fix = "The module must be installed, on PYTHONPATH or at the project root."
    retriever = spec_object(spec, module_name, attr, fix)
    method = _HITS[framework][0]
    if not hasattr(retriever, method) and not callable(retriever):
        raise ConfigError(
            f"method {spec!r}: {attr} is a {type(retriever).__name__}, neither a retriever with {method}(query) nor "
            "a function of the dataset returning one."
        )
    return FrameworkRetriever(
        framework,
        retriever,
        name=options.get("name") or attr,
        id_key=options.get("id_key") or ID_KEY,
        calls=options.get("calls", "rankings"),  # type: ignore[arg-type]
        sources=(module_name,),
        described=f"{module_name}:{attr}",
        query_input=options.get("input") or "query",
        output=options.get("output", ""),
    )


def langchain_from_spec(rest: str, settings: Settings) -> FrameworkRetriever:
    """The method of `langchain:MODULE:OBJECT[?options]`."""
    return _from_spec("langchain", rest)


def llamaindex_from_spec(rest: str, settings: Settings) -> FrameworkRetriever:
    """The method of `llamaindex:MODULE:OBJECT[?options]`."""
    return _from_spec("llamaindex", rest)


def haystack_from_spec(rest: str, settings: Settings) -> FrameworkRetriever:
    """The method of `haystack:MODULE:OBJECT[?options]`."""
    return _from_spec("haystack", rest)
