"""What an adopter wrote against 0.1 still runs: every module path of 0.1 imports, with a
DeprecationWarning naming the new path, every name it exported resolves, a retriever and a
gate test file written as the 0.1 README said run unchanged; and the package, the command line
and the report give one version."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from demo_fixture import DEMO_DATA, demo_dataset, demo_settings

import retrieval
from retrieval import evaluate
from retrieval.moved import MOVED, MOVED_IN_PACKAGES, REMOVED_IN, RENAMED, RetrievalDeprecationWarning

ROOT = Path(__file__).resolve().parents[2]
NAMES_0_1 = json.loads((Path(__file__).parent / "fixtures" / "names_0_1.json").read_text(encoding="utf-8"))["modules"]
# Names of 0.1 that are gone, not moved: the shard internals the engine's own shard interface
# replaced (retrieval.methods.support.bm25_shards), and embed_on_cluster (the executor embeds
# itself). CHANGELOG.md names each.
REMOVED_0_1 = {("retrieval.ray_executor", "embed_on_cluster")} | {
    ("retrieval.bm25_shards", name)
    for name in (
        "GlobalStatistics",
        "IndexedShard",
        "ShardStatistics",
        "global_statistics",
        "index_shard",
        "score_subset",
        "shard_statistics",
    )
}

# The retriever of the 0.1 README ("Add your own retriever"), verbatim.
RETRIEVER_0_1 = """\
# myretriever.py
import numpy as np

from retrieval import Context, Ranking
from retrieval.ranking import top_k


class TitleOverlap:
    name = "title-overlap"
    requires: tuple[str, ...] = ()  # e.g. ("bm25",) to read context.rankings["bm25"]
    needs_vectors = False  # True gives context.question_vectors / document_vectors
    calls = "none"  # in-process: always evaluated for real

    def rank(self, context: Context) -> list[Ranking]:
        titles = [set(d.title.lower().split()) for d in context.dataset.documents]
        rankings = []
        for question in context.dataset.questions:
            words = set(question.text.lower().split())
            scores = np.array([len(words & t) for t in titles], dtype=float)
            rankings.append(top_k(scores, context.depth))  # ties go to the lower corpus index
        return rankings


def factory(settings):
    return TitleOverlap()
"""


def _forget(monkeypatch: pytest.MonkeyPatch, old: str) -> None:
    """Import `old` afresh in this test (its first import is the one that warns)."""
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_0_1_module_path_imports_and_names_where_it_moved(old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _forget(monkeypatch, old)
    with pytest.warns(RetrievalDeprecationWarning) as caught:
        module = importlib.import_module(old)
    (warning,) = [w for w in caught if old in str(w.message)]
    assert str(warning.message).startswith(
        f"{old} is deprecated and will be removed in retrieval-regression {REMOVED_IN}: import {MOVED[old][0]}"
    )
    assert isinstance(warning.message, DeprecationWarning)
    for name in NAMES_0_1.get(old, ()):
        if (old, name) in RENAMED:  # served by its new name, warning which
            with pytest.warns(RetrievalDeprecationWarning, match=f"{old}.{name} is deprecated"):
                assert getattr(module, name) is not None, f"{old}.{name}"
        elif (old, name) not in REMOVED_0_1:
            assert getattr(module, name) is not None, f"{old}.{name}"


@pytest.mark.parametrize("package", sorted(MOVED_IN_PACKAGES))
def test_a_0_1_module_that_is_now_a_package_serves_its_names(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module(package)
    names, _ = MOVED_IN_PACKAGES[package]
    assert sorted(names) == sorted(NAMES_0_1[package])
    for name in names:
        if name in vars(module):  # an earlier look-up kept it
            monkeypatch.delattr(module, name)
        with pytest.warns(RetrievalDeprecationWarning, match=rf"{package}\.{name} is deprecated .* import retrieval\."):
            assert getattr(module, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'nothing_of_0_1'"):
        module.nothing_of_0_1  # noqa: B018


def test_every_name_0_1_exported_resolves_by_its_0_1_path() -> None:
    missing = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RetrievalDeprecationWarning)
        for old, names in NAMES_0_1.items():
            module = importlib.import_module(old)
            missing += [(old, n) for n in names if (old, n) not in REMOVED_0_1 and not hasattr(module, n)]
    assert missing == []


def test_the_changelog_names_every_moved_and_removed_path() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for old, new in MOVED.items():
        assert f"`{old}`" in changelog and f"`{new[0]}`" in changelog, old
    for package in MOVED_IN_PACKAGES:
        assert f"`{package}`" in changelog, package
    for old, name in REMOVED_0_1:
        assert f"`{name}`" in changelog, f"{old}.{name}"


def test_a_real_module_is_never_shadowed_by_an_alias() -> None:
    for old in MOVED:
        parent, _, leaf = old.rpartition(".")
        assert not (ROOT / Path(*parent.split("."), f"{leaf}.py")).exists(), old
        assert not (ROOT / Path(*old.split(".")) / "__init__.py").exists(), old


def test_the_0_1_readme_retriever_runs_with_a_warning_at_its_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, source in (
        (old, RETRIEVER_0_1),
        (
            new,
            RETRIEVER_0_1.replace(
                "from retrieval import Context, Ranking\nfrom retrieval.ranking import top_k\n",
                "from retrieval import Context, Ranking, top_k\n",
            ),
        ),
    ):
        folder.mkdir()
        (folder / "myretriever.py").write_text(source, encoding="utf-8")
    _forget(monkeypatch, "retrieval.ranking")
    runs = []
    for folder in (old, new):
        monkeypatch.syspath_prepend(str(folder))  # the front of the path: this folder's module
        monkeypatch.delitem(sys.modules, "myretriever", raising=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runs.append(evaluate(demo_dataset(), demo_settings(), methods=["myretriever:factory"]))
        deprecations = [w for w in caught if issubclass(w.category, RetrievalDeprecationWarning)]
        if folder is old:
            (warning,) = deprecations
            assert Path(warning.filename) == old / "myretriever.py" and warning.lineno == 5
            assert "import retrieval.run.ranking instead, or `from retrieval import" in str(warning.message)
        else:
            assert deprecations == []
    sys.modules.pop("myretriever")  # the next test's myretriever is its own
    assert runs[0].ranked_ids("title-overlap") == runs[1].ranked_ids("title-overlap")
    assert len(runs[0].ranked_ids("title-overlap")) == len(demo_dataset().questions)


PYPROJECT_0_1 = """[tool.retrieval]
dataset = "data/demo"
methods = ["myretriever:factory"]
"""
# The 0.1 README's way to keep the gate in a test file of its own.
GATE_FILE_0_1 = "from retrieval.pytest_plugin import test_gate\n\n__all__ = ['test_gate']\n"


def _project_0_1(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """FIXTURE: an adopter's project as the 0.1 README wrote it: the demo's data, its retriever."""
    for old in ("retrieval.pytest_plugin", "retrieval.ranking", "myretriever"):
        _forget(monkeypatch, old)
    project = pytester.path
    (project / "pyproject.toml").write_text(PYPROJECT_0_1, encoding="utf-8")
    (project / "myretriever.py").write_text(RETRIEVER_0_1, encoding="utf-8")
    data = project / "data" / "demo"
    data.mkdir(parents=True)
    for name in ("corpus.jsonl", "questions.jsonl"):
        (data / name).write_bytes((DEMO_DATA / name).read_bytes())
    return project


def test_the_0_1_plugin_path_given_to_pytest_loads_the_gate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project_0_1(pytester, monkeypatch)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "retrieval.pytest_plugin", "--collect-only", "-q"
    )
    result.stdout.fnmatch_lines(
        ["pyproject.toml::test_gate[gate]", "retrieval gate (profile local): 6 items collected*"]
    )


def test_a_0_1_gate_test_file_gates_with_a_warning(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project_0_1(pytester, monkeypatch)
    (project / "tests").mkdir()
    (project / "tests" / "test_retrieval_gate.py").write_text(GATE_FILE_0_1, encoding="utf-8")
    quiet = ("-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")
    first = pytester.runpytest_inprocess(*quiet, "--update-baseline")
    first.assert_outcomes(passed=6)
    result = pytester.runpytest_inprocess(*quiet, "-rA")
    result.assert_outcomes(passed=13)
    result.stdout.fnmatch_lines(
        [
            "*warnings summary*",
            "tests/test_retrieval_gate.py:1",
            "*RetrievalDeprecationWarning: retrieval.pytest_plugin is deprecated and will be removed in "
            "retrieval-regression 0.3.0: import retrieval.gate.plugin instead, or `from retrieval import test_gate`*",
            "PASSED tests/test_retrieval_gate.py::test_gate[title-overlap-mrr]",
        ]
    )
    assert "retrieval.ranking is deprecated" in result.stdout.str()


def test_one_version_for_the_metadata_the_command_line_and_the_report(tmp_path: Path) -> None:
    assert importlib.metadata.version("retrieval-regression") == retrieval.__version__, (
        "the installed metadata is of another version: reinstall (`pip install -e '.[test]'`)"
    )
    done = subprocess.run(
        [sys.executable, "-m", "retrieval", "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout == f"retrieval-regression {retrieval.__version__}\n"
    from retrieval.report.build import build_report, render_json
    from retrieval.report.sections import render_markdown

    run = evaluate(demo_dataset(), demo_settings(), methods=["bm25"])
    report = build_report(run, demo_dataset().documents, demo_settings().prices)
    assert render_markdown(report).splitlines()[0].endswith(f"; retrieval-regression {retrieval.__version__})")
    assert json.loads(render_json(report))["version"] == retrieval.__version__


def test_the_command_line_shows_a_0_1_import_to_the_user(tmp_path: Path) -> None:
    (tmp_path / "myretriever.py").write_text(RETRIEVER_0_1, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "retrieval", "--dataset", str(DEMO_DATA), "--methods", "myretriever:factory"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in __import__("os").environ.items() if k != "PYTHONWARNINGS"},
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"{tmp_path / 'myretriever.py'}:5: RetrievalDeprecationWarning: retrieval.ranking is deprecated" in done.stderr
    )
    assert "| title-overlap |" in done.stdout


def test_the_install_lines_name_this_version() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    tags = re.findall(r"retrieval-regression\.git@v([\w.]+)'", text)
    wheels = re.findall(r"retrieval_regression-([\w.]+)-py3-none-any\.whl", text)
    said = re.findall(r"\(version ([\d.]+): `python -m retrieval --version`\)", text)
    assert tags and wheels and said
    assert set(tags) | set(wheels) | set(said) == {retrieval.__version__}


def test_a_0_1_module_named_like_a_public_function_leaves_the_function(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget(monkeypatch, "retrieval.evaluate")
    function = retrieval.evaluate
    with pytest.warns(RetrievalDeprecationWarning):
        old = importlib.import_module("retrieval.evaluate")  # 0.1's module path
    assert retrieval.evaluate is function and old.evaluate is function


def test_the_warning_points_at_the_caller_of_import_module(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget(monkeypatch, "retrieval.metrics")
    with pytest.warns(RetrievalDeprecationWarning) as caught:
        importlib.import_module("retrieval.metrics")
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]


def test_a_renamed_0_1_name_warns_with_its_new_name_and_keeps_its_0_1_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "retrieval.verdicts", raising=False)
    with pytest.warns(RetrievalDeprecationWarning):
        module = importlib.import_module("retrieval.verdicts")
    with pytest.warns(RetrievalDeprecationWarning, match=r"retrieval\.verdicts\.judge is deprecated.*verdicts_of"):
        judge = module.judge
    verdicts = judge(None, "ConfigError: retrieval.toml:3: fix it", ["gate", "bm25-mrr"])
    assert [(v.name, v.kind, v.ok) for v in verdicts] == [("gate", "problem", False), ("bm25-mrr", "figure", False)]
    with pytest.warns(RetrievalDeprecationWarning, match=r"figure_item is deprecated"):
        figure_item = module.figure_item
    assert figure_item("bm25 mrr", "origin/main") == "bm25-mrr-against-origin-main"
