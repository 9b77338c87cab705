"""The gate's item names and what a stopped comparison gives (retrieval.gate.verdicts, pure). The
verdicts of real evaluations are tested through the plugin and the CLI (test_gate_cli.py)."""

from __future__ import annotations

import pytest

from retrieval.gate.verdicts import GATE, INTEGRITY, Verdict, figure_item, item_id, item_names, judge


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


def test_a_refs_figures_are_items_of_their_own_named_for_the_ref() -> None:
    # --retrieval-baseline-ref origin/main: the same figure against the base branch is another check.
    assert figure_item("bm25 recall@5[paraphrase]", "origin/main") == "bm25-recall@5-paraphrase-against-origin-main"
    assert figure_item("bm25 mrr") == "bm25-mrr"
    names = item_names(["bm25"], ["bm25 mrr"], ["bm25"], "origin/main", ["bm25 mrr", "bm25 degraded"])
    against = ["bm25-mrr-against-origin-main", "bm25-degraded-against-origin-main"]
    assert names == [GATE, *INTEGRITY, "bm25-mrr", *against, "bm25-top-10"]
    assert item_names(["bm25"], ["bm25 mrr"], [], None, ["bm25 mrr"]) == [GATE, *INTEGRITY, "bm25-mrr", "bm25-top-10"]


def test_a_stopped_comparison_fails_the_gate_item_and_leaves_no_item_passing() -> None:
    names = item_names(["bm25"], ["bm25 mrr"], [])
    verdicts = judge(None, "CassetteError: no cassette x.json: record it", names)
    assert verdicts[0] == Verdict(GATE, "problem", "CassetteError: no cassette x.json: record it")
    assert [v.name for v in verdicts] == names
    assert all(v.failure == "not compared: the comparison stopped before it (gate says why)" for v in verdicts[1:])
    assert judge(None, None, [GATE])[0].failure == "the gate produced no result"
