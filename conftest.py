"""pytest options and fixtures for the retrieval gate. The logic lives in retrieval.gate.

pytest -m regression                 replay the cassettes, compare with baselines/metrics.json
pytest --record [--profile NAME]     re-record the cassettes with live calls, then compare
pytest --update-baseline             write the current figures as the baseline (never lower
                                     one unless --allow-regression is also given)
"""

from __future__ import annotations

import pytest

from retrieval.baseline import BaselineError
from retrieval.config import ConfigError, load_settings
from retrieval.dataset import DatasetError
from retrieval.gate import GateResult, accept, run_gate, skip_reason
from retrieval.providers import required_key
from retrieval.providers.base import ProviderError
from retrieval.recording import CassetteError

pytest_plugins = ["pytester"]  # tests run the gate itself on temporary copies

BASELINE_DIFF = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("retrieval", "retrieval-quality gate")
    group.addoption("--record", action="store_true", help="re-record cassettes with live model calls")
    group.addoption("--profile", default=None, help="profile to gate (default: the configured one, 'local')")
    group.addoption("--update-baseline", action="store_true", help="write the current figures as the baseline")
    group.addoption("--allow-regression", action="store_true", help="with --update-baseline: accept lower figures")


def pytest_configure(config: pytest.Config) -> None:
    # A recording that cannot authenticate must stop before the first call, naming the variable.
    if config.getoption("--record"):
        settings = load_settings(".", {"profile": config.getoption("--profile")})
        missing = required_key(settings.profile)
        if missing:
            raise pytest.UsageError(f"--record with profile {settings.profile.name!r} needs {missing}; it is not set.")


@pytest.fixture(scope="session")
def gate(request: pytest.FixtureRequest) -> GateResult:
    """The profile's evaluation compared with its baseline (computed once per session)."""
    options = request.config.option
    settings = load_settings(".", {"profile": options.profile})
    mode = "record" if options.record else "replay"
    reason = skip_reason(settings, mode)
    if reason:
        pytest.skip(reason)
    try:
        result = run_gate(settings, mode)
    except (ProviderError, CassetteError, DatasetError, ConfigError, BaselineError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    else:
        problem = None
    if problem:  # failed outside the except block: a chained traceback through vcrpy would bury the message
        pytest.fail(problem, pytrace=False)
    if options.update_baseline:
        try:
            diff = accept(result, allow_regression=options.allow_regression)
        except BaselineError as exc:
            pytest.fail(str(exc), pytrace=False)
        # Fixture output is captured; the summary hook prints the diff after the tests.
        request.config.stash[BASELINE_DIFF] = diff
    return result


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    diff = config.stash.get(BASELINE_DIFF, None)
    if diff:
        terminalreporter.section("baseline updated")
        terminalreporter.write_line(diff)
