"""The package installs as a wheel with everything it needs: the package data the tool reads at run
time, the extras the README names, the entry points (the command, the pytest plugin), the one
version, and the vector search's compiled kernel where a C compiler exists (the package declares
an extension: a wheel for this interpreter and platform, without the kernel where the compiler is
missing, the build going on: it then searches with numpy). Built from a
copy of the sources (nothing written into the checkout), without the network (the build backend
is the test extra's setuptools, called as pip would call it)."""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

import retrieval

# A build of the package by setuptools in its own process, from a copy of the sources (1.5 to 2 s of
# CPU): the slow set (CI's `slow` job), with the other end-to-end cases.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KERNEL = "retrieval/methods/support/_vector_kernel"
# The kernel's files, each shipped (a build from the sdist or the wheel's sources compiles them all).
KERNEL_SOURCES = {
    KERNEL + ".c",
    KERNEL + ".h",
    "retrieval/methods/support/_vector_scan.c",
    "retrieval/methods/support/_vector_ranking.c",
}


def _kernel_files(names: set[str]) -> set[str]:
    return {name for name in names if name.startswith("retrieval/methods/support/_vector_")}


def _compiler() -> bool:
    return shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is not None


def _build(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str] | None = None) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source")
    # Without the kernel an editable install built in place: the wheel's is compiled from the source.
    ignored = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd")
    shutil.copytree(ROOT / "retrieval", source / "retrieval", ignore=ignored)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    # What `pip wheel --no-build-isolation` calls (PEP 517), without pip's own start.
    build = "import sys; from setuptools import build_meta; build_meta.build_wheel(sys.argv[1])"
    done = subprocess.run(
        [sys.executable, "-c", build, str(out)], cwd=source, capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("*.whl")
    version = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = f"{version}-{version}-{platform}"
    assert built.name == f"retrieval_regression-{retrieval.__version__}-{tag}.whl"
    return zipfile.ZipFile(built)


def _unoptimised_compiler(folder: Path) -> dict[str, str]:
    """The build's environment with CC the configured compiler, its optimisation turned off last.

    The wheel's files are what these tests check, not the kernel's speed: the compiler still gets
    the extension's own flags (-O3 -ffp-contract=off, which it must accept) and builds the same
    module, unoptimised: about half the compile's CPU (optimising the kernel is most of it)."""
    if os.name != "posix" or not _compiler():
        return dict(os.environ)
    wrapper = folder / "cc"
    configured = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    wrapper.write_text(f'#!/bin/sh\nexec {configured} "$@" -O0 -g0\n')
    wrapper.chmod(0o755)
    return {**os.environ, "CC": str(wrapper)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return _build(tmp_path_factory, env=_unoptimised_compiler(tmp_path_factory.mktemp("compiler")))


def test_the_wheel_holds_every_file_the_package_reads(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    package = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "retrieval").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert sorted(package - names) == []
    assert {"retrieval/config/defaults.toml", "retrieval/py.typed", "retrieval/methods/prompts/rerank-v1.txt"} <= names


def test_the_wheel_holds_the_compiled_kernel_where_a_compiler_exists(wheel: zipfile.ZipFile) -> None:
    if not _compiler():
        pytest.skip("no C compiler: the wheel searches with numpy alone")
    names = set(wheel.namelist())
    assert _kernel_files(names) == KERNEL_SOURCES | {KERNEL + sysconfig.get_config_var("EXT_SUFFIX")}


def test_the_wheel_names_the_version_the_extras_and_the_entry_points(wheel: zipfile.ZipFile) -> None:
    info = f"retrieval_regression-{retrieval.__version__}.dist-info"
    metadata = email.parser.Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
    assert metadata["Version"] == retrieval.__version__
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert sorted(metadata.get_all("Provides-Extra") or []) == sorted(extras)
    assert {"gate", "ray", "postgres", "docs"} <= set(extras)
    entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert "[pytest11]\nretrieval = retrieval.gate.plugin" in entry_points
    assert "retrieval-eval = retrieval.cli:main" in entry_points


def test_the_wheel_builds_without_a_compiler_and_without_the_kernel(tmp_path_factory: pytest.TempPathFactory) -> None:
    # The extension is optional: where the compiler is missing, the build goes on without it.
    built = _build(tmp_path_factory, env={**os.environ, "CC": str(tmp_path_factory.getbasetemp() / "no-cc")})
    names = set(built.namelist())
    assert "retrieval/methods/vector.py" in names
    assert _kernel_files(names) == KERNEL_SOURCES
