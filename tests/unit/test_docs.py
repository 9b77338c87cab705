"""The documentation cannot drift from the code: the site builds with every link and anchor
resolved (mkdocs --strict), the configuration reference and the package tree are generated from
the code and current, every configuration key is in the reference, the API page lists exactly
what `retrieval` exports, every module or file the pages name exists, and every retriever
example imports from the public API and runs."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
import warnings
from dataclasses import fields
from pathlib import Path
from types import ModuleType

import pytest
from demo_fixture import DEMO_DATA
from script_modules import load_script

import retrieval
from retrieval import evaluate, load_dataset, load_settings
from retrieval.config import ENVIRONMENT, FLAT_KEYS
from retrieval.config.setting_values import SETTING_KEYS
from retrieval.config.settings import GROUPS, Settings
from retrieval.run.cost import PRICE_KEYS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# The README's limit: what it is, the two commands, the demo table, five steps, links.
README_LINES = 350


@pytest.fixture(scope="module")
def config_reference() -> ModuleType:
    return load_script("config_reference")


@pytest.fixture(scope="module")
def architecture_tree() -> ModuleType:
    return load_script("architecture_tree")


def _block(text: str, start: str, end: str) -> str:
    first, last = text.find(start), text.find(end)
    assert 0 <= first < last, f"markers {start} ... {end} are missing"
    return text[first : last + len(end)]


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_readme_stays_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_LINES, f"README.md has {lines} lines (at most {README_LINES}): move the detail to docs/"


@pytest.mark.slow  # mkdocs in its own process (CI's docs job builds the site too)
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail(
            "mkdocs is not installed: run `pip install -e '.[test]'` (the docs extra brings it).", pytrace=False
        )
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    built = {p.relative_to(tmp_path / "site").parts[0] for p in (tmp_path / "site").glob("*/index.html")}
    assert built == {p.stem for p in PAGES if p.stem != "index"}, "every page under docs/ is built"


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert [p.name for p in PAGES if f" {p.name}\n" not in nav] == []


def test_the_configuration_reference_is_generated_from_the_settings(config_reference: ModuleType) -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert _block(text, config_reference.START, config_reference.END) == config_reference.render_reference(), (
        "docs/configuration.md's reference is stale: run `python scripts/config_reference.py`"
    )


def test_every_configuration_key_is_in_the_reference(config_reference: ModuleType) -> None:
    reference = config_reference.render_reference()
    grouped = {f"{group}.{f.name}" for group, cls in GROUPS.items() for f in fields(cls)}
    keys = SETTING_KEYS | set(FLAT_KEYS) | grouped | set(PRICE_KEYS) | set(ENVIRONMENT.values())
    assert sorted(k for k in keys if f"`{k}`" not in reference) == []
    from retrieval.cli import _parser
    from retrieval.judging.command import judge_parser

    for parser in (_parser(), judge_parser()):
        flags = {a.option_strings[-1] for a in parser._actions if a.option_strings and a.dest != "help"}
        assert sorted(f for f in flags if f"`{f}" not in reference) == []
    assert sorted(o["flag"] for o in config_reference._pytest_options() if f"`{o['flag']}" not in reference) == []


def test_a_setting_without_a_description_stops_the_reference(config_reference: ModuleType) -> None:
    (undocumented,) = [f for f in fields(Settings) if f.name == "root"]  # not a key: it has none
    with pytest.raises(config_reference.ReferenceBlockError, match=r"Settings\.root has no description"):
        config_reference._doc(undocumented, "Settings")


def test_the_package_tree_is_the_package(architecture_tree: ModuleType) -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    tree = architecture_tree.render_tree()  # it reads every module's docstring: once
    assert _block(text, architecture_tree.START, architecture_tree.END) == tree, (
        "docs/architecture.md's package tree is stale: run `python scripts/architecture_tree.py`"
    )
    for path in (ROOT / "retrieval").rglob("*.py"):
        if path.name != "__init__.py" and "__pycache__" not in path.parts:
            assert f" {path.stem}" in tree, path


def test_the_layer_picture_follows_the_layer_contract(architecture_tree: ModuleType) -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    picture = text[text.index("```text\ncli · ") :].split("```\n", 1)[0]
    # The first line names the entry points, highest first ("cli · judging · gate (plugin, ...)").
    entry_points = picture.splitlines()[1].split("(", 1)[0].split("  ", 1)[0]
    drawn = [name.strip() for name in entry_points.split("·")] + [
        name.strip() for line in re.findall(r"└─ (\S+(?: · \S+)?)", picture) for name in line.split("·")
    ]
    assert drawn == [name.removeprefix("retrieval.") for name in architecture_tree.layers()]


def _public_names_on(page: str) -> set[str]:
    names: set[str] = set()
    for cell in re.findall(r"^\| (`[^|]+`) \|", page, re.M):
        names.update(re.findall(r"`(\w+)`", cell))
    return names


def test_the_api_page_lists_what_retrieval_exports() -> None:
    page = (DOCS / "api.md").read_text(encoding="utf-8")
    # `__version__` is on the page, as every package has one, and not in `__all__`.
    listed = _public_names_on(page) - {"retrieval", "__version__"}
    assert "`__version__`" in page and retrieval.__version__
    assert listed == set(retrieval.__all__), (
        f"on docs/api.md, not exported: {sorted(listed - set(retrieval.__all__))}; "
        f"exported, not on the page: {sorted(set(retrieval.__all__) - listed)}"
    )
    for name in retrieval.__all__:
        assert getattr(retrieval, name) is not None


# A dotted name of the package (not `[tool.retrieval.prices]`, a TOML table of the project file).
_DOTTED = re.compile(r"(?<![\w.\[])retrieval(?:\.[A-Za-z_]\w*)+(?::\w+)?")
_PATH = re.compile(r"\bretrieval/[\w/.-]*\w")


def _resolves(dotted: str) -> bool:
    with warnings.catch_warnings():
        # A page may name 0.1's paths, deprecated aliases (docs/api.md says so): they resolve too.
        warnings.simplefilter("ignore", retrieval.RetrievalDeprecationWarning)
        return _imports(dotted)


def _imports(dotted: str) -> bool:
    dotted = dotted.replace(":", ".")
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_the_pages_name_only_modules_and_files_that_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    dotted = {d for d in _DOTTED.findall(text) if not d.startswith("retrieval.toml")}
    assert sorted(d for d in dotted if not _resolves(d)) == []
    paths = {p.rstrip(".") for p in _PATH.findall(text)}
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []


def _slug(heading: str) -> str:
    from markdown.extensions.toc import slugify

    return str(slugify(heading, "-"))


def test_the_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", text):
        path, anchor = target
        if re.match(r"\w+://", path):
            continue
        assert (ROOT / path).exists(), path
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(encoding="utf-8"), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{path}#{anchor}"


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_the_examples_import_only_the_public_api(page: Path) -> None:
    for block in _python_blocks(page.read_text(encoding="utf-8")):
        for line in re.findall(r"^(?:from|import) retrieval\S*.*$", block, re.M):
            found = re.fullmatch(r"from retrieval import (.+)", line)
            assert found, f"{page.name}: `{line}` is not the public API (from retrieval import ...)"
            names = {n.strip() for n in found[1].split("#")[0].split(",")}
            assert names <= set(retrieval.__all__), f"{page.name}: {sorted(names - set(retrieval.__all__))}"


def _example(page: Path, module: str) -> str:
    text = page.read_text(encoding="utf-8")
    (block,) = [b for b in _python_blocks(text) if b.startswith(f"# {module}.py\n")]
    return block


def test_the_readme_retriever_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = _example(README, "myretriever")
    assert readme == _example(DOCS / "methods.md", "myretriever"), "the README and docs/methods.md show one example"
    (tmp_path / "myretriever.py").write_text(readme, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("myretriever", None)
    dataset = load_dataset(DEMO_DATA)
    run = evaluate(dataset, load_settings(tmp_path), methods=["myretriever:factory"])
    ranked = run.ranked_ids("title-overlap")
    assert len(ranked) == len(dataset.questions)
    # Independently: the documents sharing the most title words with a question, ties by corpus order.
    question = dataset.questions[0]
    words = set(question.text.lower().split())
    overlap = [len(words & set(d.title.lower().split())) for d in dataset.documents]
    best = max(overlap)
    assert ranked[question.id][0] == dataset.documents[overlap.index(best)].id
