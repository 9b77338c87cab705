"""Ranking snapshots: each method's top 10 document ids per question, one file per profile.

A change that moves documents without moving a metric still shows in review as a diff of
`baselines/rankings/<profile>.json`. Ids only, no float, one question per line, so the diff
reads as "which question's top 10 moved". The gate writes the file only when a baseline
update is accepted, so a refused update leaves it, and every other profile's file, untouched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.files.atomic import atomic_write_text
from retrieval.gate.schema import BaselineError, first_of, relevant_ids, rounded

if TYPE_CHECKING:  # annotations only: the gate plugin loads this module in every pytest run
    from retrieval.run.results import Run

__all__ = [
    "FORMAT",
    "TOP",
    "load_snapshots",
    "moved",
    "parse_snapshots",
    "render_snapshots",
    "snapshot_path",
    "snapshot_problem",
    "top_changed",
    "top_rankings",
    "write_snapshots",
]

FORMAT = "retrieval-rankings-1"
TOP = 10

Rankings = dict[str, dict[str, list[str]]]  # method -> question id -> top document ids


def snapshot_path(directory: str | Path, profile: str) -> Path:
    """The snapshot file of one profile."""
    return Path(directory) / f"{profile}.json"


def top_rankings(run: Run, top: int = TOP) -> Rankings:
    """Every evaluated method's top `top` document ids per question."""
    return {method: {q: ids[:top] for q, ids in run.ranked_ids(method).items()} for method in run.methods}


def load_snapshots(path: str | Path, shown: str | None = None) -> Rankings:
    """The snapshots of one profile; empty when the file does not exist (nothing accepted yet).
    Errors name the file as `shown` (from the project root) when given."""
    path = Path(path)
    if not path.is_file():
        return {}
    return parse_snapshots(path.read_bytes(), shown or str(path))


def parse_snapshots(raw: bytes, source: str) -> Rankings:
    """A snapshot file's bytes (read from disk or from `git show`), checked; `source` names it."""
    restore = f"Restore it with `git checkout {source}`, or rewrite it with `pytest --update-baseline`."
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        # A hand edit saved in Latin-1: one line with the line of the bad byte, not a traceback.
        line = raw[: exc.start].count(b"\n") + 1
        raise BaselineError(f"{source}:{line}: not UTF-8 ({exc.reason} at byte {exc.start}). {restore}") from exc
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{source}:{exc.lineno}: invalid JSON ({exc.msg}). {restore}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("methods"), dict):
        raise BaselineError(
            f"{source}: not a ranking snapshot file (expected format {FORMAT!r}). "
            "Rewrite it with `pytest --update-baseline`."
        )
    for method, questions in data["methods"].items():
        if not isinstance(questions, dict) or not all(
            isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in questions.values()
        ):
            raise BaselineError(
                f"{source}: method {method!r} must map each question id to a list of document ids (strings). {restore}"
            )
    return data["methods"]


def snapshot_problem(entry: Mapping[str, Any] | None, snapshots: Rankings, source: str, baseline: str) -> str | None:
    """Where the snapshots (`source`) disagree with the per-question values the baseline entry
    (`baseline`) stores for the same method and question, or None: the reciprocal rank and the
    recall@k the stored top 10 gives under the entry's judgments must be the stored ones. Both
    are written by one update from one run; a hand edit of either one breaks the agreement."""
    if not entry or not isinstance(entry.get("judgments"), dict):
        return None  # an entry from before judgments were kept: nothing to check the ranks against
    from retrieval.measures.metrics import MRR_DEPTH, recall_at_k, reciprocal_rank

    judged = entry["judgments"]
    for method, figures in sorted(entry.get("methods", {}).items()):
        tops = snapshots.get(method)
        if not tops:
            continue
        recall = next((key for key in figures if key.startswith("recall@")), None)
        k = int(recall.split("@", 1)[1]) if recall and recall.split("@", 1)[1].isdigit() else None
        for question, top in sorted(tops.items()):
            if question not in judged or question not in figures.get("reciprocal_ranks", {}):
                continue
            relevant = relevant_ids(judged[question])
            if not relevant:
                continue
            given = {"reciprocal rank": rounded(reciprocal_rank(top, relevant, MRR_DEPTH))}
            stored = {"reciprocal rank": figures["reciprocal_ranks"][question]}
            if recall and k is not None and (k <= len(top) or len(top) < TOP):
                given[recall] = rounded(recall_at_k(top, relevant, k))
                stored[recall] = figures["recall_per_question"][question]
            for what, value in given.items():
                if value != rounded(stored[what]):
                    return (
                        f"{source}: {method}'s top {TOP} of {question} gives a {what} of {value:g} under the "
                        f"baseline's judgments, but {baseline} stores {stored[what]:g}: one of the two was edited "
                        f"by hand. Restore both with `git checkout`, or rewrite them with `pytest --update-baseline`"
                    )
    return None


def render_snapshots(profile: str, rankings: Mapping[str, Mapping[str, list[str]]]) -> str:
    """The file's text: sorted keys, one question per line."""
    lines = ["{", f'  "format": "{FORMAT}",', f'  "profile": {json.dumps(profile)},', f'  "top": {TOP},']
    lines.append('  "methods": {')
    methods = sorted(rankings)
    for mi, method in enumerate(methods):
        lines.append(f"    {json.dumps(method, ensure_ascii=False)}: {{")
        questions = sorted(rankings[method])
        for qi, question in enumerate(questions):
            ids = json.dumps(rankings[method][question], ensure_ascii=False)
            comma = "," if qi < len(questions) - 1 else ""
            lines.append(f"      {json.dumps(question, ensure_ascii=False)}: {ids}{comma}")
        lines.append("    }" + ("," if mi < len(methods) - 1 else ""))
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def write_snapshots(path: str | Path, profile: str, rankings: Mapping[str, Mapping[str, list[str]]]) -> None:
    """Replace the profile's snapshot file atomically."""
    atomic_write_text(Path(path), render_snapshots(profile, rankings))


def moved(expected: Mapping[str, list[str]], current: Mapping[str, list[str]]) -> list[str]:
    """The questions whose top ids differ, those that changed nearest the top first, each from
    its first differing rank: "q03: d1 d4 -> d4 d1", "q07 from rank 4: d5 d6 -> d9 d5".

    Ranks above the first difference are left out: after a document is added or a setting is
    tuned, most questions change low in their top 10, and the full lists of hundreds of
    questions buried the change (a 90 KB line for 373 questions of a 12,000-document corpus).
    """
    changes = []
    for question in set(expected) | set(current):
        was, now = expected.get(question), current.get(question)
        if was == now:
            continue
        first = 0
        if was is not None and now is not None:
            first = next((i for i, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), min(len(was), len(now)))
        before = (" ".join(was[first:]) or "(nothing)") if was is not None else "(absent)"
        after = (" ".join(now[first:]) or "(nothing)") if now is not None else "(absent)"
        lead = question if first == 0 else f"{question} from rank {first + 1}"
        changes.append((first, question, f"{lead}: {before} -> {after}"))
    return [line for _, _, line in sorted(changes)]


def top_changed(
    method: str, expected: Mapping[str, list[str]], current: Mapping[str, list[str]], file: str
) -> str | None:
    """The gate's failure when `method`'s top ids moved from the accepted `file`, else None."""
    changes = moved(expected, current)
    if not changes:
        return None
    listed = first_of(changes, f"`pytest --update-baseline` rewrites {file}: its diff lists all")
    return (
        f"{method} top {TOP} changed for {len(changes)} question(s): {'; '.join(listed)}. "
        "If intended, accept it with `pytest --update-baseline`."
    )
