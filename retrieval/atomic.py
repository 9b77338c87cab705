"""Writing a file so that a crash leaves the old content or the new, never a part of either."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write", "atomic_write_text"]


def _read_umask() -> int:
    # os.umask can only be read by setting it; do it once, at import, before any worker thread.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """Call `write` on a temporary file beside `path`, flush it to disk, then rename it over `path`.

    The file gets the permissions a plain `open` would give (mkstemp's 0600 would hide a
    committed baseline from other users); on any error the temporary file is removed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """`atomic_write` of UTF-8 text."""
    data = text.encode("utf-8")

    def write(handle: BinaryIO) -> None:
        handle.write(data)

    atomic_write(path, write)
