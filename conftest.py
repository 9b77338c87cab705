"""What this repository's own tests need. The gate itself is the package's pytest plugin
(retrieval/gate/plugin.py, entry point `pytest11`), as in any repository that installs it."""

from __future__ import annotations

import atexit
import gc
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]  # tests run the gate itself on temporary projects

# Bytecode is written, also where the environment says not to (PYTHONDONTWRITEBYTECODE, set on
# some CI machines and containers): without it each pytest-xdist worker rewrote and compiled every
# test module again (about 2 s of CPU each), and each of the Python processes the tests start
# compiled the package again. The files go to the usual __pycache__ folders, which git ignores.
if sys.dont_write_bytecode:
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The tests' git repositories (pull requests against a base branch, pushes to a local origin) never
# start git's housekeeping: after each commit, fetch and push, git started `maintenance run --auto`
# or `gc --auto` (about 140 processes a run, a repack among them), which reads nothing a test checks.
# Through git's environment configuration, so that every git the tests start has it, the package's
# own included; left alone when the environment configures git already.
if "GIT_CONFIG_COUNT" not in os.environ:
    os.environ.update(
        {
            "GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": "maintenance.auto",
            "GIT_CONFIG_VALUE_0": "false",
            "GIT_CONFIG_KEY_1": "gc.auto",
            "GIT_CONFIG_VALUE_1": "0",
        }
    )

# The README's test command runs a pytest-xdist worker per core (`-n auto`): OpenBLAS's default
# of a thread per core in each of them oversubscribed the cores (the suite: 10.8 -> 9.9 s with
# one thread). Set here, in each worker, before numpy loads OpenBLAS.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# The cycle collector's full passes walk every object a worker holds (the package, numpy, scipy,
# LangChain's modules, the tests' own: 300,000 to 450,000 objects, 0.1 to 0.25 s a pass), and
# came 8 to 18 times a worker: about 2.5 of the default run's 3.5 s of collection (gc.callbacks,
# `pytest -n auto`). A full pass now waits for 100 passes of the middle generation instead of 10
# (2 to 3 a worker, 0.3 s in all); the young generations, where a test's cyclic garbage is found,
# are collected as before, and pytest's unraisableexception plugin still collects fully at the end.
_YOUNG, _MIDDLE, _ = gc.get_threshold()
gc.set_threshold(_YOUNG, _MIDDLE, 100)


# The pytest runs the tests start (in process with pytester, or in their own) leave them out too
# (pyproject.toml's addopts): an adopter's repository has neither, and langsmith's cost a second
# each time a run imported it again.
_UNUSED_PLUGINS = "-p no:langsmith_plugin -p no:platformdirs"
if _UNUSED_PLUGINS not in os.environ.get("PYTEST_ADDOPTS", ""):
    os.environ["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} {_UNUSED_PLUGINS}".strip()


# Under `-n auto` a test module is one unit of work, sent whole to one worker: a module fixture (the
# wheel's build, a project made once, the executor's 3,000-document corpus, Ray's cluster) is made
# once in the run rather than in each worker that ran one of its tests, a heavy import (LangChain,
# LlamaIndex and Haystack: about 3 s of CPU) happens in one worker, and the controller sends about
# 110 units rather than 2,500 tests one by one (each a message and a reply; a worker whose queue ran
# dry between two short tests waited for it). Measured over 6 alternated pairs of `pytest -n auto`:
# 3 to 5 s of wall time and 3 to 9 CPU-s less than with a unit per test (CHANGELOG, Development).
# A group of several modules shares one worker for what they all import: Ray (about 0.4 s of CPU)
# for the executor's tests and the 0.1 alias `retrieval.ray_executor`, scipy.stats (0.45 s) for the
# bootstrap's tests, google-genai (0.8 s) for the modules that replay Gemini through its SDK.
_GEMINI = (
    "drift", "evaluate_remedies", "evaluate_rerank", "gemini", "llm_judge",
    "message_redaction", "rerank", "rerank_pointwise", "rewrite_enrich_methods",
)  # fmt: skip
ONE_WORKER = (
    ("tests/unit/test_executor.py", "tests/unit/test_ray_overlap.py", "tests/unit/test_ray_connection.py",
     "tests/unit/test_public_api.py"),
    ("tests/unit/test_repeated_bootstrap.py", "tests/unit/test_paired.py"),
    tuple(f"tests/unit/test_{name}.py" for name in _GEMINI),
)  # fmt: skip
_GROUP_OF = {module: group[0] for group in ONE_WORKER for module in group}


# The scopes go out heaviest first, weighed by the tests' seconds in the last run that measured
# them (pytest's cache; merged, so that a run of a few files updates theirs only): the run ended
# on whichever long test came last in collection order (test_workflow.py's comment script in
# node, about a second), the other worker idle meanwhile. A test the cache does not know weighs
# the median; without the cache (a fresh clone, -p no:cacheprovider), xdist's order as before.
_DURATIONS = "retrieval-regression/durations"
_MEASURED: dict[str, float] = {}  # this session's, in the process that schedules (not a worker)


def _weights(config: pytest.Config) -> dict[str, float]:
    cache = getattr(config, "cache", None)
    known = cache.get(_DURATIONS, None) if cache is not None else None
    if not isinstance(known, dict):
        return {}
    return {k: v for k, v in known.items() if isinstance(k, str) and isinstance(v, int | float) and v >= 0}


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from retrieval.gate.plugin import gate_scheduler

    def scope(nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return _GROUP_OF.get(module, module)

    known = _weights(config)
    if not known:
        return gate_scheduler(config, log, scope)
    median = sorted(known.values())[len(known) // 2]
    return gate_scheduler(config, log, scope, lambda nodeid: known.get(nodeid, median))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the phases' seconds, summed
        _MEASURED[report.nodeid] = _MEASURED.get(report.nodeid, 0.0) + report.duration


def _remember_durations(config: pytest.Config) -> None:
    cache = getattr(config, "cache", None)
    if cache is not None and _MEASURED and not hasattr(config, "workerinput"):
        cache.set(_DURATIONS, {**_weights(config), **{k: round(v, 4) for k, v in _MEASURED.items()}})


# --- The slow cases ---------------------------------------------------------------------------
# End-to-end cases that start real clusters, database or model servers, shells, browsers or
# pytest-xdist runs are marked `slow` (pyproject.toml). The default run (`pytest`, and the README's
# `pytest -n auto`) leaves them out, so that it fits a two-core laptop, and says so in its last
# lines; `pytest -m slow` runs them (CI's `slow` job, and .ci/run after the default run). A run
# given -m chooses for itself, and a test file or test named on the command line runs whatever it
# names. A module marked slow as a whole (`pytestmark = pytest.mark.slow`) is not even imported.
SLOW = "slow"
_SLOW_MODULE = re.compile(r"^pytestmark = .*\bpytest\.mark\.slow\b", re.M)
_LEFT_OUT = pytest.StashKey[dict[str, int]]()  # test file -> slow tests (-1: a module not imported)
_ARGS = pytest.StashKey[list[Path]]()


def _arguments(config: pytest.Config) -> list[Path]:
    """The paths the run collects (the command line's, or the test paths)."""
    if _ARGS not in config.stash:
        base = config.invocation_params.dir if config.args_source is pytest.Config.ArgsSource.ARGS else config.rootpath
        config.stash[_ARGS] = [(base / arg.split("::", 1)[0]).resolve() for arg in config.args]
    return config.stash[_ARGS]


def _named_files(config: pytest.Config) -> set[Path]:
    """The test files named on the command line (a folder names no file)."""
    from_args = config.args_source is pytest.Config.ArgsSource.ARGS
    return {path for path in _arguments(config) if from_args and path.is_file()}


def _collected(path: Path, config: pytest.Config) -> bool:
    """Whether the run collects `path` (pytest asks about a named file's neighbours too)."""
    return any(arg == path or arg in path.parents for arg in _arguments(config))


def _leaves_slow_out(config: pytest.Config) -> bool:
    return not config.option.markexpr


def _not_rewritten(config: pytest.Config) -> set[str]:
    """The packages of the installed plugins this run turns off (`-p no:NAME`, pyproject.toml's
    addopts): pytest still marks a plugin's whole distribution for assertion rewriting, so that
    LangChain's import of langsmith (223 modules) was rewritten and compiled again instead of read
    from pip's bytecode: about 1 s of CPU in the worker that runs test_frameworks.py, on every
    fresh environment."""
    from importlib.metadata import entry_points

    blocked = config.pluginmanager.is_blocked
    return {ep.value.split(".")[0].split(":")[0] for ep in entry_points(group="pytest11") if blocked(ep.name)}


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_LEFT_OUT] = {}
    hook = config.pluginmanager.rewrite_hook
    # pytest's own bookkeeping, read defensively: a pytest without it rewrites them, as before.
    marked, cache = getattr(hook, "_must_rewrite", None), getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(marked, set) and isinstance(cache, dict):
        marked.difference_update(_not_rewritten(config))
        cache.clear()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if not (collection_path.suffix == ".py" and collection_path.name.startswith("test_")):
        return None
    path = collection_path.resolve()
    if not _leaves_slow_out(config) or not _collected(path, config) or path in _named_files(config):
        return None
    try:
        source = collection_path.read_text(encoding="utf-8")
    except OSError:
        return None
    if _SLOW_MODULE.search(source) is None:
        return None
    config.stash[_LEFT_OUT][str(collection_path.relative_to(config.rootpath))] = -1
    return True


@pytest.hookimpl(trylast=True)  # after -k and --deselect: what they left
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _leaves_slow_out(config):
        return
    named = _named_files(config)
    slow = [i for i in items if i.get_closest_marker(SLOW) is not None and i.path.resolve() not in named]
    if not slow:
        return
    left_out = config.stash[_LEFT_OUT]
    for item in slow:
        where = str(item.path.relative_to(config.rootpath))
        left_out[where] = left_out.get(where, 0) + 1
    config.hook.pytest_deselected(items=slow)
    chosen = set(slow)
    items[:] = [i for i in items if i not in chosen]


def pytest_sessionfinish(session: pytest.Session) -> None:
    _remember_durations(session.config)
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # a pytest-xdist worker: its controller says it
        output["slow_left_out"] = session.config.stash[_LEFT_OUT]
    cleaning = session.config.stash.get(_CLEANING, None)
    if cleaning is not None:  # ended before pytest's own pass (tmpdir's hook, called after this one)
        _stop_cleaning(cleaning)


# --- The old runs' temporary folders, removed early ------------------------------------------------
# pytest keeps the last 3 runs' temporary folders and removes the older ones when the session ends:
# one run of this suite's (about 11,500 files, 70 MB), which took 1 to 1.5 s after the last test, in
# the controller alone, the other core idle. The same removal (pytest's own function, with the
# arguments it registers) starts with the session instead, in a process at the lowest priority: it
# runs on what the tests leave idle, and pytest's pass at the end finds nothing left to remove. A run
# given --basetemp (pytester's, each worker's) removes no old run's folder; without pytest's
# function, or setpriority (Windows), pytest removes them at the end as before. A removal still under
# way when the session ends (a busy machine leaves a process of the lowest priority little time) is
# interrupted: pytest's pass removes what is left, at the session's priority, as it did the whole.
_CLEANING = pytest.StashKey["subprocess.Popen[bytes]"]()
_CLEAN_OLD_RUNS = """import os, sys
os.setpriority(os.PRIO_PROCESS, 0, 19)
from pathlib import Path
from _pytest.pathlib import cleanup_numbered_dir
cleanup_numbered_dir(Path(sys.argv[1]), "pytest-", int(sys.argv[2]), float(sys.argv[3]))
"""


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    # pytest's private names, read defensively: a pytest without them removes old runs at the end.
    factory = getattr(config, "_tmp_path_factory", None)
    if hasattr(config, "workerinput") or factory is None or getattr(factory, "_given_basetemp", 0) is not None:
        return
    try:
        from _pytest.pathlib import LOCK_TIMEOUT, cleanup_numbered_dir  # noqa: F401  (the child's)
    except ImportError:
        return
    if not hasattr(os, "setpriority"):
        return
    keep = 0 if getattr(factory, "_retention_policy", "none") == "none" else getattr(factory, "_retention_count", 0)
    if keep == 0:  # pytest removes this run's folder too, once it ends: nothing to do before
        return
    basetemp = factory.getbasetemp()  # made now rather than by the first test (or xdist) asking for it
    dead_before = basetemp.stat().st_mtime - LOCK_TIMEOUT  # what make_numbered_dir_with_cleanup registers
    command = [sys.executable, "-c", _CLEAN_OLD_RUNS, str(basetemp.parent), str(keep), repr(dead_before)]
    # Best effort, as pytest's own: its failures and the interruption below print nothing.
    config.stash[_CLEANING] = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_cleaning(cleaning: subprocess.Popen[bytes]) -> None:
    """The early removal, ended: finished, or interrupted with SIGINT, so that pytest's own function
    removes the lock it holds on the folder it was removing (its `finally`), which pytest's pass at
    the end then removes."""
    if cleaning.poll() is None:
        cleaning.send_signal(signal.SIGINT)
    try:
        cleaning.wait(timeout=30)
    except subprocess.TimeoutExpired:
        cleaning.kill()
        cleaning.wait()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        atexit.register(_exit_unfinalized)


def _exit_unfinalized() -> None:
    """A pytest-xdist worker's last act: its atexit functions, then an exit without the
    interpreter's finalization. The controller waits for its workers to exit, and finalizing a
    worker that imported the whole suite's modules (LangChain, scipy, vcrpy...) took 1 to 2.5 s
    after its last test, at the end of every `pytest -n auto`. Registered last, so called first:
    it calls every other atexit function itself, once (what the worker started is stopped as
    usual); only module teardown and the final collections are skipped, and the controller has
    the worker's reports already."""
    atexit.unregister(_exit_unfinalized)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """The controller of a pytest-xdist run learns from a worker what the default run left out
    (every worker collects the same tests)."""
    output = getattr(node, "workeroutput", {})
    config = getattr(node, "config", None)
    if config is not None and "slow_left_out" in output:
        config.stash[_LEFT_OUT].update(output["slow_left_out"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    left_out = config.stash.get(_LEFT_OUT, {})
    if not left_out:
        return
    tests = sum(n for n in left_out.values() if n > 0)
    modules = sorted(m for m, n in left_out.items() if n < 0)
    said = f"{tests} slow test(s) deselected" if tests else ""
    if modules:
        said += (", and " if said else "") + f"{len(modules)} slow module(s) not collected ({', '.join(modules)})"
    terminalreporter.write_line(f"{said}: `pytest -m slow -n auto` runs them (CI's slow job)")
