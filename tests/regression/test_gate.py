"""The retrieval-quality gate: every baseline figure must hold, on the committed cassettes.

One test per (method, metric) of the selected profile's baseline, so a red check
names the figure that fell. `pytest -m regression` runs this alone.
"""

from __future__ import annotations

import pytest

from retrieval.baseline import load_baseline
from retrieval.config import load_settings
from retrieval.gate import BASELINE_PATH, GateResult

pytestmark = pytest.mark.regression


def _gated_figures(config: pytest.Config) -> list[tuple[str, str]]:
    settings = load_settings(".", {"profile": config.getoption("--profile")})
    entry = load_baseline(BASELINE_PATH)["profiles"].get(settings.profile.name) or {}
    recall = f"recall@{settings.k}"
    figures = []
    for method, values in sorted(entry.get("methods", {}).items()):
        figures += [(method, recall), (method, "mrr")]
        figures += [(method, f"{recall}[{t}]") for t in sorted(values.get("by_type", {}))]
    return figures


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "figure" in metafunc.fixturenames:
        figures = _gated_figures(metafunc.config)
        metafunc.parametrize("figure", figures, ids=[f"{m}-{f}" for m, f in figures])


def test_dataset_and_configuration_match_the_baseline(gate: GateResult) -> None:
    assert gate.problem is None, gate.problem


def test_figure_holds(gate: GateResult, figure: tuple[str, str]) -> None:
    if gate.problem:
        pytest.skip("not comparable with the baseline: see test_dataset_and_configuration_match_the_baseline")
    method, metric = figure
    check = next((c for c in gate.checks if (c.method, c.metric) == figure), None)
    assert check is not None, (
        f"the baseline gates {method} {metric} but this run did not produce it "
        f"(methods run: {gate.run.methods}; skipped: {gate.run.skipped})"
    )
    assert check.ok, check.message()


def test_every_evaluated_method_is_gated(gate: GateResult) -> None:
    gated = set((gate.entry or {}).get("methods", {}))
    missing = [m for m in gate.run.methods if m not in gated]
    assert not missing, f"{missing} ran but have no baseline figure: add them with `pytest --update-baseline`"


def test_rerank_is_covered_where_recorded(gate: GateResult) -> None:
    if "rerank" in gate.run.skipped:
        pytest.skip(f"rerank not gated for profile {gate.profile!r}: {gate.run.skipped['rerank']}")
    assert "rerank" in gate.run.methods
