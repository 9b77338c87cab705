"""A method's optional prepare(context): called before anything ranks, its work stopped when the
methods have run (or failed), and the method ranked when nothing else can (the others overlap it)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from demo_fixture import demo_dataset
from prepared_methods import EVENTS

from retrieval.config import Profile, Settings
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.method_run import ranks_here
from retrieval.evaluation.pipeline import plan
from retrieval.run.declaration import Declaration

SETTINGS = Settings(profile=Profile("fixture"))


@pytest.fixture(autouse=True)
def events() -> None:
    EVENTS.clear()


def _evaluate(methods: list[str]) -> None:
    demo = demo_dataset()
    evaluate(replace(demo, questions=demo.questions[:2]), SETTINGS, methods=methods)


def test_a_prepared_method_ranks_after_the_others_and_is_stopped_at_the_end() -> None:
    _evaluate(["prepared_methods:Early", "prepared_methods:Plain"])
    assert EVENTS == ["prepare early", "rank plain", "rank early", "stop early"]


def test_alone_a_method_is_not_prepared_as_nothing_would_overlap_its_work() -> None:
    _evaluate(["prepared_methods:Early"])
    assert EVENTS == ["rank early"]


def test_a_method_requiring_a_prepared_one_still_ranks_after_it() -> None:
    _evaluate(["prepared_methods:AfterEarly", "prepared_methods:Plain"])
    assert EVENTS == ["prepare early", "rank plain", "rank early", "rank after-early", "stop early"]


def test_the_work_is_stopped_when_another_method_fails() -> None:
    with pytest.raises(RuntimeError, match="the search service is down"):
        _evaluate(["prepared_methods:Early", "prepared_methods:Failing"])
    assert EVENTS == ["prepare early", "stop early"]


def test_order_keeps_dependencies_and_the_plan_order_otherwise() -> None:
    chosen = plan(["prepared_methods:AfterEarly", "prepared_methods:Plain"], SETTINGS, replay=True)
    assert [m.name for m in chosen.methods] == ["early", "after-early", "plain"]
    assert [m.name for m in chosen.order()] == ["early", "after-early", "plain"]
    assert [m.name for m in chosen.order(late=["early"])] == ["plain", "early", "after-early"]
    assert [m.name for m in chosen.order(late=["early", "plain"])] == ["early", "after-early", "plain"]


def test_a_replayed_ranking_cassette_stands_for_rank_so_nothing_is_prepared() -> None:
    rankings = Declaration(name="engine", calls="rankings")
    assert not ranks_here(rankings, "replay")
    assert ranks_here(rankings, "record") and ranks_here(rankings, "live")
    assert ranks_here(Declaration(name="bm25"), "replay")
