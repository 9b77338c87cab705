"""The committed baseline: load, compare a run with it, update it.

`baselines/metrics.json` holds, per profile, the dataset fingerprint, the configuration
that produced the figures, the digest of the cassettes they were replayed from, a
tolerance, and per method recall@k, MRR, recall@k per
question type and every question's reciprocal rank. Keys are sorted and figures
rounded to 4 decimals so that a diff of the file reads as a diff of the metrics.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.atomic import atomic_write_text
from retrieval.recording import record_command

if TYPE_CHECKING:  # annotations only: the gate plugin loads this module in every pytest run
    from retrieval.dataset import Question
    from retrieval.metrics import MethodScores
    from retrieval.run import Run

__all__ = [
    "BaselineError",
    "Check",
    "DataChanges",
    "as_scores",
    "at_k",
    "compare",
    "config_changes",
    "data_changes",
    "entry_for",
    "first_of",
    "incompatibility",
    "load_baseline",
    "on_questions",
    "question_digests",
    "run_data_changes",
    "unproduced",
    "update_baseline",
]

FORMAT = "retrieval-baseline-1"
DIGITS = 4
# Questions a failure lists before it counts the rest: a change to a corpus of thousands of
# questions listed every one, in one line of hundreds of kilobytes.
SHOWN = 10
# A method's entries that hold per-question values, not a figure: the per-question metrics
# (to recompute figures on the questions a changed dataset kept) and the questions where it
# fell back (to count them on those questions).
PER_QUESTION = ("reciprocal_ranks", "recall_per_question")
DEGRADED_QUESTIONS = "degraded_questions"
NOT_FIGURES = frozenset({"by_type", *PER_QUESTION, DEGRADED_QUESTIONS})


def first_of(lines: Sequence[str], more: str = "", shown: int = SHOWN) -> list[str]:
    """At most `shown` of `lines`, then one that counts the rest (`more` says where they all are)."""
    if len(lines) <= shown:
        return list(lines)
    return [*lines[:shown], f"and {len(lines) - shown} more" + (f" ({more})" if more else "")]


class BaselineError(RuntimeError):
    """The baseline file cannot be read or must not be written as asked."""


@dataclass(frozen=True)
class Check:
    """One gated figure: method, metric (e.g. "mrr" or "recall@5[paraphrase]"), baseline and current."""

    method: str
    metric: str
    baseline: float
    current: float
    tolerance: float
    worse_questions: list[str]
    # A count such as "degraded" (reranker calls that fell back) gets worse when it rises.
    lower_is_better: bool = False
    # The baseline's name of the figure when it is not `metric`: "recall@5" for a run at k = 3.
    baseline_metric: str | None = None

    @property
    def baseline_figure(self) -> str:
        """The baseline figure this check compares with ("bm25 recall@5[paraphrase]")."""
        return f"{self.method} {self.baseline_metric or self.metric}"

    @property
    def delta(self) -> float:
        return round(self.current - self.baseline, DIGITS)

    @property
    def ok(self) -> bool:
        if self.lower_is_better:
            return round(self.current, DIGITS) <= round(self.baseline + self.tolerance, DIGITS)
        return round(self.current, DIGITS) >= round(self.baseline - self.tolerance, DIGITS)

    def message(self) -> str:
        """What a failing check says: figures, delta, the questions that got worse."""
        worse = ", ".join(first_of(self.worse_questions)) or "none individually (a mean moved)"
        moved = "rose above" if self.lower_is_better else "fell below"
        theirs = f"'s {self.baseline_metric}" if self.baseline_metric else ""
        return (
            f"{self.method} {self.metric} {moved} the baseline{theirs}: baseline {self.baseline:.4f}, "
            f"current {self.current:.4f}, delta {self.delta:+.4f} (tolerance {self.tolerance}). "
            f"Questions that got worse: {worse}. If this change is intended, accept it with "
            "`pytest --update-baseline --allow-regression` and say why in the PR."
        )


def load_baseline(path: str | Path) -> dict[str, Any]:
    """The whole baseline file ({"format", "profiles"}), checked; an empty one when the file does
    not exist. BaselineError naming the file, the profile and the value otherwise."""
    path = Path(path)
    if not path.exists():
        return {"format": FORMAT, "profiles": {}}
    restore = f"Restore it with `git checkout -- {path}` or rewrite it with `pytest --update-baseline`."
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}). {restore}") from exc
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg}). {restore}") from exc
    except OSError as exc:
        raise BaselineError(f"{path}: unreadable ({exc.strerror or exc}).") from exc
    if not isinstance(data, dict):
        raise BaselineError(f"{path}: expected a JSON object, got {type(data).__name__}. {restore}")
    if data.get("format") != FORMAT:
        raise BaselineError(f"{path}: format {data.get('format')!r}, expected {FORMAT!r}.")
    profiles = data.get("profiles")
    if not isinstance(profiles, dict):
        raise BaselineError(f'{path}: "profiles" must be an object (profile -> entry). {restore}')
    for name, entry in profiles.items():
        problem = _entry_problem(entry)
        if problem:
            raise BaselineError(f"{path}: profile {name!r}: {problem}. {restore}")
    return data


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _figures_problem(figures: Mapping[str, Any], where: str) -> str | None:
    for key, value in figures.items():
        if not _is_number(value):
            return f"{where}{key} is {value!r}, not a number"
    return None


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one profile's baseline entry, or None."""
    if not isinstance(entry, dict):
        return f"expected an object, got {type(entry).__name__}"
    tolerance = entry.get("tolerance", 0.0)
    if not _is_number(tolerance) or tolerance < 0:
        return f"tolerance is {tolerance!r}, expected a number >= 0 (e.g. 0.01)"
    cassettes = entry.get("cassettes", {})
    digests = cassettes if isinstance(cassettes, dict) else {}
    if not isinstance(cassettes, str | dict) or not all(isinstance(v, str) for v in digests.values()):
        return '"cassettes" must be an object (cassette file -> its sha256 digest)'
    methods = entry.get("methods")
    if not isinstance(methods, dict):
        return '"methods" must be an object (method -> figures)'
    for method, figures in methods.items():
        if not isinstance(figures, dict):
            return f"method {method!r}: expected an object of figures, got {type(figures).__name__}"
        if "mrr" not in figures or not any(key.startswith("recall@") for key in figures):
            return f"method {method!r}: missing {'mrr' if 'mrr' not in figures else 'recall@k'}"
        flat = {k: v for k, v in figures.items() if k not in NOT_FIGURES}
        for part in PER_QUESTION:
            if not isinstance(figures.get(part, {}), dict):
                return f"method {method!r}: {part} must be an object (question -> figure)"
        fell_back = figures.get(DEGRADED_QUESTIONS, [])
        if not isinstance(fell_back, list) or not all(isinstance(q, str) for q in fell_back):
            return f"method {method!r}: {DEGRADED_QUESTIONS} must be a list of question ids"
        if not isinstance(figures.get("by_type", {}), dict) or not all(
            isinstance(v, dict) for v in figures.get("by_type", {}).values()
        ):
            return f"method {method!r}: by_type must be an object (type -> figures)"
        # k is not known at load, so the recall@k key itself is checked by compare(); an empty
        # entry is wrong whatever k is.
        empty = next((t for t, v in figures.get("by_type", {}).items() if not v), None)
        if empty is not None:
            return f"method {method!r}: by_type[{empty}] is empty, expected its figures (e.g. recall@5)"
        problem = _figures_problem(flat, f"method {method!r}: ") or next(
            (
                p
                for part in PER_QUESTION
                if (p := _figures_problem(figures.get(part, {}), f"method {method!r}: {part} of "))
            ),
            None,
        )
        problem = problem or next(
            (
                p
                for qtype, values in figures.get("by_type", {}).items()
                if (p := _figures_problem(values, f"method {method!r}: by_type[{qtype}] "))
            ),
            None,
        )
        if problem:
            return problem
    return None


def _r(x: float) -> float:
    return round(float(x), DIGITS)


def entry_for(
    run: Run,
    scores: Mapping[str, MethodScores],
    k: int,
    tolerance: float = 0.0,
    cassettes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The baseline entry of one profile for a run and its scores; `cassettes` holds the digest
    of each cassette the run replayed (retrieval.recording.cassette_digests)."""
    recall = f"recall@{k}"
    fell_back = {method: sorted(run.degraded(method)) if method in run.methods else [] for method in scores}
    return {
        **({"cassettes": dict(cassettes)} if cassettes is not None else {}),
        "dataset": run.dataset,
        "fingerprint": run.fingerprint,
        # What says, once questions are added or edited, which figures can still be compared.
        **({"corpus": run.corpus} if run.corpus else {}),
        "questions": question_digests(run),
        "config": dict(run.config),
        "tolerance": tolerance,
        "methods": {
            method: {
                recall: _r(s.overall[recall]),
                "mrr": _r(s.overall["mrr"]),
                "by_type": {t: {recall: _r(v[recall])} for t, v in sorted(s.by_type.items())},
                "reciprocal_ranks": {q: _r(v["mrr"]) for q, v in sorted(s.per_question.items())},
                "recall_per_question": {q: _r(v[recall]) for q, v in sorted(s.per_question.items())},
                # Questions where the method fell back (a reranker's failed calls): gated, must not rise.
                "degraded": len(fell_back[method]),
                # Which ones, so that a changed dataset counts them on the questions it kept.
                **({DEGRADED_QUESTIONS: fell_back[method]} if fell_back[method] else {}),
            }
            for method, s in sorted(scores.items())
        },
    }


def question_digests(run: Run) -> dict[str, str]:
    """Each question's digest (its text, type and relevant documents), by id: a question is the
    same in two datasets when its id has the same digest in both."""
    import hashlib

    def digest(q: Question) -> str:
        return hashlib.sha256(json.dumps([q.text, q.type, sorted(q.relevant)], ensure_ascii=False).encode()).hexdigest()

    return {r.question.id: digest(r.question)[:16] for r in run.results}


@dataclass(frozen=True)
class DataChanges:
    """How the dataset changed since the baseline, when its figures can still be compared on the
    questions both hold: the questions added, removed and edited, those both hold unchanged, and
    the documents' fingerprints ("sha256:a -> sha256:b") when they changed."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    edited: tuple[str, ...]
    common: tuple[str, ...]
    documents: str | None = None

    @property
    def questions_changed(self) -> bool:
        return bool(self.added or self.removed or self.edited)

    def __str__(self) -> str:
        parts = [
            f"{len(ids)} {what} ({', '.join(ids[:5])}{f' and {len(ids) - 5} more' if len(ids) > 5 else ''})"
            for what, ids in (("added", self.added), ("removed", self.removed), ("edited", self.edited))
            if ids
        ]
        if self.documents:
            parts.append(f"the documents changed ({self.documents})")
        return "; ".join(parts) or "no question added, removed or edited (the file's order changed)"


def data_changes(entry: Mapping[str, Any], questions: Mapping[str, str], corpus: str) -> DataChanges | None:
    """How the questions (`questions`: id -> digest, `question_digests`) and the documents
    (`corpus`, their fingerprint) differ from the baseline entry's, when the figures can still be
    compared on the questions both hold: at least one question unchanged. None otherwise (a
    baseline made before question digests, no question in common): the dataset is a new one."""
    recorded = entry.get("questions")
    if not isinstance(recorded, dict):
        return None
    common = tuple(q for q, digest in questions.items() if recorded.get(q) == digest)
    if not common:
        return None
    before = entry.get("corpus")
    return DataChanges(
        added=tuple(q for q in questions if q not in recorded),
        removed=tuple(q for q in recorded if q not in questions),
        edited=tuple(q for q, digest in questions.items() if q in recorded and recorded[q] != digest),
        common=common,
        documents=None if before == corpus else f"{before or 'unknown'} -> {corpus or 'unknown'}",
    )


def run_data_changes(entry: Mapping[str, Any], run: Run) -> DataChanges | None:
    """`data_changes` of a run against the baseline entry; None when its dataset is the baseline's."""
    if entry.get("fingerprint") == run.fingerprint:
        return None
    return data_changes(entry, question_digests(run), run.corpus)


def on_questions(entry: Mapping[str, Any], common: Collection[str], types: Mapping[str, str], k: int) -> dict[str, Any]:
    """The entry with every figure recomputed on the `common` questions from its per-question
    values (rounded as committed): how both sides are compared after questions changed."""
    keep, recall = set(common), _recall_of(entry, k)

    def mean(values: Sequence[float]) -> float:
        return _r(sum(values) / len(values))

    methods = {}
    for method, figures in entry.get("methods", {}).items():
        rc = {q: v for q, v in figures.get("recall_per_question", {}).items() if q in keep}
        rr = {q: v for q, v in figures.get("reciprocal_ranks", {}).items() if q in keep}
        if not rc or not rr:
            continue  # its figures cannot be recomputed: reported as not compared
        by_type: dict[str, list[float]] = {}
        for q, v in rc.items():
            by_type.setdefault(types.get(q, ""), []).append(v)
        methods[method] = {
            **_degraded_on(figures, keep),
            recall: mean(list(rc.values())),
            "mrr": mean(list(rr.values())),
            "by_type": {t: {recall: mean(v)} for t, v in sorted(by_type.items()) if t in figures.get("by_type", {})},
            "reciprocal_ranks": rr,
            "recall_per_question": rc,
        }
    return {**entry, "methods": methods}


def _degraded_on(figures: Mapping[str, Any], keep: Collection[str]) -> dict[str, Any]:
    """A method's degraded count on the `keep` questions. A baseline written before the
    questions were kept holds only a count: it stays whole unless it is 0."""
    if "degraded" not in figures:
        return {}
    if DEGRADED_QUESTIONS not in figures and figures["degraded"]:
        return {"degraded": figures["degraded"]}
    fell_back = [q for q in figures.get(DEGRADED_QUESTIONS, []) if q in keep]
    return {"degraded": len(fell_back), **({DEGRADED_QUESTIONS: fell_back} if fell_back else {})}


def as_scores(entry: Mapping[str, Any], k: int) -> dict[str, MethodScores]:
    """An entry's figures as the scores `compare` reads (per method: overall, per type, per question)."""
    from retrieval.metrics import MethodScores

    recall = _recall_of(entry, k)
    return {
        method: MethodScores(
            overall={recall: f[recall], "mrr": f["mrr"]},
            by_type={t: dict(v) for t, v in f.get("by_type", {}).items()},
            per_question={q: {recall: v, "mrr": f["reciprocal_ranks"][q]} for q, v in f["recall_per_question"].items()},
        )
        for method, f in entry.get("methods", {}).items()
    }


def incompatibility(entry: Mapping[str, Any], run: Run, profile: str) -> str | None:
    """Why a run cannot be compared with the baseline entry (its dataset changed), or None.
    A changed configuration is compared all the same: that is what the gate measures, and so
    is a dataset that kept some questions as they were (on those questions)."""
    if entry.get("fingerprint") != run.fingerprint and run_data_changes(entry, run) is None:
        why = "no question is the same in both" if "questions" in entry else "the baseline predates question digests"
        return (
            f"the dataset changed since the baseline was made (fingerprint {entry.get('fingerprint')} -> "
            f"{run.fingerprint}) and {why}: metrics are not comparable. If the change is intended: re-record "
            f"(`{record_command(profile)}`) if questions changed, then `pytest --update-baseline` and commit "
            "baselines/metrics.json."
        )
    return None


def _recall_of(entry: Mapping[str, Any], k: int) -> str:
    """The name of the entry's recall figures: recall@ its own k (`k` for an entry without one)."""
    return f"recall@{entry.get('config', {}).get('k', k)}"


def at_k(entry: Mapping[str, Any], k: int) -> dict[str, Any]:
    """The entry with its recall figures named for `k`, as the gate compares them after a change
    of k (the report shows the run's recall@k against the baseline's)."""
    theirs, recall = _recall_of(entry, k), f"recall@{k}"

    def renamed(figures: Mapping[str, Any]) -> dict[str, Any]:
        return {recall if name == theirs else name: value for name, value in figures.items()}

    methods = {
        method: {**renamed(figures), "by_type": {t: renamed(v) for t, v in figures.get("by_type", {}).items()}}
        for method, figures in entry.get("methods", {}).items()
    }
    return {**entry, "methods": methods}


def config_changes(entry: Mapping[str, Any], run: Run) -> list[str]:
    """The settings that differ between the baseline entry and the run ("hybrid.rrf_k: 60 -> 5")."""
    before, current = entry.get("config", {}), run.config
    # A method's own settings (`hybrid.rrf_k`) count where the method ran both times; a method
    # added or dropped shows as figures new or no longer produced, not as a configuration change.
    ran_both = {k.split(".")[0] for k in before if "." in k} & {k.split(".")[0] for k in current if "." in k}
    return [
        f"{key}: {before.get(key)!r} -> {current.get(key)!r}"
        for key in sorted(set(before) | set(current))
        if before.get(key) != current.get(key) and ("." not in key or key.split(".")[0] in ran_both)
    ]


def compare(
    entry: Mapping[str, Any],
    scores: Mapping[str, MethodScores],
    k: int,
    types: Mapping[str, str],
    degraded: Mapping[str, Sequence[str]] | None = None,
    source: str = "the baseline",
    why: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Check]:
    """Every gated figure of every method present in both the baseline and the run.

    `types` maps question id -> type, to name the questions behind a per-type drop. `degraded`
    (method -> the question ids where it fell back, `Run.degraded`) gates the degraded count
    of the methods whose baseline records one: it fails when the count rises. `source` names
    the baseline file in the BaselineError raised when a gated figure lacks recall@k. `why`
    (method -> question id -> words, `failures.where_relevant`) follows each question that
    got worse.
    """
    recall = f"recall@{k}"
    # At another k (how many documents reach the LLM), the run's recall@k is held to the
    # baseline's: fewer relevant documents in the top k is what such a change costs.
    theirs = _recall_of(entry, k)
    renamed = theirs if theirs != recall else None
    tolerance = float(entry.get("tolerance", 0.0))
    checks = []
    for method, base in entry["methods"].items():
        if method not in scores:
            continue
        _require_recall(base, method, theirs, source)
        s = scores[method]
        rr = base.get("reciprocal_ranks", {})
        rc = base.get("recall_per_question", {})

        def worse(
            per_q: Mapping[str, float],
            metric: str,
            qtype: str | None = None,
            s: MethodScores = s,
            reasons: Mapping[str, str] = (why or {}).get(method, {}),
        ) -> list[str]:
            fell = [
                (q, v[metric])
                for q, v in s.per_question.items()
                if q in per_q and _r(v[metric]) < per_q[q] and (qtype is None or types.get(q) == qtype)
            ]
            # Largest fall first: a failure lists the first ten (SHOWN) and counts the rest.
            fell.sort(key=lambda qv: qv[1] - per_q[qv[0]])
            return [f"{q} ({per_q[q]:.2f} -> {now:.2f}{f'; {reasons[q]}' if q in reasons else ''})" for q, now in fell]

        checks.append(
            Check(
                method, recall, base[theirs], s.overall[recall], tolerance, worse(rc, recall), baseline_metric=renamed
            )
        )
        checks.append(Check(method, "mrr", base["mrr"], s.overall["mrr"], tolerance, worse(rr, "mrr")))
        for qtype, values in base.get("by_type", {}).items():
            if qtype in s.by_type:
                checks.append(
                    Check(
                        method,
                        f"{recall}[{qtype}]",
                        values[theirs],
                        s.by_type[qtype][recall],
                        tolerance,
                        worse(rc, recall, qtype),
                        baseline_metric=renamed and f"{renamed}[{qtype}]",
                    )
                )
        if degraded is not None and "degraded" in base:
            fell_back = list(degraded.get(method, ()))
            checks.append(
                Check(method, "degraded", base["degraded"], len(fell_back), 0.0, fell_back, lower_is_better=True)
            )
    return checks


def _require_recall(base: Mapping[str, Any], method: str, recall: str, source: str) -> None:
    """BaselineError naming the file and the entry when the method's figures lack `recall`."""
    missing = [] if recall in base else [f"method {method!r}"]
    missing += [f"method {method!r} by_type[{t}]" for t, v in base.get("by_type", {}).items() if recall not in v]
    if missing:
        raise BaselineError(
            f"{source}: {missing[0]} has no {recall}: the baseline was made with another k or is damaged. "
            f"Restore it with `git checkout -- {source}` or rewrite it with `pytest --update-baseline`."
        )


def unproduced(entry: Mapping[str, Any], checks: list[Check]) -> list[str]:
    """Figures the baseline gates that no check compared ("vector mrr"): a method or a question
    type the run no longer produces. Each one is a gate lowered to nothing, so the gate fails."""
    compared = {c.baseline_figure for c in checks}
    return [name for name in _figures(entry.get("methods", {})) if name not in compared]


def _figures(methods: Mapping[str, Any]) -> dict[str, float]:
    """Every gated figure of a baseline entry, flat: "hybrid mrr", "bm25 recall@5[paraphrase]"."""
    flat = {}
    for method, figures in methods.items():
        for metric, value in figures.items():
            if metric == "by_type":
                flat.update({f"{method} {m}[{t}]": v for t, vals in value.items() for m, v in vals.items()})
            elif metric not in NOT_FIGURES:
                flat[f"{method} {metric}"] = value
    return flat


def _diff(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], types: Mapping[str, str] | None = None
) -> tuple[list[str], list[str]]:
    changes = None
    if old and old.get("fingerprint") != new["fingerprint"] and types is not None:
        changes = data_changes(old, new.get("questions", {}), new.get("corpus", ""))
    if old and changes is not None and types is not None:
        # A dataset that kept some questions as they were: their figures are compared (and may
        # not fall), then the new baseline's are listed.
        k = int(new["config"].get("k", 5))
        kept_old, kept_new = {**old, "fingerprint": new["fingerprint"]}, new
        if changes.questions_changed:
            kept_old, kept_new = (on_questions(e, changes.common, types, k) for e in (kept_old, new))
        lines, lowered = _diff(kept_old, kept_new)
        return [
            f"  dataset changed: {changes}; on the {len(changes.common)} questions both hold:",
            *lines,
            f"  the new baseline, on all {len(new.get('questions', {}))} questions:",
            *(f"  {name}: {value:.4f}" for name, value in _figures(new["methods"]).items()),
        ], lowered
    if old and old.get("fingerprint") != new["fingerprint"]:
        # Other questions or documents: the old figures measured something else, so nothing is
        # lowered; the new baseline replaces the old one whole.
        lines = [
            f"  new dataset: {new['dataset']} (fingerprint {new['fingerprint']}) replaces "
            f"{old.get('dataset')} (fingerprint {old.get('fingerprint')})",
            *(f"  {name}: {value:.4f}" for name, value in _figures(new["methods"]).items()),
        ]
        return lines, []
    lines, lowered = [], []
    now_k = new["config"].get("k")
    was_k = (old or {}).get("config", {}).get("k", now_k)
    if old and now_k is not None and was_k != now_k:
        # Another k: recall@k is held to the baseline's, as the gate compares it.
        lines.append(f"  k {was_k} -> {now_k}: recall@{now_k} compared with the baseline's recall@{was_k}")
        old = at_k(old, now_k)
    before, after = _figures((old or {}).get("methods", {})), _figures(new["methods"])
    for name in [*after, *(n for n in before if n not in after)]:
        was, now = before.get(name), after.get(name)
        if was is None:
            lines.append(f"  {name}: new {now:.4f}")
        elif now is None:
            # A figure that disappears (a method no longer run) is a gate lowered to nothing.
            lines.append(f"  {name}: removed (was {was:.4f})")
            lowered.append(f"{name} (removed)")
        elif now != was:
            lines.append(f"  {name}: {was:.4f} -> {now:.4f} ({now - was:+.4f})")
            # A degraded count is worse when it rises; every other figure when it falls.
            if (now > was) if name.endswith(" degraded") else (now < was):
                lowered.append(name)
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


def _per_file(cassettes: Any) -> dict[str, str]:
    """An entry's cassette digests by file; a baseline from before per-file digests holds one
    digest of the whole folder."""
    if isinstance(cassettes, dict):
        return cassettes
    return {"(whole folder)": cassettes} if cassettes else {}


def update_baseline(
    path: str | Path,
    profile: str,
    entry: Mapping[str, Any],
    *,
    allow_regression: bool = False,
    types: Mapping[str, str] | None = None,
) -> str:
    """Write `entry` as the profile's baseline and return the diff; refuse to lower a figure
    unless `allow_regression`. With `types` (question id -> type), a dataset that kept some
    questions as they were is a changed one, whose figures on those questions may not fall;
    without, any other dataset replaces the old one whole. The file is replaced atomically."""
    path = Path(path)
    data = load_baseline(path)
    old = data["profiles"].get(profile)
    if old and "tolerance" in old:
        entry = {**entry, "tolerance": old["tolerance"]}
    lines, lowered = _diff(old, entry, types)
    if lowered and not allow_regression:
        raise BaselineError(
            f"refusing to lower the baseline of profile {profile!r}: {', '.join(lowered)}. "
            "Pass --allow-regression to accept a worse figure deliberately."
        )
    data["profiles"][profile] = entry
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    header = f"baseline {path} profile {profile!r}:"
    return "\n".join([header, *(lines or ["  no figure changed"])])
