"""The project's baseline set on disk: the baseline file and its ranking snapshots, written as
one set under one lock (retrieval.gate.update), and put back after an update was killed.

Apart from retrieval.gate.result so that the pytest plugin can put a half-written set back before it
names the gate's items at collection, without loading the evaluator.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.config.settings import Settings
from retrieval.gate.snapshots import snapshot_path
from retrieval.gate.update import recover_baseline

__all__ = ["baseline_lock_of", "recover"]


def baseline_lock_of(settings: Settings) -> Path:
    """The lock every writer of the project's baseline set holds: in the cache folder, which is
    not committed, so the lock file never shows in a review."""
    return Path(settings.cache) / "baseline.lock"


def recover(settings: Settings) -> list[Path]:
    """Put back the baseline set a killed or failed update left half written, and remove its
    temporary files: every command calls it before it reads the baseline. Returns what it touched."""
    folder = Path(settings.snapshots)
    snapshots = {p.stem: p for p in folder.glob("*.json")} if folder.is_dir() else {}
    snapshots[settings.profile.name] = snapshot_path(settings.snapshots, settings.profile.name)
    return recover_baseline(settings.baseline, snapshots, lock=baseline_lock_of(settings))
