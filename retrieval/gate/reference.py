"""The baseline of a git ref (`origin/main`): what a pull request is compared with.

Read with `git show REF:./file` from the file's own folder (so the path is right wherever the
project sits in the repository), never by a checkout: the working tree is left as it is.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from retrieval.gate.schema import FORMAT, BaselineError, parse_baseline

__all__ = ["baseline_at"]


def _git(args: list[str], folder: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=folder, capture_output=True, timeout=60, check=False)
    except FileNotFoundError as exc:
        raise BaselineError("--retrieval-baseline-ref needs git, which is not installed here.") from exc


def baseline_at(ref: str, path: str | Path) -> dict[str, Any]:
    """The baseline file `path` as it is at git `ref`, checked as any baseline is; an empty one
    when the ref has no such file (the pull request adds the first baseline). BaselineError in
    one line when the ref does not exist (e.g. not fetched) or the folder is not in a repository."""
    path = Path(path)
    folder = path.parent if path.parent.is_dir() else Path.cwd()
    if ref.startswith("-"):
        raise BaselineError(f"--retrieval-baseline-ref {ref!r}: a git ref cannot start with '-'.")
    found = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], folder)
    if found.returncode != 0:
        inside = _git(["rev-parse", "--is-inside-work-tree"], folder)
        if inside.returncode != 0:
            raise BaselineError(f"--retrieval-baseline-ref {ref}: {folder} is not in a git repository.")
        raise BaselineError(
            f"--retrieval-baseline-ref {ref}: no such commit in this repository (a shallow CI checkout has to "
            f"fetch it first: `git fetch --depth=1 origin main`)."
        )
    commit = found.stdout.decode().strip()
    shown = _git(["show", f"{commit}:./{path.name}"], folder)
    if shown.returncode != 0:
        return {"format": FORMAT, "profiles": {}}  # no baseline at the ref yet
    return parse_baseline(shown.stdout, f"{ref}:{path.name}")
