"""Every path the project file or the defaults name stays inside the project root: nothing the
tool reads as the project's, or writes, lands outside it.

Checked once the settings are resolved, symbolic links resolved: `dataset`, `cassettes`,
`vectors`, `cache`, `baseline` and `snapshots`, and the profile's own folders under the cassettes
and the vectors (`cassettes/<profile>` linked to a folder elsewhere would take the recording
there). A path given as a flag (`--dataset ../elsewhere`) is typed by the user for this run and
resolves from the working directory, unchecked. The error names the key; `load_settings` adds
the file and the line that writes it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from retrieval.config.project_file import shown_path
from retrieval.config.setting_values import PATH_KEYS
from retrieval.config.settings import ConfigError, Settings

__all__ = ["check_confined"]


def _outside(path: Path, root: Path) -> Path | None:
    """Where `path` leads, links resolved, when that is outside `root`; else None."""
    resolved = path.resolve()
    return None if resolved == root or resolved.is_relative_to(root) else resolved


def check_confined(settings: Settings, written: Mapping[str, Any], flags: Collection[str], where: str) -> None:
    """ConfigError naming the first configured path (`written`: key -> the value as written in the
    project file or the defaults) that resolves outside the project root; `flags`: the keys a
    flag set, which are not checked."""
    root = Path(settings.root).resolve()
    fix = f"nothing the tool reads or writes for the project may leave it ({root}): give a path inside it"
    for key in PATH_KEYS:
        if key in written and key not in flags:
            lands = _outside(Path(getattr(settings, key)), root)
            if lands is not None:
                raise ConfigError(
                    f"{where}: {key} = {written[key]!r} resolves to {lands}, outside the project: {fix}.", at=(key,)
                )
    # The profile's folders: one may be a link to elsewhere even when its parent is inside.
    profile = settings.profile.name
    vectors_key = "vectors" if settings.vectors else "cassettes"  # the key that decides the folder
    for label, key, folder in (
        ("cassettes", "cassettes", Path(settings.cassettes) / profile),
        (
            "vectors" if settings.vectors else "vectors (beside cassettes)",
            vectors_key,
            Path(settings.vectors_folder) / profile,
        ),
    ):
        if key in flags:
            continue
        lands = _outside(folder, root)
        if lands is not None:
            raise ConfigError(
                f"{where}: {label}: the profile's folder {shown_path(folder, root)} is a link to {lands}, "
                f"outside the project: {fix}.",
                at=(key,) if key in written else (),
            )
