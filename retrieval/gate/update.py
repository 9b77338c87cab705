"""Updating the baseline: the diff a reviewer reads, the refusal to lower a figure unseen, the
recorded acceptance of a drop, and the write of the baseline with its ranking snapshots as one
set under one lock.

A drop is accepted only with a reason (`--allow-regression "REASON"`); the entry keeps it with
each figure's value before and after (`accepted`), so a pull request compared with its base
branch's baseline (`--retrieval-baseline-ref`) passes exactly the drops it recorded.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from retrieval.files.atomic import AtomicSetError, commit_files, recover_files
from retrieval.gate.compare import at_k
from retrieval.gate.questions import data_changes, on_questions
from retrieval.gate.schema import ACCEPTED, BaselineError, flat_figures, load_baseline, parse_baseline, rounded
from retrieval.measures.figures import is_worse
from retrieval.report.verdict import figure_text

__all__ = [
    "ACCEPTED",
    "JudgedAs",
    "accepted_drop",
    "baseline_lock",
    "recover_baseline",
    "try_update",
    "update_baseline",
]


class JudgedAs(NamedTuple):
    """A run's entry as a base branch judges it (its relevant_grade, its accept_llm_judgments,
    the questions it gates): what a drop against it is measured on; `types` and `rescored` as
    `update_baseline` takes them."""

    entry: Mapping[str, Any]
    types: Mapping[str, str] | None
    rescored: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None


# How long an update waits for another one (of another profile) to finish writing.
LOCK_SECONDS = 120


def _fmt(name: str, value: float, sign: str = "") -> str:
    """A figure as the diff shows it: as every output of the gate does (`figure_text`)."""
    return figure_text(name, value, sign)


def _line(name: str, was: float | None, now: float | None) -> str:
    if was is None:
        return f"  {name}: new {_fmt(name, now or 0.0)}"
    if now is None:
        return f"  {name}: removed (was {_fmt(name, was)})"
    if now == was:
        return f"  {name}: {_fmt(name, was)} (unchanged)"
    return f"  {name}: {_fmt(name, was)} -> {_fmt(name, now)} ({_fmt(name, now - was, '+')})"


def _compare_figures(before: Mapping[str, float], after: Mapping[str, float]) -> tuple[list[str], dict[str, Any]]:
    """Lines for the figures that moved, and those that got worse (name -> {"from", "to"})."""
    lines, lowered = [], {}
    for name in [*after, *(n for n in before if n not in after)]:
        was, now = before.get(name), after.get(name)
        if was is not None and now is not None and now == was:
            continue
        lines.append(_line(name, was, now))
        if was is not None and now is None:
            # A figure that disappears (a method no longer run) is a gate lowered to nothing.
            lowered[f"{name} (removed)"] = {"from": was, "to": None}
        elif was is not None and now is not None and is_worse(name, was, now):
            lowered[name] = {"from": was, "to": now}
    return lines, lowered


def _diff(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    types: Mapping[str, str] | None = None,
    rescored: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """The diff's lines and the figures lowered (name -> {"from", "to"})."""
    changes = None
    if old and old.get("fingerprint") != new["fingerprint"] and types is not None:
        changes = data_changes(old, new.get("questions", {}), new.get("corpus", ""))
    if old and changes is not None and types is not None:
        # A dataset that kept questions: their figures are compared (and may not fall), the
        # edited ones under the judgments the baseline kept; then every figure on all questions.
        k = int(new["config"].get("k", 5))
        kept_old, kept_new = {**old, "fingerprint": new["fingerprint"]}, new
        if changes.questions_changed:
            old_types = {q: old["judgments"][q]["type"] for q in changes.rejudged}
            types = {**types, **old_types}
            judged = rescored(old) if rescored is not None and changes.rejudged else new
            kept_old, kept_new = (on_questions(e, changes.compared_on, types, k) for e in (kept_old, judged))
        lines, lowered = _diff(kept_old, kept_new)
        old_all = at_k(old, k) if old.get("config", {}).get("k", k) != k else old
        before, after = flat_figures(old_all.get("methods", {})), flat_figures(new["methods"])
        whole = [_line(n, before.get(n), after.get(n)) for n in [*after, *(n for n in before if n not in after)]]
        _, fell = _compare_figures(before, after)
        lowered.update({f"{name} (all questions)": change for name, change in fell.items()})
        return [
            f"  dataset changed: {changes}; compared on {changes.where}:",
            *(lines or ["  no figure changed on them"]),
            f"  every figure, old dataset ({len(old.get('questions', {}))} questions) -> new "
            f"({len(new.get('questions', {}))} questions):",
            *whole,
        ], lowered
    if old and old.get("fingerprint") != new["fingerprint"]:
        # Nothing in common: the old figures measured something else, so nothing is lowered;
        # the new baseline replaces the old one whole.
        lines = [
            f"  new dataset: {new['dataset']} (fingerprint {new['fingerprint']}) replaces "
            f"{old.get('dataset')} (fingerprint {old.get('fingerprint')})",
            *(f"  {name}: {_fmt(name, value)}" for name, value in flat_figures(new["methods"]).items()),
        ]
        return lines, {}
    lines = []
    now_k = new["config"].get("k")
    was_k = (old or {}).get("config", {}).get("k", now_k)
    if old and now_k is not None and was_k != now_k:
        # Another k: recall@k is held to the baseline's, as the gate compares it.
        lines.append(f"  k {was_k} -> {now_k}: recall@{now_k} compared with the baseline's recall@{was_k}")
        old = at_k(old, now_k)
    moved, lowered = _compare_figures(flat_figures((old or {}).get("methods", {})), flat_figures(new["methods"]))
    lines += moved
    was_read, now_read = _per_file((old or {}).get("cassettes")), _per_file(new.get("cassettes"))
    if old:
        for name in sorted(set(was_read) | set(now_read)):
            if was_read.get(name) != now_read.get(name):
                lines.append(f"  cassette {name}: {was_read.get(name, 'none')} -> {now_read.get(name, 'none')}")
    for key in sorted(set((old or {}).get("config", {})) | set(new["config"])):
        was_c, now_c = (old or {}).get("config", {}).get(key), new["config"].get(key)
        if old and was_c != now_c:
            lines.append(f"  config {key}: {was_c!r} -> {now_c!r}")
    return lines, lowered


def _lowered_against(
    reference: Mapping[str, Any],
    new: Mapping[str, Any],
    types: Mapping[str, str] | None,
    rescored: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """The figures of the base branch's entry that `new` lowers, recorded from the reference's
    values. A pull request cannot replace its base branch's dataset unseen: with no question id in
    common, every figure the reference gates is removed."""
    shared = reference.get("fingerprint") == new["fingerprint"] or (
        data_changes(reference, new.get("questions", {}), new.get("corpus", "")) is not None
    )
    if not shared:
        return {
            f"{name} (removed)": {"from": value, "to": None}
            for name, value in flat_figures(reference.get("methods", {})).items()
        }
    lowered = _diff(reference, new, types, rescored)[1]
    changes = data_changes(reference, new.get("questions", {}), new.get("corpus", ""))
    # A question the base branch gates and the update no longer holds is lowered to nothing.
    gone = {removed_question(q): {"from": None, "to": None} for q in (changes.removed if changes else ())}
    return {**lowered, **gone}


def removed_question(question: str) -> str:
    """How an acceptance names a question the base branch gates that a pull request removed."""
    return f"question {question} (removed)"


def _lowered_line(name: str, change: Mapping[str, Any]) -> str:
    bare = name.removesuffix(" (removed)").removesuffix(" (all questions)")
    if change["from"] is None:
        return f"{bare}: removed"
    where = " on all questions" if name.endswith(" (all questions)") else ""
    return _line(bare, change["from"], change["to"]).strip() + where


def _per_file(cassettes: Any) -> dict[str, str]:
    """An entry's cassette digests by file; a baseline from before per-file digests holds one
    digest of the whole folder."""
    if isinstance(cassettes, dict):
        return cassettes
    return {"(whole folder)": cassettes} if cassettes else {}


def _acceptance(old: Mapping[str, Any] | None, new: Mapping[str, Any], lowered: Mapping[str, Any], reason: str | None):
    """The `accepted` record of the new entry: the drops of this update, each from the value
    before the first drop still recorded; earlier drops still below their value before are kept."""
    before = dict(((old or {}).get(ACCEPTED) or {}).get("figures", {}))
    now = flat_figures(new["methods"])
    figures = {name: {"from": before.get(name, change)["from"], "to": change["to"]} for name, change in lowered.items()}
    for name, change in before.items():
        bare = name.removesuffix(" (all questions)").removesuffix(" (removed)")
        if name not in figures and bare in now and is_worse(bare, change["from"], now[bare]):
            figures[name] = {"from": change["from"], "to": now[bare]}
    if not figures:
        return None
    return {"figures": figures, "reason": reason or ((old or {}).get(ACCEPTED) or {}).get("reason", "")}


def accepted_drop(entry: Mapping[str, Any] | None, name: str, was: float, now: float) -> str | None:
    """The recorded reason when `entry` accepts figure `name` going from `was` (the reference's
    value) to `now`; None when it records no such acceptance."""
    record = (entry or {}).get(ACCEPTED) or {}
    change = record.get("figures", {}).get(name)
    if not isinstance(change, dict) or change.get("from") != rounded(was) or change.get("to") is None:
        return None
    if is_worse(name, change["to"], rounded(now)):
        return None  # lower than what was accepted
    return str(record["reason"])  # never empty: a baseline recording a drop without a reason is refused at load


def baseline_lock(path: Path) -> Path:
    """The lock every writer of the baseline (and its snapshots) holds: beside the file, hidden."""
    return path.parent / f".{path.name}.lock"


def _journal(path: Path) -> Path:
    return path.parent / f".{path.name}.journal"


def recover_baseline(
    path: str | Path, others: Mapping[str, Path] | None = None, lock: Path | None = None
) -> list[Path]:
    """Put back the baseline set a killed or failed update left half written, and remove its
    temporary files (every run calls it first). `others` are the snapshot files of the set."""
    path = Path(path)
    journal = _journal(path)
    targets = [path, *(others or {}).values()]
    if not journal.exists() and not any(_leftovers(p) for p in targets):
        return []  # nothing left behind: no lock taken, nothing created
    from filelock import FileLock  # here: a run with nothing to recover takes no lock

    lock = lock or baseline_lock(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock, timeout=LOCK_SECONDS):
        return recover_files(journal, targets)


def _leftovers(target: Path) -> bool:
    """Whether a temporary file or backup of a writer sits beside `target`."""
    return target.parent.is_dir() and any(
        p.suffix not in (".lock", ".journal") for p in target.parent.glob(f".{target.name}.*")
    )


def update_baseline(
    path: str | Path,
    profile: str,
    entry: Mapping[str, Any],
    *,
    allow_regression: bool | str = False,
    types: Mapping[str, str] | None = None,
    rescored: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    also: Mapping[Path, str] | None = None,
    lock: Path | None = None,
    reference: Mapping[str, Any] | None = None,
    reference_profile: str | None = None,
    judged_as_reference: JudgedAs | None = None,
) -> str:
    """Write `entry` as the profile's baseline (with the files of `also`, its ranking snapshots,
    as one set) and return the diff; refuse to lower a figure unless `allow_regression` is the
    reason for it, recorded in the entry. With `types` (question id -> type), a dataset that
    kept questions is a changed one, whose figures on those questions may not fall (edited ones
    scored again by `rescored(old entry)`, the run's entry under the old judgments); without,
    another dataset replaces the old one whole.
    With `reference` (the base branch's entry), a drop against it counts as one against the
    file's own and is recorded from the reference's value: how a pull request records the
    acceptance its base branch's gate asks for; a reference of another dataset (no question id
    shared) is dropped whole, each of its figures "removed", and one of another profile
    (`reference_profile`) is a drop of that profile; `judged_as_reference` is the run's entry as
    the reference judges it (its relevant_grade, its accept_llm_judgments), when it judges
    otherwise: what its drops are measured on. Read, compared and written under one lock
    (`lock`, default beside the file): concurrent updates of other profiles lose nothing."""
    diff, _ = _update(
        Path(path),
        profile,
        entry,
        allow_regression,
        types,
        rescored,
        also or {},
        lock,
        reference,
        reference_profile,
        judged_as_reference,
        write=True,
    )
    return diff


def try_update(
    path: str | Path,
    profile: str,
    entry: Mapping[str, Any],
    *,
    allow_regression: bool | str = False,
    types: Mapping[str, str] | None = None,
    rescored: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    lock: Path | None = None,
    reference: Mapping[str, Any] | None = None,
    reference_profile: str | None = None,
    judged_as_reference: JudgedAs | None = None,
) -> tuple[str, dict[str, Any]]:
    """What `update_baseline` would do, without writing: its diff and the profile's entry as it
    would be written (checked as a loaded one is), or its BaselineError. The pytest gate tries an
    update while its items run and writes it at session finish, once every item held."""
    return _update(
        Path(path),
        profile,
        entry,
        allow_regression,
        types,
        rescored,
        {},
        lock,
        reference,
        reference_profile,
        judged_as_reference,
        write=False,
    )


def _update(
    path: Path,
    profile: str,
    entry: Mapping[str, Any],
    allow_regression: bool | str,
    types: Mapping[str, str] | None,
    rescored: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
    also: Mapping[Path, str],
    lock: Path | None,
    reference: Mapping[str, Any] | None,
    reference_profile: str | None,
    judged_as_reference: JudgedAs | None,
    *,
    write: bool,
) -> tuple[str, dict[str, Any]]:
    from filelock import FileLock, Timeout

    lock = lock or baseline_lock(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        # A try reads under the lock too: never half of another profile's commit.
        with FileLock(lock, timeout=LOCK_SECONDS):
            recover_files(_journal(path), [path, *also])
            data = load_baseline(path)
            old = data["profiles"].get(profile)
            entry = {key: value for key, value in entry.items() if key not in ("tolerance", ACCEPTED)}
            lines, lowered = _diff(old, entry, types, rescored)
            if reference is not None:
                seen = judged_as_reference or JudgedAs(entry, types, rescored)
                against = _lowered_against(reference, seen.entry, seen.types, seen.rescored)
                if reference_profile is not None and reference_profile != profile:
                    against[f"profile {reference_profile} (removed)"] = {"from": None, "to": None}
                # What the base branch gates and this update lowers, shown whatever the file's own diff says.
                lines += [f"  against the base branch, {_lowered_line(n, c)}" for n, c in against.items()]
                lowered = {**lowered, **against}
            reason = allow_regression if isinstance(allow_regression, str) else None
            if lowered and not (reason and reason.strip()):
                how = "needs a reason" if allow_regression else "was not given"
                raise BaselineError(
                    f"refusing to lower the baseline of profile {profile!r}: {', '.join(lowered)}. "
                    f'--allow-regression {how}: pass `--allow-regression "REASON"` to accept a worse figure '
                    "deliberately (the reason is recorded in the baseline and shown in the PR summary)."
                )
            accepted = _acceptance(old, entry, lowered, reason.strip() if reason else None)
            if accepted:
                entry = {**entry, ACCEPTED: accepted}
                lines.append(f"  accepted: {accepted['reason']}")
            data["profiles"][profile] = entry
            text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
            if write:
                files = {path: text.encode("utf-8"), **{p: t.encode("utf-8") for p, t in also.items()}}
                _commit(files, _journal(path))
    except Timeout as exc:
        raise BaselineError(
            f"{path}: another update holds {lock} for over {LOCK_SECONDS} s: wait for it, or remove the lock "
            "file if no other update runs."
        ) from exc
    header = f"baseline {path} profile {profile!r}:"
    written = parse_baseline(text.encode("utf-8"), str(path))["profiles"][profile]
    return "\n".join([header, *(lines or ["  no figure changed"])]), written


def _commit(files: Mapping[Path, bytes], journal: Path) -> None:
    """commit_files, with a full disk or a read-only folder said in one line naming the file."""
    try:
        commit_files(files, journal)
    except AtomicSetError as exc:
        raise BaselineError(str(exc)) from exc  # it says where the previous set is and who restores it
    except OSError as exc:
        where = exc.filename or next(iter(files))
        if exc.errno == errno.ENOSPC:
            raise BaselineError(
                f"{where}: the disk is full (no space left on device): nothing was written, the previous "
                "baseline and snapshots are in place. Free some space and run again."
            ) from exc
        raise BaselineError(
            f"{where}: cannot write ({exc.strerror or exc}): nothing was written, the previous baseline and "
            "snapshots are in place."
        ) from exc
