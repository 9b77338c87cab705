"""The README cannot go stale: its demo table is the committed baseline, its two
fresh-machine commands are the documented ones, `.ci/run` runs the test command, and its
suite figures are a measurement of this suite (scripts/suite_figures.py)."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest
from script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEMO_PAGE = ROOT / "docs" / "demo.md"

EVALUATE_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && python -m retrieval"
TEST_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && pytest -n auto"
# The slow end-to-end cases the default run leaves out (conftest.py), in the venv the test command made.
SLOW_COMMAND = "pytest -m slow -n auto"


@pytest.fixture(scope="module")
def readme_table() -> ModuleType:
    return load_script("readme_table")


@pytest.fixture(scope="module")
def suite_figures() -> ModuleType:
    return load_script("suite_figures")


def _shell_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```(?:sh|bash|console)\n(.*?)```", text, re.S)]


@pytest.mark.parametrize("page", [README, DEMO_PAGE], ids=lambda p: p.name)
def test_demo_table_is_the_committed_baseline(readme_table: ModuleType, page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    start, end = text.find(readme_table.START), text.find(readme_table.END)
    assert 0 <= start < end, f"{page.name} lost its demo-table markers"
    assert text[start : end + len(readme_table.END)] == readme_table.render_block(ROOT), (
        f"{page.name}'s demo table differs from baselines/metrics.json: run `python scripts/readme_table.py`"
    )


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "performance.md"], ids=lambda p: p.name)
def test_the_suite_figures_are_the_measurement(suite_figures: ModuleType, page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    start, end = text.find(suite_figures.START), text.find(suite_figures.END)
    assert 0 <= start < end, f"{page.name} lost its suite-figures markers"
    assert text[start : end + len(suite_figures.END)] == suite_figures.render_block(suite_figures.read_figures()), (
        f"{page.name}'s suite figures differ from docs/suite-figures.json: run `python scripts/suite_figures.py`"
    )


def _whole_default_suite(config: pytest.Config) -> bool:
    """This session runs what `.ci/run` runs: the default test paths, nothing deselected."""
    option = config.option
    return (
        config.args_source is pytest.Config.ArgsSource.TESTPATHS
        and not option.keyword
        and not option.markexpr
        and not getattr(option, "deselect", None)
        and not getattr(option, "lf", False)
        and not getattr(option, "ignore", None)
    )


def test_the_readme_test_count_is_this_suites(suite_figures: ModuleType, request: pytest.FixtureRequest) -> None:
    measured = suite_figures.read_figures()["tests"]
    if not _whole_default_suite(request.config):
        pytest.skip("the README's count is of the whole default suite; this session selected part of it")
    assert request.session.testscollected == measured, (
        f"the README's figures were measured on {measured} tests, this suite has {request.session.testscollected}: "
        "measure again with `python scripts/suite_figures.py measure` (a fresh clone; about 4 minutes)"
    )


def test_the_suite_summary_is_read_as_pytest_prints_it(suite_figures: ModuleType) -> None:
    output = "....\n======= 1560 passed, 6 skipped, 3 warnings in 116.32s (0:01:56) =======\n"
    summary = suite_figures.parse_summary(output)
    assert summary == {
        "counts": {"passed": 1560, "skipped": 6, "warning": 3},
        "seconds": 116.32,
        "line": "1560 passed, 6 skipped, 3 warnings in 116.32s (0:01:56)",
    }
    assert suite_figures.collected(summary["counts"]) == 1566
    # .ci/run's two sessions: the default run, then the slow set.
    both = suite_figures.parse_summaries(output + "...\n=== 64 passed, 2060 deselected in 80.10s (0:01:20) ===\n")
    assert [(s["counts"], s["seconds"]) for s in both] == [
        ({"passed": 1560, "skipped": 6, "warning": 3}, 116.32),
        ({"passed": 64, "deselected": 2060}, 80.1),
    ]
    assert suite_figures.collected(both[1]["counts"]) == 64
    quiet = suite_figures.parse_summary("....\n35 passed, 1596 deselected in 29.31s\n")  # under -q
    assert quiet["counts"] == {"passed": 35, "deselected": 1596} and quiet["seconds"] == 29.31
    assert suite_figures.collected(quiet["counts"]) == 35


def test_the_machine_is_called_idle_only_when_other_work_took_little_of_it(suite_figures: ModuleType) -> None:
    measured = suite_figures.read_figures()
    run = {**measured, "total_seconds": 100.0, "machine": {**measured["machine"], "cores": 2}}
    idle = {**run, "other_cpu_seconds": 6.0, "stolen_cpu_seconds": 3.0}
    shared = {**run, "other_cpu_seconds": 6.0, "stolen_cpu_seconds": 4.0}
    assert (suite_figures.others_share(idle), suite_figures.others_share(shared)) == (0.045, 0.05)
    assert "an idle machine (4% of its cores went elsewhere)." in suite_figures.render_block(idle)
    assert "a shared machine (5% of its cores went elsewhere)" in suite_figures.render_block(shared)


def test_table_follows_the_seed_layout(readme_table: ModuleType) -> None:
    baseline = {
        "profiles": {
            "local": {
                "dataset": "demo",
                "config": {
                    "k": 5,
                    "hybrid.rrf_k": 60,
                    "candidates": 20,
                    "embedding_model": "e5",
                    "embedding_provider": "openai",
                    "dimensions": 384,
                },
                "methods": {
                    m: {
                        "recall@5": r,
                        "mrr": 0.3333,
                        "by_type": {"mixte": {"recall@5": 1.0}, "paraphrase": {"recall@5": 0.125}},
                        "reciprocal_ranks": {"q1": 1.0, "q2": 0.0},
                    }
                    for m, r in (("vector", 0.855), ("bm25", 0.6))
                },
            }
        }
    }
    table = readme_table.render_table(baseline, "local", ["paraphrase", "mixte"])
    lines = table.splitlines()
    assert lines[0] == "| Method | Recall@5 | MRR | Recall@5 paraphrase | Recall@5 mixte |"
    assert lines[2] == "| bm25 | 0.60 | 0.33 | 0.12 | 1.00 |"
    assert lines[3].startswith("| vector | 0.8")
    assert "(2 questions)" in table and "Method settings: `hybrid.rrf_k` = 60." in table


def test_the_two_commands_are_in_the_readme() -> None:
    blocks = _shell_blocks(README.read_text(encoding="utf-8"))
    assert EVALUATE_COMMAND in blocks, "README.md must give the install-and-evaluate command in its own block"
    assert TEST_COMMAND in blocks, "README.md must give the install-and-test command in its own block"


def test_ci_runs_the_readme_test_command_then_the_slow_set() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert TEST_COMMAND in lines, ".ci/run must run exactly the README's test command"
    assert SLOW_COMMAND in lines[lines.index(TEST_COMMAND) + 1 :], ".ci/run must run the slow set after it"
    assert SLOW_COMMAND in _shell_blocks(README.read_text(encoding="utf-8")), (
        f"README.md must say how to run the slow set: `{SLOW_COMMAND}` in a shell block of its own"
    )
