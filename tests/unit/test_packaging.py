"""Every data file the package reads at run time is declared as package data, so a plain
(non-editable) install, as another repository would do, carries it; the package's names load
on first use."""

from __future__ import annotations

import fnmatch
import importlib
import importlib.machinery
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_non_python_file_of_the_package_is_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["retrieval"]
    package = ROOT / "retrieval"
    # A compiled extension built in place (`pip install -e .`) is an ext-module's build, not data.
    built = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    data = [
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file()
        and p.suffix not in {".py", ".pyc"}
        and "__pycache__" not in p.parts
        and not p.name.endswith(built)
    ]
    assert "config/defaults.toml" in data
    missing = [f for f in data if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert not missing, f"add to [tool.setuptools.package-data] in pyproject.toml: {missing}"


def test_the_package_exports_load_on_first_use() -> None:
    import retrieval

    assert sorted(retrieval.__all__) == sorted(retrieval._EXPORTS)
    for name in retrieval.__all__:
        assert getattr(retrieval, name) is getattr(importlib.import_module(retrieval._EXPORTS[name]), name)
    with pytest.raises(AttributeError, match="module 'retrieval' has no attribute 'nothing'"):
        _ = retrieval.nothing
