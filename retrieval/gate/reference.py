"""What a git ref (the base branch, `origin/main`) gates: what a pull request is compared with.

Read with `git show REF:path`, never by a checkout (the working tree is left as it is), and from
the ref's OWN files: its project file (which profile it gates, its `baseline` and `snapshots`
paths, its tolerance, its dataset), its baseline entry and its ranking snapshots, each checked as
the pull request's are. So a pull request that points `baseline` elsewhere, switches `profile`,
moves the project or rewrites the dataset still meets what its base branch gates.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from retrieval.config import ConfigError, Settings, settings_from_table
from retrieval.config.project_file import parsed_toml
from retrieval.gate.schema import FORMAT, BaselineError, parse_baseline
from retrieval.gate.snapshots import Rankings, parse_snapshots, snapshot_path, snapshot_problem

__all__ = ["BaseBranch", "base_branch", "baseline_at", "commit_of"]

PROJECT_FILES = ("retrieval.toml", "pyproject.toml")
# The files that decide what the gate compares, beside the baseline set: a reviewer is told when
# a pull request edits them (git pathspecs from the repository's top).
DECIDING = (":(top).github/workflows", ":(top,glob)**/CODEOWNERS", ":(top,glob)**/conftest.py")


def _git(args: list[str], folder: Path, given: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=folder, input=given, capture_output=True, timeout=60, check=False)
    except FileNotFoundError as exc:
        raise BaselineError("--retrieval-baseline-ref needs git, which is not installed here.") from exc


def commit_of(ref: str, folder: Path) -> str:
    """The commit `ref` names, seen from `folder`; BaselineError in one line when the ref starts
    with '-' (git would read it as an option), does not exist (not fetched) or the folder is not
    in a repository."""
    if ref.startswith("-"):
        raise BaselineError(f"--retrieval-baseline-ref {ref!r}: a git ref cannot start with '-'.")
    found = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], folder)
    if found.returncode != 0:
        inside = _git(["rev-parse", "--is-inside-work-tree"], folder)
        if inside.returncode != 0:
            raise BaselineError(f"--retrieval-baseline-ref {ref}: {folder} is not in a git repository.")
        raise BaselineError(
            f"--retrieval-baseline-ref {ref}: no such commit in this repository (a shallow CI checkout has to "
            f"fetch it first: `git fetch --depth=1 origin main`)."
        )
    return found.stdout.decode().strip()


def _commit_and_top(ref: str, folder: Path) -> tuple[str, Path]:
    """`commit_of(ref, folder)` and the repository's top, from ONE `git rev-parse` where it
    answers both (a git process costs as much as the rest of the reading); where it does not (no
    such ref, no repository, no work tree), from the two calls as before, so as to fail alike."""
    if not ref.startswith("-"):
        asked = ["rev-parse", "--show-toplevel", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"]
        both = _git(asked, folder)
        top, _, sha = both.stdout.rstrip(b"\n").rpartition(b"\n")
        if both.returncode == 0 and top and sha and all(c in b"0123456789abcdef" for c in sha):
            return sha.decode(), Path(top.decode().strip()).resolve()
    commit = commit_of(ref, folder)
    return commit, Path(_git(["rev-parse", "--show-toplevel"], folder).stdout.decode().strip()).resolve()


def _show(commit: str, path: str, top: Path) -> bytes | None:
    """The bytes of `path` (from the repository's top) at `commit`, or None when it has no such file."""
    shown = _git(["show", f"{commit}:{path}"], top)
    return shown.stdout if shown.returncode == 0 else None


def _shown(
    commit: str,
    paths: list[str],
    top: Path,
    ahead: list[str] | None = None,
    known: Mapping[str, bytes | None] | None = None,
) -> dict[str, bytes | None]:
    """`_show` of each of `paths` at `commit`, read by ONE `git cat-file --batch` (a git process
    per file was most of what a gate against a ref spent in git). What the batch cannot answer as
    a blob or missing (a tree, a path with a newline, git failing) is read by `_show`, as before.
    `ahead`: paths likely asked next, read in the same batch (those it answers are in the result
    too, the rest left to the next call); `known`: paths already read at `commit`, not read again."""
    known = known or {}
    asked = [p for p in dict.fromkeys([*paths, *(ahead or [])]) if "\n" not in p and p not in known]
    found: dict[str, bytes | None] = dict(known)
    batch = _git(["cat-file", "--batch"], top, "".join(f"{commit}:{p}\n" for p in asked).encode()) if asked else None
    out = batch.stdout if batch is not None and batch.returncode == 0 else b""
    at = 0
    for path in asked if out else ():
        end = out.find(b"\n", at)
        if end < 0:
            break
        header, at = out[at:end].decode("utf-8", errors="replace"), end + 1
        if header.endswith(" missing"):
            found[path] = None
            continue
        words = header.split(" ")
        if len(words) != 3 or not words[2].isdigit():
            break  # ambiguous, or not the batch's answer: the rest by `_show`
        size = int(words[2])
        if words[1] == "blob":
            found[path] = out[at : at + size]
        at += size + 1  # the object and its newline
    shown = {p: found[p] if p in found else _show(commit, p, top) for p in paths}
    return {**shown, **{p: found[p] for p in ahead or [] if p in found and p not in shown}}


def baseline_at(ref: str, path: str | Path) -> dict[str, Any]:
    """The baseline file `path` as it is at git `ref`, checked as any baseline is; an empty one
    when the ref has no such file (the pull request adds the first baseline). BaselineError in
    one line when the ref does not exist (e.g. not fetched) or the folder is not in a repository."""
    path = Path(path)
    folder = path.parent if path.parent.is_dir() else Path.cwd()
    commit = commit_of(ref, folder)
    shown = _git(["show", f"{commit}:./{path.name}"], folder)
    if shown.returncode != 0:
        return {"format": FORMAT, "profiles": {}}  # no baseline at the ref yet
    return parse_baseline(shown.stdout, f"{ref}:{path.name}")


@dataclass(frozen=True)
class BaseBranch:
    """What a git ref gates for this project, read from its own files.

    `project` is its project file (a path from the repository's top), None when the ref has no
    retrieval project here (a pull request that adds the gate: nothing to lower); `moved_from`
    says the project sat elsewhere at the ref (its folder moved). `profile` is the profile the
    ref gates, `entry` its baseline entry (None: it gates none), `snapshots` its top 10s, `texts`
    its questions' texts (id -> text, to show an edit old -> new), `touched` the files deciding
    the gate that differ between the ref and the working tree, `gone` the ref's retrieval
    projects this working tree no longer has.
    """

    ref: str
    commit: str
    project: str | None = None
    profile: str | None = None
    tolerance: float = 0.0
    # What a drop resting on unjudged documents does: the base branch's own setting ("fail", "warn").
    unjudged: str = "fail"
    # Whether LLM judgments count: the base branch's own setting (accept_llm_judgments).
    accept_llm_judgments: bool = False
    # The grade from which a document counts as relevant: the base branch's own relevant_grade.
    relevant_grade: int = 1
    k: int = 5
    dataset: str | None = None
    entry: Mapping[str, Any] | None = None
    snapshots: Rankings = field(default_factory=dict)
    texts: Mapping[str, str] = field(default_factory=dict)
    baseline: str = ""  # "main:baselines/metrics.json", as the failures name it
    touched: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    moved_from: str | None = None


def _relative(path: str | Path, top: Path) -> str | None:
    try:
        return PurePosixPath(Path(path).resolve().relative_to(top).as_posix()).as_posix()
    except ValueError:
        return None


def _table(raw: bytes, name: str, source: str) -> dict[str, Any] | None:
    """The retrieval settings of a project file's bytes (None: a pyproject.toml without them)."""
    try:
        data = parsed_toml(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BaselineError(f"{source}: the base branch's project file cannot be read ({exc}).") from exc
    if name == "retrieval.toml":
        return data
    table = data.get("tool", {}).get("retrieval")
    return table if isinstance(table, dict) and table else None


def _project_at(
    read: Callable[[list[str]], Mapping[str, bytes | None]], folder: str, ref: str
) -> tuple[str, dict[str, Any]] | None:
    """The ref's project file in `folder` (from the top) and its settings table, or None
    (`read`: the files at the ref, by path)."""
    paths = {name: f"{folder}/{name}" if folder else name for name in PROJECT_FILES}
    shown = read(list(paths.values()))
    for name, path in paths.items():
        raw = shown[path]
        if raw is not None and (table := _table(raw, name, f"{ref}:{path}")) is not None:
            return path, table
    return None


def _projects_gone(commit: str, top: Path) -> list[str]:
    """The ref's retrieval project files that the working tree no longer holds as such."""
    listed = _git(["ls-tree", "-r", "--name-only", commit], top)
    found = [p for p in listed.stdout.decode().splitlines() if PurePosixPath(p).name == "retrieval.toml"]
    grepped = _git(["grep", "-l", "-F", "[tool.retrieval", commit, "--", "*pyproject.toml"], top)
    found += [line.split(":", 1)[1] for line in grepped.stdout.decode().splitlines() if ":" in line]
    from retrieval.config import project_file_in

    return sorted(p for p in found if project_file_in((top / p).parent) != top / p)


QUESTION_FILES = (("questions.jsonl", "id"), ("queries.jsonl", "_id"))


def _text_files(dataset: str | None) -> list[str]:
    """The files `_texts` reads the questions' texts from, at the ref (from the top)."""
    return [] if dataset is None else [f"{dataset}/{name}" for name, _ in QUESTION_FILES]


def _texts(shown: Mapping[str, bytes | None], dataset: str | None) -> dict[str, str]:
    """Each question's text at the ref (native questions.jsonl, BEIR queries.jsonl; `shown`
    holds them as read there); empty when they cannot be read there (a dataset outside the
    repository): the edits then show digests."""
    if dataset is None:
        return {}
    for name, key in QUESTION_FILES:
        raw = shown[f"{dataset}/{name}"]
        if raw is None:
            continue
        texts = {}
        for line in raw.decode("utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get(key), str | int):
                texts[str(record[key])] = str(record.get("text", ""))
        return texts
    return {}


def _touched(commit: str, top: Path, paths: list[str]) -> tuple[str, ...]:
    """The files deciding the gate (the workflows, CODEOWNERS, conftest files, the project file,
    the baseline set) that differ between `commit` and the working tree, committed or not."""
    specs = [*DECIDING, *(f":(top){p}" for p in dict.fromkeys(paths))]
    changed = _git(["diff", "--name-only", commit, "--", *specs], top).stdout.decode().splitlines()
    added = _git(["ls-files", "--others", "--exclude-standard", "--", *specs], top).stdout.decode().splitlines()
    return tuple(sorted({p for p in [*changed, *(_relative(top / a, top) or a for a in added)] if p}))


def base_branch(
    ref: str, settings: Settings, profile: str | None = None, *, texts: bool = True, touched: bool = True
) -> BaseBranch:
    """What `ref` gates for the project of `settings`: its own project file's profile (`profile`
    when one was asked for by flag or environment, as for the run), baseline entry, snapshots
    and tolerance, read with `git show`, each checked on load. `texts` reads its questions'
    texts too (the gate's items are named without them); `touched` says which deciding files
    differ (`BaseBranch.touched`; without it, none are listed and git is not asked). BaselineError
    in one line when the ref cannot be read or its files are damaged."""
    root = Path(settings.root).resolve()
    commit, top = _commit_and_top(ref, root)
    folder = _relative(root, top) or ""
    folder = "" if folder == "." else folder
    project_file = [settings.source] if settings.source and Path(settings.source).is_file() else []
    own = [*project_file, settings.baseline, settings.snapshots]
    touched_paths = [r for p in own if (r := _relative(p, top))]
    # The ref's baseline set is most often where this run's is: read in the batch of its project file.
    likely: list[str | Path] = [settings.baseline, snapshot_path(settings.snapshots, settings.profile.name)]
    dataset_here = _relative(settings.dataset, top) if texts else None
    ahead = [*(r for p in likely if (r := _relative(p, top))), *_text_files(dataset_here)]
    cache: dict[str, bytes | None] = {}

    def read(paths: list[str], ahead: list[str] | None = None) -> dict[str, bytes | None]:
        cache.update(_shown(commit, paths, top, ahead, cache))
        return {p: cache[p] for p in paths}

    found = _project_at(lambda paths: read(paths, ahead), folder, ref)
    moved_from, gone = None, []
    if found is None:
        gone = _projects_gone(commit, top)
    if found is None and len(gone) == 1:
        # The project's folder moved (or its project file was renamed): the ref's is still the one it gates.
        moved_from = gone[0]
        found = _project_at(read, str(PurePosixPath(moved_from).parent).removeprefix("."), ref)
    changed = (lambda paths: _touched(commit, top, paths)) if touched else (lambda paths: ())
    if found is None:
        return BaseBranch(ref, commit, touched=changed(touched_paths), gone=tuple(gone))
    path, table = found
    base_root = top / PurePosixPath(path).parent
    try:
        theirs = settings_from_table(table, f"{ref}:{path}", base_root, {"profile": profile})
    except ConfigError as exc:
        raise BaselineError(f"the project file of {ref} cannot be read by this version: {exc}") from exc
    baseline = _relative(theirs.baseline, top)
    snapshots_file = _relative(snapshot_path(theirs.snapshots, theirs.profile.name), top)
    if baseline is None or snapshots_file is None:
        raise BaselineError(f"{ref}:{path}: its baseline set lies outside the repository: it cannot be read at {ref}.")
    shown = f"{ref}:{baseline}"
    dataset = _relative(theirs.dataset, top)
    files = read([baseline, snapshots_file, *(_text_files(dataset) if texts else [])])
    raw = files[baseline]
    profiles: dict[str, Any] = parse_baseline(raw, shown)["profiles"] if raw is not None else {}
    entry = profiles.get(theirs.profile.name)
    raw = files[snapshots_file]
    snapshots = parse_snapshots(raw, f"{ref}:{snapshots_file}") if raw is not None else {}
    problem = snapshot_problem(entry, snapshots, f"{ref}:{snapshots_file}", shown)
    if problem:
        raise BaselineError(problem)
    touched_paths += [path, baseline, str(PurePosixPath(snapshots_file).parent)]
    return BaseBranch(
        ref,
        commit,
        project=path,
        profile=theirs.profile.name,
        tolerance=theirs.tolerance,
        unjudged=theirs.unjudged,
        accept_llm_judgments=theirs.accept_llm_judgments,
        relevant_grade=theirs.relevant_grade,
        k=theirs.k,
        dataset=dataset,
        entry=entry,
        snapshots=snapshots,
        texts=_texts(files, dataset) if texts else {},
        baseline=shown,
        touched=changed(touched_paths),
        gone=tuple(p for p in gone if p != moved_from),
        moved_from=moved_from,
    )
