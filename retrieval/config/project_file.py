"""The project file: where it is (walking up from a folder), what it holds, which line writes a key.

The project file is `retrieval.toml`, else `[tool.retrieval]` in `pyproject.toml`, found by
walking up from the working directory (or the folder given); its folder is the project root.
"""

from __future__ import annotations

import copy
import functools
import tomllib
from pathlib import Path
from typing import Any

from retrieval.config.settings import ConfigError

__all__ = [
    "find_project_file",
    "find_project_root",
    "name_the_line",
    "parsed_toml",
    "project_file_in",
    "read_project_file",
    "shown_path",
]


@functools.lru_cache(maxsize=32)
def _parsed(text: str) -> dict[str, Any]:
    return tomllib.loads(text)


def parsed_toml(text: str) -> dict[str, Any]:
    """`tomllib.loads(text)`, parsed once per process for the same text: a run reads the defaults
    and its project file (twice: to find it, then its table), most often unchanged since the last
    run of the process, and their parsing cost more than the rest of the settings. A deep copy,
    the caller's to change; invalid TOML raises as `tomllib.loads` does (it is not remembered)."""
    return copy.deepcopy(_parsed(text))


def read_project_file(root: Path) -> tuple[dict[str, Any], str | None]:
    """The settings table of the project file in `root` and its path; ({}, None) when there is none."""
    for name, table in (("retrieval.toml", None), ("pyproject.toml", ("tool", "retrieval"))):
        path = root / name
        if not path.is_file():
            continue
        try:
            data = parsed_toml(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML ({exc}).") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}): save it as UTF-8.") from exc
        if table:
            for key in table:
                data = data.get(key, {})
            if not data:
                continue
        return data, str(path)
    return {}, None


def project_file_in(folder: Path) -> Path | None:
    """The folder's project file: retrieval.toml, or a pyproject.toml with a [tool.retrieval] table."""
    if (folder / "retrieval.toml").is_file():
        return folder / "retrieval.toml"
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = parsed_toml(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
            return pyproject if b"[tool.retrieval" in pyproject.read_bytes() else None
        if "retrieval" in data.get("tool", {}):
            return pyproject
    return None


def find_project_file(start: str | Path = ".") -> Path | None:
    """The project file nearest to `start`, walking up to the file system root; None when there is none.

    A damaged pyproject.toml that mentions [tool.retrieval] is still returned, so that reading it
    fails with its own error instead of silently falling back to the defaults.
    """
    folder = Path(start).resolve()
    for candidate in (folder, *folder.parents):
        found = project_file_in(candidate)
        if found is not None:
            return found
    return None


def shown_path(path: str | Path, root: str | Path) -> str:
    """A path as the user sees it in the project (relative to the root when inside it)."""
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return str(path)


def find_project_root(start: str | Path = ".") -> Path | None:
    """The folder of the nearest project file above `start` (see find_project_file), or None."""
    found = find_project_file(start)
    return found.parent if found else None


def name_the_line(error: ConfigError, source: str | None) -> None:
    """Add to the error the line of the project file that writes the key it is about."""
    message = str(error)
    if not (error.at and source and message.startswith(f"{source}:")):
        return
    from retrieval.config.toml_lines import key_line  # only on the error path

    table = ("tool", "retrieval") if Path(source).name == "pyproject.toml" else ()
    line = key_line(Path(source), (*table, *error.at))
    if line is not None:
        error.args = (f"{source}, line {line}:{message[len(source) + 1 :]}",)
