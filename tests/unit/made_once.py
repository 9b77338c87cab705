"""A folder made once per test process and copied by each test that starts from it (git
repositories with a gate run and a baseline: seconds to make, milliseconds to copy)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

_MADE: dict[tuple[str, str], Path] = {}


def made_once(kind: str, key: str, make: Callable[[Path], None]) -> Path:
    """The folder `make(folder)` filled, for this `kind` and `key`, made on the first call of this
    process and removed at its exit; later calls return the same folder (copy it, never edit it)."""
    if (kind, key) not in _MADE:
        base = Path(tempfile.mkdtemp(prefix=f"{kind}-made-"))
        atexit.register(shutil.rmtree, base, True)
        make(base)
        _MADE[kind, key] = base
    return _MADE[kind, key]
