"""The package keeps its shape: a lower layer never imports a higher one, the pure core (data,
run, measures, diagnosis, report) reaches no network, and no module grows past one job's size.
The contracts are pyproject.toml's [tool.importlinter], run here as CI runs the suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# In a process of its own: lint-imports configures logging (dictConfig), which would silence the
# package's loggers for every later test of this worker.
LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
MAX_LINES = 450  # "about 400": a module past it holds more than one job


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", LINT], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_package_keeps_its_layers() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    # The contracts must be able to fail: a copy of the package where the metrics import the gate.
    shutil.copytree(ROOT / "retrieval", tmp_path / "retrieval", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    metrics = tmp_path / "retrieval" / "measures" / "metrics.py"
    upward = """
        def _upward() -> None:
            from retrieval.gate import plugin  # noqa: F401
    """
    metrics.write_text(metrics.read_text(encoding="utf-8") + textwrap.dedent(upward), encoding="utf-8")
    done = _lint(tmp_path)
    assert done.returncode == 1
    assert "retrieval.measures is not allowed to import retrieval.gate" in done.stdout
    assert "retrieval.measures.metrics -> retrieval.gate.plugin" in done.stdout


def test_no_module_holds_more_than_one_jobs_worth_of_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "retrieval").rglob("*.py")
    }
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_two_modules_import_each_other_even_lazily() -> None:
    # The layers contract keeps packages in order; within a package, a cycle (often a lazy import
    # inside a function) is a module split in the wrong place.
    import grimp

    built = grimp.build_graph("retrieval")
    graph = {m: set(built.find_modules_directly_imported_by(m)) & built.modules for m in built.modules}
    assert _cycles(graph) == []
    graph["retrieval.measures.fusion"].add("retrieval.measures.refusion")  # the check must be able to fail
    assert _cycles(
        {**graph, "retrieval.measures.refusion": graph["retrieval.measures.refusion"] | {"retrieval.measures.fusion"}}
    ) == [["retrieval.measures.fusion", "retrieval.measures.refusion"]]
