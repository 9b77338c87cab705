"""LangChain, LlamaIndex and Haystack retrievers gated as methods, with the real libraries:
langchain-core's InMemoryVectorStore retriever, llama-index-core's VectorStoreIndex retriever and
haystack-ai's InMemoryEmbeddingRetriever in a Pipeline (and its BM25 retriever as a component) over
a FIXTURE embedding (framework_fixtures.py), no network. Checked: the ranking they give is the dataset's
documents in the order the store ranks them (equal to a cosine computed here), chunks count once,
a document without an id fails in one line, `calls` as declared, and a recorded ranking replayed
without the retriever."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from demo_fixture import demo_dataset, demo_settings

from retrieval import haystack_method  # the public API's name
from retrieval.adapters.frameworks import langchain_method
from retrieval.config import ConfigError
from retrieval.config.setting_values import SPEC_SCHEMES
from retrieval.data.dataset import Dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.pipeline import SCHEMES
from retrieval.measures.metrics import score_run
from retrieval.methods.base import Context
from retrieval.providers.base import ReplayMissError

LANGCHAIN = "langchain:framework_fixtures:langchain_retriever"
LLAMAINDEX = "llamaindex:framework_fixtures:llamaindex_retriever"
# The fixture pipeline starts with a text embedder, whose input is `text`.
HAYSTACK = "haystack:framework_fixtures:haystack_retriever?input=text"


def fixtures() -> ModuleType:
    """framework_fixtures.py, imported at first use: LangChain, LlamaIndex and Haystack take a second
    or more to import, which collecting the suite (in each pytest-xdist worker) need not pay."""
    import framework_fixtures

    return framework_fixtures


def with_options(spec: str, options: str) -> str:
    return f"{spec}{'&' if '?' in spec else '?'}{options}"


def cosines(dataset: Dataset) -> dict[str, dict[str, float]]:
    """Each question's cosine with every document over the fixture vectors, computed here."""
    docs = np.array([fixtures().fixture_embedding(d.content) for d in dataset.documents])
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    found = {}
    for question in dataset.questions:
        query = np.array(fixtures().fixture_embedding(question.text))
        scores = docs @ (query / np.linalg.norm(query))
        found[question.id] = {d.id: float(s) for d, s in zip(dataset.documents, scores, strict=True)}
    return found


def assert_cosine_top(ranked: dict[str, list[str]], dataset: Dataset) -> None:
    """Each question's ranking is TOP_K of the dataset's documents best first by cosine (documents
    of equal cosine in any order: each store breaks such ties its own way)."""
    for qid, scores in cosines(dataset).items():
        best = sorted(scores.values(), reverse=True)[: fixtures().TOP_K]
        assert len(set(ranked[qid])) == fixtures().TOP_K
        assert [scores[d] for d in ranked[qid]] == pytest.approx(best, abs=1e-9), qid


def test_the_schemes_the_configuration_accepts_are_those_the_pipeline_builds() -> None:
    assert set(SCHEMES) == set(SPEC_SCHEMES)


@pytest.mark.parametrize("spec", [LANGCHAIN, LLAMAINDEX, HAYSTACK])
def test_a_framework_retriever_ranks_the_datasets_documents(spec: str) -> None:
    dataset = demo_dataset()
    run = evaluate(dataset, demo_settings(), mode="replay", methods=[with_options(spec, "calls=none&name=framework")])
    assert run.methods == ["framework"]
    assert_cosine_top(run.ranked_ids("framework"), dataset)
    declared = run.declared("framework")
    assert (declared.calls, declared.first_stage) == ("none", True)
    framework = spec.split(":")[0]
    assert run.config["framework.framework"] == framework
    assert run.config["framework.retriever"] == spec.split(":", 1)[1].partition("?")[0]
    assert run.config["framework.id_key"] == "id"
    if framework == "haystack":  # what reaches the pipeline is configuration too
        assert (run.config["framework.input"], run.config["framework.output"]) == ("text", "")
    # LlamaIndex's and Haystack's scores are kept (best first); LangChain gives none, so the order is scored.
    scores = run.results[0].methods["framework"].scores
    if framework != "langchain":
        assert scores != list(range(fixtures().TOP_K, 0, -1)) and scores == sorted(scores, reverse=True)
    else:
        assert scores == [float(s) for s in range(fixtures().TOP_K, 0, -1)]
    assert 0 < score_run(run)["framework"].overall["recall@5"] < 1


def test_the_frameworks_give_the_same_figures_over_the_same_vectors() -> None:
    methods = [with_options(spec, "calls=none") for spec in (LANGCHAIN, LLAMAINDEX, HAYSTACK)]
    run = evaluate(demo_dataset(), demo_settings(), mode="replay", methods=methods)
    assert run.methods == ["langchain_retriever", "llamaindex_retriever", "haystack_retriever"]
    ours = score_run(run)
    assert ours["langchain_retriever"].per_question == ours["llamaindex_retriever"].per_question
    assert ours["langchain_retriever"].per_question == ours["haystack_retriever"].per_question
    for method in run.methods:
        assert_cosine_top(run.ranked_ids(method), demo_dataset())


def test_chunks_of_one_document_count_once_at_their_best_rank() -> None:
    dataset = demo_dataset()
    method = langchain_method(
        lambda d: fixtures().langchain_retriever(d, parts=3),
        name="chunked",
        calls="none",
        sources=("framework_fixtures",),
    )
    context = Context(dataset=dataset, depth=1000)
    rankings = method.rank(context)
    retriever = fixtures().langchain_retriever(dataset, parts=3)
    for question, ranking in zip(dataset.questions, rankings, strict=True):
        hits = [doc.metadata["id"] for doc in retriever.invoke(question.text)]
        expected = list(dict.fromkeys(hits))
        assert [dataset.documents[i].id for i in ranking.indices] == expected
        assert len(expected) < len(hits) or len(set(hits)) == len(hits)
    assert any(len(r) < fixtures().TOP_K for r in rankings)  # some questions met one document's chunks twice


def test_a_returned_document_without_an_id_fails_in_one_line() -> None:
    with pytest.raises(ConfigError) as caught:
        evaluate(
            demo_dataset(),
            demo_settings(),
            mode="replay",
            methods=["langchain:framework_fixtures:langchain_without_ids?calls=none"],
        )
    message = str(caught.value)
    assert message.startswith(
        "method 'langchain_without_ids': the retriever returned a document without 'id' in its metadata for "
        "question q01 («"
    )
    assert message.endswith(
        "give each indexed document its dataset id as metadata['id'], or name the key holding it with ?id_key=KEY."
    )
    assert "\n" not in message
    # Naming the key the documents hold fixes it.
    run = evaluate(
        demo_dataset(),
        demo_settings(),
        mode="replay",
        methods=["langchain:framework_fixtures:langchain_without_ids?calls=none&id_key=source&name=fixed"],
    )
    assert_cosine_top(run.ranked_ids("fixed"), demo_dataset())


def test_an_id_the_dataset_does_not_hold_is_refused() -> None:
    demo = demo_dataset()
    fewer = replace(demo, documents=demo.documents[1:])  # the retriever still indexes the first one
    method = langchain_method(lambda d: fixtures().langchain_retriever(demo), name="stale", calls="none")
    with pytest.raises(ConfigError, match=r"method 'stale': the engine returned 1 id\(s\) that dataset"):
        evaluate(fewer, demo_settings(), mode="replay", extra=[method], methods=[])


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("langchain:framework_fixtures", "give langchain:MODULE:OBJECT, e.g. langchain:myapp.rag:retriever"),
        (f"{LANGCHAIN}?k=5", "unknown option 'k'; known: id_key, calls, name"),
        (f"{LANGCHAIN}?input=text", "unknown option 'input'; known: id_key, calls, name"),
        (f"{HAYSTACK}&k=5", "unknown option 'k'; known: id_key, calls, name, input, output"),
        (f"{LANGCHAIN}?calls=sql", "calls must be one of none, http, rankings, got 'sql'"),
        ("langchain:framework_fixtures:nothing", "cannot import it"),
        ("llamaindex:framework_fixtures:TOP_K", "TOP_K is a int, neither a retriever with retrieve(query)"),
        (f"{LANGCHAIN}?name=a/b", "`channel` must be a plain file name, got 'a/b'"),
    ],
)
def test_a_bad_spec_is_one_line(spec: str, says: str) -> None:
    with pytest.raises(ConfigError, match="method ") as caught:
        evaluate(demo_dataset(), demo_settings(), mode="replay", methods=[spec])
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_recorded_ranking_replays_without_the_retriever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import framework_fixtures

    settings = demo_settings(cassettes=str(tmp_path / "cassettes"), cache=str(tmp_path / "cache"))
    dataset = replace(demo_dataset(), questions=demo_dataset().questions[:4])
    recorded = evaluate(dataset, settings, mode="record", methods=[LLAMAINDEX])  # calls = "rankings", the default
    assert recorded.declared("llamaindex_retriever").calls == "rankings"
    assert (tmp_path / "cassettes" / "local" / "llamaindex_retriever.rankings.json").is_file()

    def unreachable(dataset: Dataset) -> None:
        raise AssertionError("replay ran the retriever")

    # The retriever is never built in replay; its module's digest is checked, not its code run.
    monkeypatch.setattr(framework_fixtures, "llamaindex_retriever", unreachable)
    replayed = evaluate(dataset, settings, mode="replay", methods=[LLAMAINDEX])
    assert replayed.ranked_ids("llamaindex_retriever") == recorded.ranked_ids("llamaindex_retriever")
    replayed_scores = replayed.results[0].methods["llamaindex_retriever"].scores
    assert replayed_scores == pytest.approx(recorded.results[0].methods["llamaindex_retriever"].scores, abs=1e-9)


def _recorded(tmp_path: Path, spec: str) -> tuple[Any, Any, Any]:
    """A recording of `spec` (calls = "rankings", the default) on four questions: (settings, dataset, run)."""
    settings = demo_settings(cassettes=str(tmp_path / "cassettes"), cache=str(tmp_path / "cache"))
    dataset = replace(demo_dataset(), questions=demo_dataset().questions[:4])
    return settings, dataset, evaluate(dataset, settings, mode="record", methods=[spec])


def test_a_recording_outlives_an_upgrade_of_this_package_that_keeps_its_translation_of_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval.adapters import frameworks
    from retrieval.recording import ranking_cassettes

    settings, dataset, recorded = _recorded(tmp_path, LLAMAINDEX)
    adapter = Path(frameworks.__file__).resolve()
    digest = ranking_cassettes._digest
    # The package upgraded: the adapter's file has other bytes, HITS_VERSION and the framework are the same.
    monkeypatch.setattr(
        ranking_cassettes, "_digest", lambda path: "0" * 16 if Path(path).resolve() == adapter else digest(path)
    )
    replayed = evaluate(dataset, settings, mode="replay", methods=[LLAMAINDEX])
    assert replayed.ranked_ids("llamaindex_retriever") == recorded.ranked_ids("llamaindex_retriever")


def test_a_recording_replays_nothing_of_another_framework_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    settings, dataset, _ = _recorded(tmp_path, LLAMAINDEX)
    release = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda d: "99.0" if d == "llama-index-core" else release(d))
    with pytest.raises(ReplayMissError) as caught:
        evaluate(dataset, settings, mode="replay", methods=[LLAMAINDEX])
    assert "was recorded from another version of the method's code (llama-index-core changed since)" in str(
        caught.value
    )


ADOPTER = """
from framework_fixtures import llamaindex_retriever

from retrieval import llamaindex_method


def factory(settings):
    return llamaindex_method(llamaindex_retriever, name="docs")
"""


def test_a_framework_method_built_in_code_replays_only_while_the_module_building_it_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "adopter_rag.py"
    module.write_text(ADOPTER)
    monkeypatch.syspath_prepend(str(tmp_path))
    settings, dataset, recorded = _recorded(tmp_path, "adopter_rag:factory")
    assert recorded.declared("docs").sources == ("adopter_rag",)  # the module calling llamaindex_method
    assert evaluate(dataset, settings, mode="replay", methods=["adopter_rag:factory"]).ranked_ids("docs") == (
        recorded.ranked_ids("docs")
    )
    module.write_text(ADOPTER.replace('name="docs"', 'name="docs", id_key="id"') + "# top_k raised\n")
    with pytest.raises(ReplayMissError) as caught:
        evaluate(dataset, settings, mode="replay", methods=["adopter_rag:factory"])
    assert "(adopter_rag changed since)" in str(caught.value)


def test_the_adapters_translation_of_hits_is_versioned() -> None:
    # A digest of the code that turns hits into a ranking: when it changes, bump HITS_VERSION (the
    # recordings of every adopter then replay nothing of the old translation) and this digest.
    import hashlib
    import inspect

    from retrieval.adapters import frameworks

    parts: list[Callable[..., Any]] = [
        frameworks.FrameworkRetriever._ids,
        frameworks.FrameworkRetriever.rank,
        frameworks._scores,
        frameworks._langchain_hits,
        frameworks._llamaindex_hits,
        frameworks._haystack_hits,
        frameworks._haystack_documents,
    ]
    digest = hashlib.sha256("".join(inspect.getsource(p) for p in parts).encode()).hexdigest()[:16]
    assert (frameworks.HITS_VERSION, digest) == ("1", "ecda8bbbe392103d")


def test_a_haystack_component_is_run_with_the_question_as_its_query() -> None:
    dataset = demo_dataset()
    run = evaluate(
        dataset, demo_settings(), mode="replay", methods=["haystack:framework_fixtures:haystack_bm25?calls=none"]
    )
    retriever = fixtures().haystack_bm25(dataset)
    for result in run.results:
        found = retriever.run(query=result.question.text)["documents"]
        assert result.methods["haystack_bm25"].ids[: fixtures().TOP_K] == [doc.id for doc in found]
        assert result.methods["haystack_bm25"].scores[: len(found)] == pytest.approx([doc.score for doc in found])
    assert 0 < score_run(run)["haystack_bm25"].overall["recall@5"] < 1


def test_haystack_chunks_name_their_document_through_source_id() -> None:
    dataset = demo_dataset()
    chunked = "haystack:framework_fixtures:haystack_chunked?input=text&calls=none"
    # A chunk's own id is Haystack's hash of its content: not a document of the dataset.
    with pytest.raises(ConfigError, match=r"method 'haystack_chunked': the engine returned \d+ id\(s\) that dataset"):
        evaluate(dataset, demo_settings(), mode="replay", methods=[chunked])
    run = evaluate(dataset, demo_settings(), mode="replay", methods=[f"{chunked}&id_key=source_id"])
    ranked = run.ranked_ids("haystack_chunked")
    assert all(len(set(ids)) == len(ids) for ids in ranked.values())
    assert any(len(ids) < fixtures().TOP_K for ids in ranked.values())  # some questions met one document's chunks twice


def test_a_pipeline_with_two_document_outputs_must_name_its_retriever() -> None:
    spec = "haystack:framework_fixtures:haystack_two_outputs?calls=none"
    # Both components are given the question: the embedder as `text`, the BM25 retriever as `query`.
    with pytest.raises(ConfigError) as caught:
        evaluate(demo_dataset(), demo_settings(), mode="replay", methods=[f"{spec}&input=text,query"])
    assert str(caught.value) == (
        "method 'haystack_two_outputs': the pipeline output documents from 2 components (bm25, retriever): "
        "name the retriever's with ?output=COMPONENT."
    )
    run = evaluate(
        demo_dataset(), demo_settings(), mode="replay", methods=[f"{spec}&input=text,query&output=retriever"]
    )
    assert_cosine_top(run.ranked_ids("haystack_two_outputs"), demo_dataset())
    with pytest.raises(ConfigError, match="component 'ranker' output no documents"):
        evaluate(demo_dataset(), demo_settings(), mode="replay", methods=[f"{spec}&input=text,query&output=ranker"])


def test_a_haystack_method_turns_haystack_telemetry_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # A running Pipeline posts to PostHog from a thread: in replay, a connection the gate refuses.
    import haystack.telemetry._telemetry as telemetry

    monkeypatch.setattr(telemetry, "telemetry", object())  # as imported without the variable
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "true")
    haystack_method(fixtures().haystack_bm25, name="keyword", calls="none")
    assert telemetry.telemetry is None
    assert os.environ["HAYSTACK_TELEMETRY_ENABLED"] == "False"


def test_a_component_inside_a_pipeline_is_read_when_named() -> None:
    spec = "haystack:framework_fixtures:haystack_reversed?calls=none&input=text"
    leaf = evaluate(demo_dataset(), demo_settings(), mode="replay", methods=[spec])
    inner = evaluate(demo_dataset(), demo_settings(), mode="replay", methods=[f"{spec}&output=retriever"])
    assert_cosine_top(inner.ranked_ids("haystack_reversed"), demo_dataset())
    for qid, ids in inner.ranked_ids("haystack_reversed").items():
        assert leaf.ranked_ids("haystack_reversed")[qid] == ids[::-1]  # the leaf's order, by default
