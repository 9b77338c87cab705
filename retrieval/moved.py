"""The module paths of 0.1 that moved into sub-packages, kept as deprecated aliases until 0.3.0
(and `retrieval.gate.baseline`, a module of re-exports that lived between the move and 0.2.0).

`from retrieval.ranking import top_k`, as the 0.1 README wrote it, still imports: the first
import of an old path warns (`RetrievalDeprecationWarning`, a DeprecationWarning) naming the
path to import instead, and gives a thin module whose names are those of the new module (or
modules, where one old module was split). Nothing here is imported by the package itself; the
finder only answers for the paths in MOVED, after every real module, so a path that exists is
never shadowed. CHANGELOG.md lists every path, and the version that removes them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MOVED",
    "MOVED_IN_PACKAGES",
    "REMOVED_IN",
    "RENAMED",
    "RetrievalDeprecationWarning",
    "install",
    "moved_name",
]

REMOVED_IN = "0.3.0"
_PACKAGE = str(Path(__file__).parent)

# Old module path -> where its names live now, first match wins (a module split in several).
MOVED: dict[str, tuple[str, ...]] = {
    "retrieval.analyzer": ("retrieval.data.analyzer", "retrieval.data.corpus_terms"),
    "retrieval.atomic": ("retrieval.files.atomic",),
    "retrieval.baseline": (
        "retrieval.gate.schema",
        "retrieval.gate.questions",
        "retrieval.gate.compare",
        "retrieval.gate.update",
        "retrieval.measures.figures",
    ),
    "retrieval.gate.baseline": (
        "retrieval.gate.schema",
        "retrieval.gate.questions",
        "retrieval.gate.compare",
        "retrieval.gate.update",
        "retrieval.measures.figures",
    ),
    "retrieval.baseline_compare": ("retrieval.gate.compare",),
    "retrieval.baseline_figures": ("retrieval.measures.figures",),
    "retrieval.baseline_questions": ("retrieval.gate.questions",),
    "retrieval.baseline_ref": ("retrieval.gate.reference",),
    "retrieval.baseline_schema": ("retrieval.gate.schema",),
    "retrieval.baseline_set": ("retrieval.gate.baseline_set",),
    "retrieval.baseline_update": ("retrieval.gate.update",),
    "retrieval.bm25_shards": ("retrieval.methods.support.bm25_shards",),
    "retrieval.cache": ("retrieval.recording.cache",),
    "retrieval.cassette_matching": ("retrieval.recording.matching",),
    "retrieval.corpus_vectors": ("retrieval.evaluation.corpus_vectors",),
    "retrieval.cost": ("retrieval.run.cost",),
    "retrieval.dataset": ("retrieval.data.dataset",),
    "retrieval.drift": ("retrieval.recording.drift",),
    "retrieval.embeddings": ("retrieval.evaluation.embeddings",),
    "retrieval.enrichment_cache": ("retrieval.recording.enrichment_cache",),
    "retrieval.evaluate": ("retrieval.evaluation.evaluate", "retrieval.evaluation.method_run"),
    "retrieval.executor": ("retrieval.executors.executor",),
    "retrieval.failures": ("retrieval.diagnosis.failures",),
    "retrieval.fusion": ("retrieval.measures.fusion",),
    "retrieval.gate_judge": ("retrieval.gate.outcome",),
    "retrieval.llm_methods": ("retrieval.methods.support.llm",),
    "retrieval.markdown": ("retrieval.text.markdown",),
    "retrieval.metrics": ("retrieval.measures.metrics",),
    "retrieval.names": ("retrieval.config.names",),
    "retrieval.network": ("retrieval.recording.network",),
    "retrieval.paired": ("retrieval.measures.paired",),
    "retrieval.pipeline": ("retrieval.evaluation.pipeline",),
    "retrieval.plugin_session": ("retrieval.gate.session",),
    "retrieval.profile_checks": ("retrieval.config.profile_checks",),
    "retrieval.profiles": ("retrieval.config.profiles",),
    "retrieval.progress": ("retrieval.evaluation.progress",),
    "retrieval.project_file": ("retrieval.config.project_file",),
    "retrieval.prompts": ("retrieval.methods.prompts",),
    "retrieval.prompts.enrich": ("retrieval.methods.prompts.enrich",),
    "retrieval.prompts.rewrite": ("retrieval.methods.prompts.rewrite",),
    "retrieval.pytest_plugin": ("retrieval.gate.plugin",),
    "retrieval.ranking": ("retrieval.run.ranking",),
    "retrieval.ranking_cassettes": ("retrieval.recording.ranking_cassettes",),
    "retrieval.ray_executor": ("retrieval.executors.ray_cluster",),
    "retrieval.redaction": ("retrieval.text.redaction",),
    "retrieval.remedies": ("retrieval.diagnosis.remedies",),
    "retrieval.server_provenance": ("retrieval.text.server_provenance",),
    "retrieval.setting_values": ("retrieval.config.setting_values",),
    "retrieval.settings": ("retrieval.config.settings",),
    "retrieval.sharding": ("retrieval.methods.support.sharding",),
    "retrieval.snapshots": ("retrieval.gate.snapshots",),
    "retrieval.sweeps": ("retrieval.diagnosis.sweeps", "retrieval.measures.refusion"),
    "retrieval.ties": ("retrieval.measures.ties",),
    "retrieval.toml_lines": ("retrieval.config.toml_lines",),
    "retrieval.vector_shards": ("retrieval.methods.vector",),
    "retrieval.vector_store": ("retrieval.recording.vector_store",),
    "retrieval.verdicts": ("retrieval.gate.verdicts",),
}

# Old modules whose path is now a sub-package's: the names each exported in 0.1, which the
# package serves (its module __getattr__ calls moved_name) with the same warning, and where they
# live now. Only those names: anything else is the package's own, or a submodule to import.
MOVED_IN_PACKAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "retrieval.gate": (
        ("BASELINE_PATH", "GateResult", "accept", "baseline_lock_of", "importable", "recover", "run_gate"),
        ("retrieval.gate.result", "retrieval.gate.accept", "retrieval.gate.baseline_set", "retrieval.gate.schema"),
    ),
    "retrieval.recording": (
        (
            "STORE_MANIFEST",
            "CassetteError",
            "Mode",
            "Recorder",
            "cassette_digest",
            "cassette_digests",
            "is_replay_miss",
            "missed_request",
            "record_command",
            "scan_cassettes",
        ),
        (
            "retrieval.recording.recorder",
            "retrieval.recording.cassette_files",
            "retrieval.recording.misses",
            "retrieval.recording.matching",
            "retrieval.providers.http",
        ),
    ),
    "retrieval.report": (
        ("Report", "build_report", "render_json", "render_markdown"),
        ("retrieval.report.build", "retrieval.report.sections"),
    ),
    "retrieval.run": (
        ("MethodResult", "QuestionResult", "Run", "RunLogError", "load_run", "run_log", "save_run"),
        ("retrieval.run.results",),
    ),
}


# Names of 0.1 that were renamed or reshaped when the gate got one verdict model (0.2.0): the
# old module's name -> a function giving what serves it now (the new name, or a thin adapter
# that keeps the 0.1 call and return shape), resolved on first use. By import_module, as every
# alias here: this module is imported by the layers below the gate and must not pull it in.
def _new(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _figure_item() -> Any:
    item_id = _new("retrieval.gate.verdicts.item_id")

    def figure_item(figure: str, reference: str | None = None) -> str:
        return str(item_id(f"{figure} against {reference}" if reference else figure))

    return figure_item


def _judge() -> Any:
    verdicts_of = _new("retrieval.gate.verdicts.verdicts_of")

    def judge(result: Any, problem: str | None, names: Sequence[str], refusal: str | None = None) -> list[Any]:
        return list(verdicts_of(result, problem, names, refusal).items)

    return judge


def _outcome_frame() -> Any:
    verdict_frame = _new("retrieval.gate.session.verdict_frame")

    def outcome_frame(outcome: Any, profile: str) -> Any:
        return verdict_frame(outcome.verdict)

    return outcome_frame


# A renamed name's new path, and the adapter that serves it where its call or return changed
# (None: the new name itself).
RENAMED: dict[tuple[str, str], tuple[str, Callable[[], Any] | None]] = {
    ("retrieval.baseline", "rejudged"): ("retrieval.gate.questions.under_judgments", None),
    ("retrieval.baseline_questions", "rejudged"): ("retrieval.gate.questions.under_judgments", None),
    ("retrieval.verdicts", "Verdict"): ("retrieval.report.verdict.ItemVerdict", None),
    ("retrieval.verdicts", "figure_item"): ("retrieval.gate.verdicts.item_id", _figure_item),
    ("retrieval.verdicts", "judge"): ("retrieval.gate.verdicts.verdicts_of", _judge),
    ("retrieval.plugin_session", "outcome_frame"): ("retrieval.gate.session.verdict_frame", _outcome_frame),
    ("retrieval.gate_judge", "judge_run"): ("retrieval.gate.outcome.gate_outcome", None),
}

# The pytest plugin's old path, given as a plugin (`-p retrieval.pytest_plugin` with autoloading
# off), registers the plugin itself: pytest reads `pytest_plugins` of a registered module.
_PLUGIN_ALIASES = {"retrieval.pytest_plugin": ["retrieval.gate.plugin"]}


class RetrievalDeprecationWarning(DeprecationWarning):
    """A deprecated path of retrieval-regression was used; the message names the new one."""


def _ours(code: types.CodeType) -> bool:
    """The import machinery, this module, or a package's __getattr__ that serves old names."""
    return (
        code.co_filename.startswith("<frozen importlib")
        or Path(code.co_filename).parts[-2:] == ("importlib", "__init__.py")  # importlib.import_module
        or code.co_filename == __file__
        or (code.co_name == "__getattr__" and code.co_filename.startswith(_PACKAGE))
    )


def _internal(code: types.CodeType) -> bool:
    """A frame `warnings.warn` itself leaves out of the stack level (the import system's)."""
    return "importlib" in code.co_filename and "_bootstrap" in code.co_filename


def _caller_stacklevel() -> int:
    """The stack level of `_warn`'s caller's first frame that is not ours: the line that wrote
    the old import, which the warning then points at."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and _ours(frame.f_code):
        frame = frame.f_back
        if frame is not None and not _internal(frame.f_code):
            level += 1
    return level


def _public(names: Sequence[str]) -> str:
    """`from retrieval import ...` of the names the public API holds, or nothing."""
    exports = getattr(sys.modules.get("retrieval"), "__all__", ())
    public = [n for n in names if n in exports]
    return f", or `from retrieval import {', '.join(public)}` (the public API)" if public else ""


def _warn(old: str, new: str, public: Sequence[str] = ()) -> None:
    warnings.warn(
        f"{old} is deprecated and will be removed in retrieval-regression {REMOVED_IN}: "
        f"import {new} instead{_public(public)}.",
        RetrievalDeprecationWarning,
        stacklevel=_caller_stacklevel(),
    )


def _lookup(targets: Sequence[str], name: str) -> Any:
    for target in targets:
        module = importlib.import_module(target)
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(name)


def _is_package(old: str) -> bool:
    return any(other.startswith(old + ".") for other in MOVED)


def _alias(old: str, targets: tuple[str, ...]) -> types.ModuleType:
    """A module named `old` whose names are the targets' (looked up on use: no copy goes stale)."""
    alias = types.ModuleType(old, f"Deprecated alias of {', '.join(targets)} (until {REMOVED_IN}).")

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if (old, name) in RENAMED:
            new, adapter = RENAMED[(old, name)]
            _warn(f"{old}.{name}", new)
            return adapter() if adapter is not None else _new(new)
        try:
            return _lookup(targets, name)
        except AttributeError:
            raise AttributeError(f"module {old!r} (now {', '.join(targets)}) has no attribute {name!r}") from None

    def __dir__() -> list[str]:
        names: set[str] = set()
        for target in targets:
            names.update(getattr(importlib.import_module(target), "__all__", ()))
        return sorted(names)

    # A module's own __getattr__ and __dir__ (PEP 562) serve the names.
    setattr(alias, "__getattr__", __getattr__)  # noqa: B010
    setattr(alias, "__dir__", __dir__)  # noqa: B010
    setattr(alias, "__all__", __dir__())  # noqa: B010
    # An old package (retrieval.prompts) keeps its submodules' old paths importable.
    if _is_package(old):
        setattr(alias, "__path__", [])  # noqa: B010
    if old in _PLUGIN_ALIASES:
        setattr(alias, "pytest_plugins", _PLUGIN_ALIASES[old])  # noqa: B010
    return alias


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers only for the old paths in MOVED; it sits after the path finder."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=_is_package(fullname))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        alias = _alias(spec.name, MOVED[spec.name])
        _warn(spec.name, " or ".join(MOVED[spec.name]), alias.__all__)
        return alias

    def exec_module(self, module: types.ModuleType) -> None:
        pass


_FINDER = _MovedFinder()


def install() -> None:
    """Put the finder on sys.meta_path, once, after every other finder."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_FINDER)


def moved_name(package: str, name: str) -> Any:
    """A name the old module `package` exported in 0.1 (`retrieval.run.Run`), for the package's
    `__getattr__`: warns, then returns it from its new module; AttributeError for any other."""
    names, targets = MOVED_IN_PACKAGES.get(package, ((), ()))
    if name not in names:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    for target in targets:
        module = importlib.import_module(target)
        if hasattr(module, name):
            _warn(f"{package}.{name}", f"{target}.{name}", [name])
            value = getattr(module, name)
            setattr(sys.modules[package], name, value)  # warned once: later look-ups find it
            return value
    raise AttributeError(f"module {package!r} has no attribute {name!r}")
