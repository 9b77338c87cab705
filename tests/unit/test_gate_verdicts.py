"""The gate's item names and what a stopped comparison gives (retrieval.gate.verdicts, pure). The
verdicts of real evaluations are tested through the plugin and the CLI (test_gate_cli.py)."""

from __future__ import annotations

import pytest

from retrieval.gate.verdicts import GATE, INTEGRITY, against_item, item_id, item_names, verdicts_of
from retrieval.report.verdict import GateVerdict, ItemVerdict


@pytest.mark.parametrize(
    ("figure", "expected"),
    [
        ("bm25 recall@5[paraphrase]", "bm25-recall@5-paraphrase"),
        ("hybrid mrr", "hybrid-mrr"),
        ("my method top 10", "my-method-top-10"),
        ("x recall@5[type with 'quotes' & spaces]", "x-recall@5-type-with-quotes-spaces"),
        ("[]", GATE),
    ],
)
def test_an_item_id_holds_nothing_a_shell_or_pytest_rewrites(figure: str, expected: str) -> None:
    assert item_id(figure) == expected


def test_items_are_named_from_the_configuration_the_baseline_and_the_snapshots() -> None:
    names = item_names(["bm25", "mymodule:factory"], ["bm25 mrr", "bm25 recall@5[exact]"], ["bm25", "vector"])
    assert names == [GATE, *INTEGRITY, "bm25-mrr", "bm25-recall@5-exact", "bm25-top-10", "vector-top-10"]


def test_a_figure_both_baselines_gate_is_one_item_and_the_ref_has_an_item_of_its_own() -> None:
    # --retrieval-baseline-ref origin/main: the same figure against the base branch is the same item.
    assert against_item("origin/main") == "against-origin-main"
    names = item_names(["bm25"], ["bm25 mrr"], ["bm25"], "origin/main", ["bm25 mrr", "bm25 degraded"])
    assert names == [GATE, *INTEGRITY, "against-origin-main", "bm25-mrr", "bm25-degraded", "bm25-top-10"]
    assert item_names(["bm25"], ["bm25 mrr"], [], None, ["bm25 mrr"]) == [GATE, *INTEGRITY, "bm25-mrr", "bm25-top-10"]


def test_a_stopped_comparison_fails_the_gate_item_and_leaves_no_item_passing() -> None:
    names = item_names(["bm25"], ["bm25 mrr"], [])
    verdict = verdicts_of(None, "CassetteError: no cassette x.json: record it\nmore", names, profile="local")
    assert verdict.items[0] == ItemVerdict(GATE, "problem", "CassetteError: no cassette x.json: record it\nmore")
    assert [v.name for v in verdict.items] == names
    assert all(v.failure == "not compared: the comparison stopped before it (gate says why)" for v in verdict.items[1:])
    # The summary's first line: what stopped it, its first line alone.
    assert (verdict.problem, verdict.where, verdict.passed) == (
        "CassetteError: no cassette x.json: record it",
        "profile local",
        False,
    )
    assert verdicts_of(None, None, [GATE]).items[0].failure == "the gate produced no result"


def test_an_item_without_a_verdict_fails() -> None:
    verdict = GateVerdict("profile local", (ItemVerdict(GATE, "problem"),))
    assert verdict.item("bm25-mrr") == ItemVerdict(
        "bm25-mrr", "problem", "no verdict for this item: the gate compared nothing for bm25-mrr"
    )
    assert verdict.item(GATE).ok
