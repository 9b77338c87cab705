"""The command's process keeps the memory it frees, for its large corpus's temporary arrays."""

from __future__ import annotations

import os

__all__ = ["keep_freed_memory", "numpy_huge_pages"]

# glibc's mallopt parameters (malloc.h) and the values the command sets (keep_freed_memory).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_MALLOC_SETTINGS = ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 64 << 20))


def keep_freed_memory() -> None:
    """Let this process reuse the memory it frees instead of returning it to the system at once.

    A large corpus's analysis and index make hundreds of temporary numpy arrays of a few MB each;
    glibc maps each above 128 KiB anew (mmap) and unmaps it when freed, so the kernel zero-fills
    every page of every one of them again: about 0.4 s of system CPU in a 100,000-document run.
    With arrays up to 32 MiB taken from the heap and the heap's top kept (up to 1 GiB), the pages
    are reused; the peak memory is the same. The command (retrieval.cli) calls it for its own
    process; glibc only (a no-op elsewhere).

    numpy's transparent huge pages are turned off too (numpy_huge_pages)."""
    numpy_huge_pages(False)
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # no confstr (Windows), or a libc that has no such name
        glibc = None
    if not glibc:
        return
    import ctypes

    mallopt = ctypes.CDLL(None).mallopt
    for parameter, value in _MALLOC_SETTINGS:
        mallopt(parameter, value)


def numpy_huge_pages(enabled: bool) -> bool:
    """Whether numpy asks the kernel for transparent huge pages (madvise) for its large arrays
    from now on; returns the previous setting (False where numpy has no such setting).

    Linux with THP in "madvise" mode (a common default) then backs each array of 4 MiB or more with
    2 MiB pages, each zero-filled whole on its first touch and, with defrag "madvise", found by
    compacting memory in the faulting call: the 100,000-document command's index alone took 0.3 s
    of system CPU so on a shared 2-core machine (0.05 s with 4 KiB pages), the analysis no less CPU
    with them. The same switch as numpy's NUMPY_MADVISE_HUGEPAGE=0, which only acts at its import."""
    import numpy as np

    setter = getattr(getattr(np, "_core", None), "multiarray", None)
    setter = getattr(setter, "_set_madvise_hugepage", None)
    return bool(setter(enabled)) if setter is not None else False
