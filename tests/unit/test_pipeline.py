"""Building methods from names and specs: one line naming the spec and the fix for each mistake."""

from __future__ import annotations

from dataclasses import replace

import pytest
from demo_fixture import demo_dataset

from retrieval.config import ConfigError, Profile, Settings
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.pipeline import BUILTIN_METHODS, plan

SETTINGS = Settings(profile=Profile("fixture"))


def test_builtins_are_the_method_modules() -> None:
    assert BUILTIN_METHODS == ("bm25", "enrich", "hybrid", "rerank", "rewrite", "rewrite_rerank", "vector")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "plugin_mistakes:NoArgument",
            "method 'plugin_mistakes:NoArgument': calling NoArgument(settings) failed (NoArgument.__init__() takes "
            "1 positional argument but 2 were given). The factory must take one argument, the Settings, and return "
            "the method object.",
        ),
        (
            "plugin_mistakes:Impostor",
            "method 'plugin_mistakes:Impostor' is named 'bm25', the name of a built-in method. Give it another "
            "name: its figures would replace the built-in's row.",
        ),
        (
            "plugin_mistakes:NoRank",
            "method 'plugin_mistakes:NoRank': the object NoRank(settings) returned has no 'rank'. A method needs "
            "name, requires, needs_vectors and rank(context) (see retrieval.methods.base.Method).",
        ),
        (
            "plugin_mistakes:BadCalls",
            "method 'plugin_mistakes:BadCalls': bad-calls: `calls` must be one of none, http, rankings, got 'grpc'.",
        ),
        (
            "plugin_mistakes:BareKeyVariable",
            "method 'plugin_mistakes:BareKeyVariable': bare-key-variable: `key_variables` must be a tuple of "
            "environment variable names, got 'SEARCH_KEY'.",
        ),
        (
            "plugin_mistakes:BareSource",
            "method 'plugin_mistakes:BareSource': bare-source: `sources` must be a tuple of module names or project "
            "file paths, got 'myapp.search'.",
        ),
        ("plugin_mistakes:missing", "method 'plugin_mistakes:missing': cannot import it (module 'plugin_mistakes'"),
        ("no_such_module:factory", "method 'no_such_module:factory': cannot import it (No module named"),
        (
            "bm42",
            "unknown method 'bm42': choose among bm25, enrich, hybrid, rerank, rewrite, rewrite_rerank, vector "
            "or give module:factory.",
        ),
    ],
)
def test_a_plugin_mistake_is_one_line_naming_the_spec(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan([spec], SETTINGS, replay=True)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "plugin_mistakes:too_few",
            "method 'too-few' returned 2 rankings for 3 questions: rank(context) must return one "
            "retrieval.run.ranking.Ranking per question, in dataset order.",
        ),
        (
            "plugin_mistakes:OutOfCorpus",
            "method 'out-of-corpus' ranked an index outside the corpus (0..63) or the same document twice for "
            "question q01: indices point into context.dataset.documents.",
        ),
        (
            "plugin_mistakes:OnePastTheEnd",
            "method 'one-past-the-end' ranked an index outside the corpus (0..63) or the same document twice for "
            "question q01: indices point into context.dataset.documents.",
        ),
        (
            "plugin_mistakes:TwiceInOne",
            "method 'twice-in-one' ranked an index outside the corpus (0..63) or the same document twice for "
            "question q02: indices point into context.dataset.documents.",
        ),
        (
            "plugin_mistakes:FloatIndices",
            "method 'float-indices' ranked float64 indices for question q01: indices are integers that point "
            "into context.dataset.documents.",
        ),
        (
            "plugin_mistakes:UnknownId",
            "method 'unknown-id': the engine returned 1 id(s) that dataset 'demo' does not hold ('prod-only'): "
            "leaving them out would raise the figures, so index the evaluated corpus, or export the engine's "
            "documents to the dataset's corpus.jsonl",
        ),
    ],
)
def test_a_method_breaking_the_contract_is_one_line(spec: str, message: str) -> None:
    demo = demo_dataset()
    with pytest.raises(ConfigError) as caught:
        evaluate(replace(demo, questions=demo.questions[:3]), SETTINGS, methods=[spec])
    assert str(caught.value) == message


def test_the_last_document_of_the_corpus_is_a_valid_index() -> None:
    demo = demo_dataset()
    run = evaluate(replace(demo, questions=demo.questions[:3]), SETTINGS, methods=["plugin_mistakes:LastDocument"])
    assert run.ranked_ids("last-document") == {q.id: [demo.doc_ids[-1], demo.doc_ids[0]] for q in demo.questions[:3]}


@pytest.mark.parametrize(
    ("requested", "cycle"),
    [
        (["plugin_mistakes:Chicken", "plugin_mistakes:Egg"], "chicken -> egg -> chicken"),
        (["plugin_mistakes:Egg", "plugin_mistakes:Chicken"], "egg -> chicken -> egg"),
        (["plugin_mistakes:Ouroboros"], "ouroboros -> ouroboros"),
    ],
)
def test_methods_requiring_each_other_are_one_line_naming_the_cycle(requested: list[str], cycle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan(requested, SETTINGS, replay=True)
    assert str(caught.value) == f"methods require each other in a cycle: {cycle}."


def test_a_profile_without_reranker_leaves_rerank_out_with_its_reason() -> None:
    chosen = plan(["bm25", "rerank"], SETTINGS, replay=True)
    assert chosen.wanted == ["bm25"]
    assert chosen.unavailable == {"rerank": "profile 'fixture' has no reranker (set rerank_provider and rerank_model)"}


def test_a_method_required_by_another_must_exist() -> None:
    settings = replace(SETTINGS, hybrid_inputs=("bm25", "plugin_mistakes:missing"))
    with pytest.raises(ConfigError, match="cannot import it"):
        plan(["hybrid"], settings, replay=True)


@pytest.mark.parametrize("given", ["keyed", "plugin_mistakes:KeyedInProcess"])
def test_hybrid_fuses_a_user_method_given_by_its_name_or_its_spec(given: str) -> None:
    # "To fuse your method with another, list both in hybrid_inputs": by the name of a method
    # listed after hybrid ("unknown method") or by its spec (a KeyError in hybrid), it failed.
    settings = replace(SETTINGS, hybrid_inputs=("bm25", given))
    requested = ["hybrid", "plugin_mistakes:KeyedInProcess"]
    chosen = plan(requested, settings, replay=True)
    assert [m.name for m in chosen.methods] == ["bm25", "keyed", "hybrid"]
    assert chosen.declarations["hybrid"].requires == ("bm25", "keyed")
    assert chosen.aliases == {"plugin_mistakes:KeyedInProcess": "keyed"}
    demo = demo_dataset()
    run = evaluate(replace(demo, questions=demo.questions[:3]), settings, methods=requested)
    assert run.methods == ["hybrid", "keyed"] and run.pipelines["hybrid"] == ["bm25", "keyed", "hybrid"]
    # The user method ranks document 0 first for every question: fused, it reaches hybrid's top.
    assert all(demo.doc_ids[0] in ids[:2] for ids in run.ranked_ids("hybrid").values())
    assert run.config["hybrid.inputs"] == ["bm25", given]


def test_a_requirement_naming_no_built_method_is_one_line() -> None:
    settings = replace(SETTINGS, hybrid_inputs=("bm25", "title-overlap"))
    with pytest.raises(ConfigError) as caught:
        plan(["hybrid"], settings, replay=True)
    assert str(caught.value) == (
        "unknown method 'title-overlap': choose among bm25, enrich, hybrid, rerank, rewrite, rewrite_rerank, vector "
        "or give module:factory."
    )
