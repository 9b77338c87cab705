"""The snapshot of sys.modules the tests' pytester runs take (kept_modules.py): what the
installation imported during a run stays, what a test project's folder imported goes."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest.pytester import SysModulesSnapshot
from kept_modules import KeepingSnapshot


@pytest.fixture(autouse=True)
def _modules_put_back() -> Iterator[None]:
    """sys.modules as it was before the test, whatever the snapshot under test kept."""
    outer = SysModulesSnapshot()
    yield
    outer.restore()


def _folder_module(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text("VALUE = 1\n", encoding="utf-8")


def test_a_run_keeps_what_came_from_the_installation_and_drops_the_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed, project = tmp_path / "installed", tmp_path / "temporary" / "project"
    _folder_module(installed, "kept_modules_installed")
    _folder_module(project, "kept_modules_project")
    (installed / "kept_modules_namespace").mkdir()  # a namespace package: a folder, no file
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.syspath_prepend(str(project))
    names = ["kept_modules_installed", "kept_modules_project", "kept_modules_namespace", "kept_modules_made"]
    replaced = "kept_modules_replaced"
    sys.modules[replaced] = types.ModuleType(replaced)
    before = sys.modules[replaced]

    snapshot = KeepingSnapshot((f"{installed}/", f"{tmp_path}/"), f"{tmp_path / 'temporary'}/")
    for name in names[:3]:
        importlib.import_module(name)
    sys.modules["kept_modules_made"] = types.ModuleType("kept_modules_made")  # made, not imported
    sys.modules[replaced] = types.ModuleType(replaced)
    snapshot.restore()

    assert "kept_modules_installed" in sys.modules and "kept_modules_namespace" in sys.modules
    # Under a lasting folder too, but in the temporary one: a test project's module.
    assert "kept_modules_project" not in sys.modules
    assert "kept_modules_made" not in sys.modules
    assert sys.modules[replaced] is before  # what the snapshot held comes back, as pytester's own


def test_pytesters_own_rule_still_applies() -> None:
    snapshot = KeepingSnapshot((), "/nowhere/", preserve=lambda name: name == "zope_like")
    sys.modules["zope_like"] = types.ModuleType("zope_like")
    snapshot.restore()
    assert "zope_like" in sys.modules


def test_the_pytester_fixture_takes_this_snapshot_for_its_runs(pytester: pytest.Pytester) -> None:
    import _pytest.pytester

    taken = _pytest.pytester.SysModulesSnapshot()
    assert isinstance(taken, KeepingSnapshot)
    # What the runs import from the installation stays for the next run; the project's goes.
    (pytester.path / "conftest.py").write_text("import kept_modules_run_project\n", encoding="utf-8")
    (pytester.path / "kept_modules_run_project.py").write_text("", encoding="utf-8")
    pytester.makepyfile(test_one="def test_one():\n    import tabnanny\n")
    assert "tabnanny" not in sys.modules  # a standard module nothing else here imports
    pytester.syspathinsert()
    pytester.inline_run().assertoutcome(passed=1)
    assert "kept_modules_run_project" not in sys.modules and "test_one" not in sys.modules
    assert "tabnanny" in sys.modules
