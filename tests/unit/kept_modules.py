"""The tests' snapshot of sys.modules for pytester (the unit tests' conftest.py puts it in place)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

from _pytest.pytester import SysModulesSnapshot

__all__ = ["KeepingSnapshot"]


class KeepingSnapshot(SysModulesSnapshot):
    """pytester's snapshot of sys.modules, which on restore also keeps the modules first imported
    since it was taken that come from the installation or this repository (the package, its
    dependencies, the tests' own helpers); what came from the temporary folders (the test
    projects' conftest.py and test files) is dropped, as pytester's own does with everything.

    pytester's in-process runs (the gate on temporary projects) dropped from sys.modules every
    module first imported during a run, so the next run imported it again: vcrpy and what it
    patches, and the package's lazily imported modules, cost about 25 ms a run that way; and scipy's C
    extensions do not survive a second import: a gate run that first called the paired bootstrap
    dropped scipy.stats, and the next test's import of it failed ("cannot load module more than
    once per process"), test_baseline_trust.py after test_gate_reference.py. Likewise httpx: it
    maps httpcore's errors to its own through a table it fills on the first failed request; filled
    in a run, it kept the dropped httpcore's classes, so that a later test's refused connection
    escaped as a bare httpcore.ConnectError instead of httpx's (test_recorded_methods.py after
    test_pytest_plugin.py). A real session imports each once, and so do the runs with this
    snapshot. Each pytest-xdist worker used to import the whole package, scipy.stats, vcrpy and Ray
    before its first run for the same reason (about 1 s of CPU a worker, whatever its tests read)."""

    def __init__(self, lasting: tuple[str, ...], temporary: str, preserve: Callable[[str], bool] | None = None) -> None:
        """`lasting`: the folders whose modules are kept (each ending with a separator), unless
        under `temporary`; `preserve`: pytester's own rule, applied first."""
        super().__init__(preserve)
        self._lasting, self._temporary = lasting, temporary
        self._known = set(sys.modules)

    def restore(self) -> None:
        kept = {name: m for name, m in sys.modules.items() if name not in self._known and self._lasts(m)}
        super().restore()
        sys.modules.update(kept)

    def _lasts(self, module: object) -> bool:
        spec = getattr(module, "__spec__", None)
        if not isinstance(module, types.ModuleType) or spec is None:
            return False  # made by a test, not imported
        if spec.origin in ("built-in", "frozen"):
            return True
        where = spec.origin or next(iter(spec.submodule_search_locations or ()), None)
        return where is not None and where.startswith(self._lasting) and not where.startswith(self._temporary)
