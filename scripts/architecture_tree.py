"""Generate the package tree in docs/architecture.md from the package itself.

    python scripts/architecture_tree.py           rewrite the block between the markers
    python scripts/architecture_tree.py --check   exit 1 if the block differs from the files

One line per sub-package, in the order of the layer contract ([tool.importlinter] in
pyproject.toml, highest first), with the first line of its docstring and the names of its
modules: what each module does is its own docstring's job, never repeated here, so a module
added, moved or removed shows in the tree at once.
"""

from __future__ import annotations

import ast
import sys
import textwrap
import tomllib
from collections.abc import Sequence
from pathlib import Path

from generated_block import block_main

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "retrieval"
PAGE = ROOT / "docs" / "architecture.md"
START = "<!-- package-tree:start -->"
END = "<!-- package-tree:end -->"
NOTE = "<!-- Generated from retrieval/ by `python scripts/architecture_tree.py`; do not edit by hand. -->"
WIDTH = 100


def layers() -> list[str]:
    """The layer contract's sub-packages, highest first (`a | b` are one layer)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [name.strip() for layer in contract["layers"] for name in layer.split("|")]


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.strip().split("\n\n", 1)[0]
    return " ".join(first.split())


def _modules(folder: Path) -> list[str]:
    names = [p.stem for p in sorted(folder.glob("*.py")) if p.name != "__init__.py"]
    # A compiled extension (built in place by `pip install -e .`, or absent) is its source's: the
    # tree is the same with or without a build.
    data = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix not in {".py", ".pyc", ".so", ".pyd"})
    # A folder of data (no __init__.py), such as data/stopwords/: named, its files are its own.
    folders = sorted(
        f"{p.name}/"
        for p in folder.iterdir()
        if p.is_dir() and p.name != "__pycache__" and not (p / "__init__.py").exists()
    )
    return names + data + folders


def _entry(folder: Path, depth: int) -> list[str]:
    indent = "  " * depth
    head = f"{indent}{folder.name}/"
    lines = textwrap.wrap(
        _summary(folder / "__init__.py"), WIDTH, initial_indent=f"{head:<18}", subsequent_indent=" " * 18
    )
    modules = _modules(folder)
    if modules:
        lines += textwrap.wrap(", ".join(modules), WIDTH, initial_indent=" " * 18 + "· ", subsequent_indent=" " * 20)
    for sub in sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file()):
        lines += _entry(sub, depth + 1)
    return lines


def render_tree() -> str:
    """The generated block, markers included."""
    order = [name.removeprefix("retrieval.") for name in layers()]
    on_disk = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    top = [p.stem for p in sorted(PACKAGE.glob("*.py"))]
    lines = [f"retrieval/{'':<8}{_summary(PACKAGE / '__init__.py')}", f"{'':<18}· {', '.join(top)}"]
    for name in [n for n in order if n in on_disk] + sorted(on_disk - set(order)):
        lines += _entry(PACKAGE / name, 1)
    return "\n".join([START, NOTE, "", "```text", *lines, "```", "", END])


def main(argv: Sequence[str] | None = None) -> int:
    return block_main(argv, __doc__, [PAGE], START, END, render_tree, "python scripts/architecture_tree.py")


if __name__ == "__main__":
    sys.exit(main())
