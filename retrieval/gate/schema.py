"""The committed baseline file: its format, what one profile's entry holds, and its self-check.

`baselines/metrics.json` holds, per profile, the dataset fingerprint, the configuration
that produced the figures, the digest of the cassettes they were replayed from, what each
question was judged against (its relevant ids, type and a digest of its text), and per
method recall@k, MRR, recall@k per question type and every question's values. Keys are
sorted and figures rounded to 4 decimals so that a diff of the file reads as a diff of the
metrics.

The file is reviewed, not trusted: `load_baseline` checks every figure against its range
and against the mean of the stored per-question values it summarises, and every question
type the entry judged has its figure, so a hand edit that lowers a figure or deletes one
fails in one line naming it. The tolerance is a setting of the project file (where a review
sees it), not of this file: a `tolerance` left in an entry by an older version is ignored.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.measures.figures import DIGITS, UnknownFigure, kind_of

if TYPE_CHECKING:  # annotations only: the gate plugin loads this module in every pytest run
    from retrieval.data.dataset import Question
    from retrieval.measures.metrics import MethodScores
    from retrieval.run.results import Run

__all__ = [
    "DEGRADED_QUESTIONS",
    "DIGITS",
    "FORMAT",
    "NOT_FIGURES",
    "PER_QUESTION",
    "BaselineError",
    "entry_for",
    "first_of",
    "flat_figures",
    "judged_grades",
    "judged_ids",
    "judgments",
    "load_baseline",
    "parse_baseline",
    "question_digests",
    "relevant_ids",
    "rounded",
]

FORMAT = "retrieval-baseline-1"
# The default of the `baseline` setting (root-relative); kept for callers that name the file.
BASELINE_PATH = "baselines/metrics.json"
# Questions a failure lists before it counts the rest: a change to a corpus of thousands of
# questions listed every one, in one line of hundreds of kilobytes.
SHOWN = 10
# A method's entries that hold per-question values, not a figure: the per-question metrics
# (to recompute figures on the questions a changed dataset kept) and the questions where it
# fell back (to count them on those questions).
PER_QUESTION = ("reciprocal_ranks", "recall_per_question")
DEGRADED_QUESTIONS = "degraded_questions"
NOT_FIGURES = frozenset({"by_type", *PER_QUESTION, DEGRADED_QUESTIONS})
# A stored figure is the rounded mean of its rounded per-question values: the two roundings
# part them by at most one unit of the last digit; a hand edit moves it further.
_MEAN_SLACK = 10**-DIGITS + 1e-9
# The key of a profile's entry recording the drops a pull request accepted, with the reason.
ACCEPTED = "accepted"
# The depth of the reciprocal rank (MRR@10): what a stored per-question value can be.
_RR_DEPTH = 10


def first_of(lines: Sequence[str], more: str = "", shown: int = SHOWN) -> list[str]:
    """At most `shown` of `lines`, then one that counts the rest (`more` says where they all are)."""
    if len(lines) <= shown:
        return list(lines)
    return [*lines[:shown], f"and {len(lines) - shown} more" + (f" ({more})" if more else "")]


class BaselineError(RuntimeError):
    """The baseline file cannot be read or must not be written as asked."""


def rounded(x: float) -> float:
    """A figure as the baseline stores it."""
    return round(float(x), DIGITS)


def load_baseline(path: str | Path, shown: str | None = None) -> dict[str, Any]:
    """The whole baseline file ({"format", "profiles"}), checked; an empty one when the file does
    not exist. BaselineError naming the file (as `shown`, e.g. from the project root), the profile
    and the value otherwise."""
    path = Path(path)
    if not path.exists():
        return {"format": FORMAT, "profiles": {}}
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BaselineError(f"{shown or path}: unreadable ({exc.strerror or exc}).") from exc
    return parse_baseline(raw, shown or str(path))


# The bytes of the last baseline files that passed the entries' check: a gate run reads its file
# three times (its items' names, the cassettes' digests, the comparison), the CLI and an update
# again, and the check of every figure against its per-question values cost more than the JSON.
# The check is a function of the bytes alone; what fails it is never remembered.
_CHECKED: dict[bytes, None] = {}
_CHECKED_KEPT = 4
_CHECKED_LOCK = threading.Lock()


def parse_baseline(raw: bytes, source: str) -> dict[str, Any]:
    """A baseline file's bytes (read from disk or from `git show`), checked; `source` names it."""
    restore = f"Restore it with `git checkout -- {source}` or rewrite it with `pytest --update-baseline`."
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{source}: not UTF-8 ({exc.reason} at byte {exc.start}). {restore}") from exc
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{source}:{exc.lineno}: invalid JSON ({exc.msg}). {restore}") from exc
    if not isinstance(data, dict):
        raise BaselineError(f"{source}: expected a JSON object, got {type(data).__name__}. {restore}")
    if data.get("format") != FORMAT:
        raise BaselineError(f"{source}: format {data.get('format')!r}, expected {FORMAT!r}.")
    profiles = data.get("profiles")
    if not isinstance(profiles, dict):
        raise BaselineError(f'{source}: "profiles" must be an object (profile -> entry). {restore}')
    if raw in _CHECKED:
        return data
    for name, entry in profiles.items():
        problem = _entry_problem(entry)
        if problem:
            raise BaselineError(f"{source}: profile {name!r}: {problem}. {restore}")
    with _CHECKED_LOCK:
        if len(_CHECKED) >= _CHECKED_KEPT:
            del _CHECKED[next(iter(_CHECKED))]
        _CHECKED[bytes(raw)] = None
    return data


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _value_problem(metric: str, value: Any, where: str) -> str | None:
    """Why one stored value is not a figure of its kind, or None."""
    if not _is_number(value):
        return f"{where} is {value!r}, not a number"
    try:
        kind = kind_of(metric)
    except UnknownFigure as exc:
        return f"{where}: {exc}"
    if not kind.in_range(value):
        return f"{where} is {value!r}, outside its range ({kind.range_text})"
    return None


def relevant_ids(judgment: Mapping[str, Any]) -> tuple[str, ...]:
    """The documents a question's judgment counts as relevant, sorted: the one reader of a kept
    judgment's relevance (its `relevant` ids; `grades`, when kept, also name documents judged
    not relevant, grade 0)."""
    return tuple(sorted(judgment.get("relevant", ())))


def judged_ids(judgment: Mapping[str, Any]) -> frozenset[str]:
    """Every document a question's judgment covers: relevant, or graded (grade 0: judged not relevant)."""
    grades = judgment.get("grades")
    return frozenset([*judgment.get("relevant", ()), *(grades if isinstance(grades, dict) else ())])


def judged_grades(judgment: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """The grades a judgment kept (none: its relevant ids, each of grade 1)."""
    grades = judgment.get("grades")
    return tuple(grades.items()) if isinstance(grades, dict) else ()


def _judgment_problem(question: str, judgment: Any) -> str | None:
    if not isinstance(judgment, dict) or not isinstance(judgment.get("type"), str):
        return '"judgments" must be an object (question -> {"relevant", "type", "text"})'
    relevant = judgment.get("relevant", [])
    if not isinstance(relevant, list) or not all(isinstance(d, str) for d in relevant):
        return f'"judgments" of {question}: "relevant" must list document ids'
    grades = judgment.get("grades", {})
    if not isinstance(grades, dict) or not all(
        isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in grades.values()
    ):
        return f'"judgments" of {question}: "grades" must map document ids to whole grades >= 0'
    return None


def _acceptance_problem(record: Any) -> str | None:
    """What is wrong with the drops an entry records as accepted: each needs the figure's value
    before and after (after: none for a figure removed), and the record a reason, not empty."""
    if not isinstance(record, dict):
        return f'"{ACCEPTED}" must be an object ({{"reason", "figures"}}), got {type(record).__name__}'
    reason = record.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        return (
            f'"{ACCEPTED}" records drops with {"an empty" if isinstance(reason, str) else "no"} reason: an '
            'acceptance needs one (`pytest --update-baseline --allow-regression "REASON"` writes it)'
        )
    figures = record.get("figures")
    if not isinstance(figures, dict) or not figures:
        return f'"{ACCEPTED}" must name the figures it accepts ("figures": figure -> {{"from", "to"}})'
    for name, change in figures.items():
        bare = name.removesuffix(" (removed)")
        if not isinstance(change, dict) or set(change) != {"from", "to"}:
            return f'"{ACCEPTED}" figure {name!r} must be {{"from": value, "to": value}}'
        whole = bare.startswith(("profile ", "question ")) and name != bare and change == {"from": None, "to": None}
        if whole:
            continue  # a profile or a question the base branch gates, dropped as a whole
        if not _is_number(change["from"]) or not (_is_number(change["to"]) or (change["to"] is None and bare != name)):
            return f'"{ACCEPTED}" figure {name!r}: "from" and "to" must be numbers ("to": null for a removed one)'
    return None


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one profile's baseline entry, or None."""
    if not isinstance(entry, dict):
        return f"expected an object, got {type(entry).__name__}"
    if ACCEPTED in entry and (problem := _acceptance_problem(entry[ACCEPTED])):
        return problem
    cassettes = entry.get("cassettes", {})
    digests = cassettes if isinstance(cassettes, dict) else {}
    if not isinstance(cassettes, str | dict) or not all(isinstance(v, str) for v in digests.values()):
        return '"cassettes" must be an object (cassette file -> its sha256 digest)'
    judged = entry.get("judgments")
    if judged is not None and not isinstance(judged, dict):
        return '"judgments" must be an object (question -> {"relevant", "type", "text"})'
    for question, judgment in (judged or {}).items():
        if problem := _judgment_problem(question, judgment):
            return problem
    methods = entry.get("methods")
    if not isinstance(methods, dict):
        return '"methods" must be an object (method -> figures)'
    for method, figures in methods.items():
        problem = _method_problem(figures, f"method {method!r}", judged)
        if problem:
            return problem
    return None


def _method_problem(figures: Any, where: str, judged: Mapping[str, Any] | None) -> str | None:
    """What is wrong with one method's figures: shape, range, and agreement with the stored
    per-question values each figure is the mean of."""
    if not isinstance(figures, dict):
        return f"{where}: expected an object of figures, got {type(figures).__name__}"
    recalls = [key for key in figures if key.startswith("recall@")]
    if "mrr" not in figures or not recalls:
        return f"{where}: missing {'mrr' if 'mrr' not in figures else 'recall@k'}"
    for part in PER_QUESTION:
        values = figures.get(part)
        if not isinstance(values, dict) or not values:
            # Without them no figure can be checked, nor recomputed on the questions a changed
            # dataset kept: every entry the tool writes has them.
            return f"{where}: {part} must be an object (question -> figure), one value per question"
    metric_of = {"reciprocal_ranks": "mrr", "recall_per_question": recalls[0]}
    for part in PER_QUESTION:
        kind = kind_of(metric_of[part])
        # One pass for the common case (tens of thousands of values); the first bad one named after.
        if not all(_is_number(v) and kind.in_range(v) for v in figures[part].values()):
            for question, value in figures[part].items():
                if problem := _value_problem(metric_of[part], value, f"{where}: {part} of {question}"):
                    return problem
    if set(figures["reciprocal_ranks"]) != set(figures["recall_per_question"]):
        return f"{where}: reciprocal_ranks and recall_per_question must hold the same questions"
    fell_back = figures.get(DEGRADED_QUESTIONS, [])
    if not isinstance(fell_back, list) or not all(isinstance(q, str) for q in fell_back):
        return f"{where}: {DEGRADED_QUESTIONS} must be a list of question ids"
    by_type = figures.get("by_type", {})
    if not isinstance(by_type, dict) or not all(isinstance(v, dict) for v in by_type.values()):
        return f"{where}: by_type must be an object (type -> figures)"
    # k is not known at load, so the recall@k key itself is checked by compare(); an empty
    # entry is wrong whatever k is.
    empty = next((t for t, v in by_type.items() if not v), None)
    if empty is not None:
        return f"{where}: by_type[{empty}] is empty, expected its figures (e.g. recall@5)"
    for metric, value in figures.items():
        if metric not in NOT_FIGURES and (problem := _value_problem(metric, value, f"{where}: {metric}")):
            return problem
    for qtype, values in by_type.items():
        for metric, value in values.items():
            if problem := _value_problem(metric, value, f"{where}: by_type[{qtype}] {metric}"):
                return problem
    return _consistency_problem(figures, where, recalls, judged)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _consistency_problem(
    figures: Mapping[str, Any], where: str, recalls: Sequence[str], judged: Mapping[str, Any] | None
) -> str | None:
    """Each figure against the mean of the per-question values it summarises."""
    recall = recalls[0]
    questions = figures["recall_per_question"]
    means = {
        recall: _mean(list(questions.values())),
        "mrr": _mean(list(figures["reciprocal_ranks"].values())),
    }
    if len(recalls) > 1:
        return f"{where}: holds {', '.join(recalls)}: one recall@k per entry"
    for metric, mean in means.items():
        if abs(figures[metric] - mean) > _MEAN_SLACK:
            return (
                f"{where}: {metric} is {figures[metric]} but the mean of its {len(questions)} stored per-question "
                f"values is {mean:.4f}: the figure or its values were edited by hand"
            )
    fell_back = figures.get(DEGRADED_QUESTIONS)
    if fell_back is not None and figures.get("degraded") != len(fell_back):
        return f"{where}: degraded is {figures.get('degraded')} but {DEGRADED_QUESTIONS} lists {len(fell_back)}"
    if fell_back and not set(fell_back) <= set(questions):
        return f"{where}: {DEGRADED_QUESTIONS} lists questions the entry does not hold"
    if judged is None:
        return None  # an entry from before judgments were kept: its types are checked by the gate
    if set(judged) != set(questions):
        return f"{where}: its per-question values and the entry's judgments hold different questions"
    if problem := _unreachable(figures, where, recall, judged):
        return problem
    types: dict[str, list[float]] = {}
    for question, value in questions.items():
        types.setdefault(judged[question]["type"], []).append(value)
    by_type = figures.get("by_type", {})
    for qtype, values in sorted(types.items()):
        if qtype not in by_type:
            return f"{where}: by_type[{qtype}] is missing: {len(values)} judged question(s) of that type are not gated"
        if recall in by_type[qtype] and abs(by_type[qtype][recall] - _mean(values)) > _MEAN_SLACK:
            return (
                f"{where}: by_type[{qtype}] {recall} is {by_type[qtype][recall]} but the mean of its "
                f"{len(values)} questions' stored values is {_mean(values):.4f}: edited by hand"
            )
    extra = sorted(set(by_type) - set(types))
    if extra:
        return f"{where}: by_type[{extra[0]}] has no judged question of that type"
    return None


def _unreachable(figures: Mapping[str, Any], where: str, recall: str, judged: Mapping[str, Any]) -> str | None:
    """A stored per-question value no ranking can give under the entry's judgments: recall@k of
    a question with n relevant documents is j / n (j <= k), a reciprocal rank 0 or 1 / r
    (r <= 10). A hand edit that moves one, and the figures with it, fails here."""
    k = int(recall.split("@", 1)[1]) if recall.split("@", 1)[1].isdigit() else None
    reciprocal = {rounded(1 / r) for r in range(1, _RR_DEPTH + 1)} | {0.0}
    for question, value in figures["reciprocal_ranks"].items():
        if rounded(value) not in reciprocal:
            return (
                f"{where}: reciprocal_ranks of {question} is {value}, which no ranking gives (0, or 1 / rank for a "
                f"rank from 1 to {_RR_DEPTH}): edited by hand"
            )
    for question, value in figures["recall_per_question"].items():
        n = len(relevant_ids(judged[question]))
        if k is None or n == 0:
            continue
        possible = {rounded(j / n) for j in range(min(k, n) + 1)}
        if rounded(value) not in possible:
            shown = ", ".join(f"{v:g}" for v in sorted(possible))
            return (
                f"{where}: recall_per_question of {question} is {value}, which no ranking gives ({n} relevant "
                f"document(s) judged: {recall} is one of {shown}): edited by hand"
            )
    return None


def question_digests(run: Run) -> dict[str, str]:
    """Each question's digest (its text, type and relevant documents, and its grades when they
    say more than the relevant ids), by id: a question is the same in two datasets when its id
    has the same digest in both. A question without grades keeps the digest it had before
    grades were read."""

    def digest(q: Question) -> str:
        fields: list[Any] = [q.text, q.type, sorted(q.relevant)]
        if q.graded:
            fields.append(sorted([doc, grade] for doc, grade in q.grades))
        return hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()

    return {r.question.id: digest(r.question)[:16] for r in run.results}


def judgments(run: Run) -> dict[str, dict[str, Any]]:
    """What each question was judged against, by id: its relevant ids, its type, a digest of
    its text, and every judged document's grade (0: judged not relevant) when the grades say
    more than the relevant ids. An edited question is also scored under these, so its
    regression is still gated."""
    return {
        r.question.id: {
            **({"grades": dict(sorted(r.question.grades))} if r.question.graded else {}),
            "relevant": sorted(r.question.relevant),
            "text": hashlib.sha256(r.question.text.encode("utf-8")).hexdigest()[:16],
            "type": r.question.type,
        }
        for r in run.results
    }


def entry_for(
    run: Run,
    scores: Mapping[str, MethodScores],
    k: int,
    cassettes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The baseline entry of one profile for a run and its scores; `cassettes` holds the digest
    of each cassette the run replayed (retrieval.recording.recorder.cassette_digests)."""
    recall = f"recall@{k}"
    fell_back = {method: sorted(run.degraded(method)) if method in run.methods else [] for method in scores}
    return {
        **({"cassettes": dict(cassettes)} if cassettes is not None else {}),
        "dataset": run.dataset,
        "fingerprint": run.fingerprint,
        # What says, once questions are added or edited, which figures can still be compared.
        **({"corpus": run.corpus} if run.corpus else {}),
        "questions": question_digests(run),
        "judgments": judgments(run),
        "config": dict(run.config),
        "methods": {
            method: {
                recall: rounded(s.overall[recall]),
                "mrr": rounded(s.overall["mrr"]),
                "by_type": {t: {recall: rounded(v[recall])} for t, v in sorted(s.by_type.items())},
                "reciprocal_ranks": {q: rounded(v["mrr"]) for q, v in sorted(s.per_question.items())},
                "recall_per_question": {q: rounded(v[recall]) for q, v in sorted(s.per_question.items())},
                # Questions where the method fell back (a reranker's failed calls): gated, must not rise.
                "degraded": len(fell_back[method]),
                # Which ones, so that a changed dataset counts them on the questions it kept.
                **({DEGRADED_QUESTIONS: fell_back[method]} if fell_back[method] else {}),
            }
            for method, s in sorted(scores.items())
        },
    }


def flat_figures(methods: Mapping[str, Any]) -> dict[str, float]:
    """Every gated figure of a baseline entry, flat: "hybrid mrr", "bm25 recall@5[paraphrase]".
    A dataset of one question type (every BEIR set: `all`) gates no per-type figure: it is the
    overall one again, and one drop would fail twice."""
    flat = {}
    for method, figures in methods.items():
        for metric, value in figures.items():
            if metric == "by_type":
                if len(value) > 1:
                    flat.update({f"{method} {m}[{t}]": v for t, vals in value.items() for m, v in vals.items()})
            elif metric not in NOT_FIGURES:
                flat[f"{method} {metric}"] = value
    return flat
