"""One recording of a profile at a time: the lock a recording (or a compaction of the store) holds
from its start to its commit or discard.

Two recordings at once would interleave their segments and their commits: the second one's
discard could remove the segment files the first one committed. The second is refused in one
line instead of waiting (a recording can take hours). The lock file is in the cache folder, which
is not committed, as the baseline's lock: it never shows in a review.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from retrieval.recording.cassette_files import CassetteError

__all__ = ["Held", "hold_recording"]


class Held(Protocol):
    """A lock held: `release()` lets the next recording start."""

    def release(self) -> None: ...


def hold_recording(lock: Path, directory: Path, profile: str) -> Held:
    """Take `lock` for the recording of `directory` (profile `profile`), without waiting;
    CassetteError in one line when another run holds it or the cache folder cannot hold it."""
    from filelock import FileLock, Timeout

    held = FileLock(lock, timeout=0)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        held.acquire()
    except Timeout:
        raise CassetteError(
            f"{directory}: another run is recording or compacting profile {profile!r} (it holds {lock}); nothing "
            "was changed. Let it finish, then run again."
        ) from None
    except OSError as exc:
        raise CassetteError(
            f"{lock.parent}: cannot hold the recording lock there ({exc.strerror or exc}); make the cache folder a "
            "writable folder (the `cache` setting), then record again"
        ) from exc
    return held
