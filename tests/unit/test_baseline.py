"""The baseline: entry, comparison with messages that explain a drop, guarded atomic updates."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from retrieval.data.dataset import Question
from retrieval.gate.compare import at_k, compare, config_changes, incompatibility, unproduced
from retrieval.gate.questions import DataChanges, as_scores, data_changes, on_questions
from retrieval.gate.schema import BaselineError, entry_for, load_baseline
from retrieval.gate.update import update_baseline
from retrieval.measures.metrics import MethodScores, score_run
from retrieval.run.results import MethodResult, QuestionResult, Run

QUESTIONS = [
    Question("q1", "J'obtiens HEL-4040", "identifiant", ("HEL-4040",)),
    Question("q2", "Revenir à l'état d'hier", "paraphrase", ("proc-restauration",)),
    Question("q3", "Cacher la sécu", "paraphrase", ("faq-masquage", "faq-rgpd")),
]
CONFIG = {
    "profile": "local",
    "embedding_model": "fixture-e5",
    "k": 5,
    "rrf_k": 60,
    "analyzer": "fr-1",
}


def _run(ranked: dict[str, list[list[str]]], config: dict | None = None, fingerprint: str = "sha256:aaaa") -> Run:
    results = []
    for i, q in enumerate(QUESTIONS):
        methods = {
            name: MethodResult(per_q[i], [1.0] * len(per_q[i]), {d: None for d in q.relevant})
            for name, per_q in ranked.items()
        }
        results.append(QuestionResult(q, methods))
    return Run(
        "fixture",
        fingerprint,
        {**CONFIG, **(config or {})},
        list(ranked),
        results,
    )


GOOD = {
    "bm25": [["HEL-4040", "x"], ["x", "proc-restauration"], ["faq-masquage", "faq-rgpd"]],
    "vector": [["x", "HEL-4040"], ["proc-restauration"], ["faq-rgpd", "x"]],
}
# bm25 loses q2's document (rank 2 -> absent) and q3's second one; vector is unchanged.
WORSE = {
    "bm25": [["HEL-4040", "x"], ["x", "y"], ["faq-masquage", "x"]],
    "vector": GOOD["vector"],
}


def _entry(ranked: dict[str, list[list[str]]] = GOOD, **kwargs: object) -> dict:
    run = _run(ranked, **kwargs)  # type: ignore[arg-type]
    return entry_for(run, score_run(run), k=5)


def _scores(ranked: dict[str, list[list[str]]]) -> dict[str, MethodScores]:
    return score_run(_run(ranked))


TYPES = {q.id: q.type for q in QUESTIONS}


# --- entry_for --------------------------------------------------------------------------------


def test_entry_holds_rounded_figures_and_per_question_values() -> None:
    entry = _entry()
    assert entry["fingerprint"] == "sha256:aaaa"
    assert entry["config"] == CONFIG
    bm25 = entry["methods"]["bm25"]
    assert bm25["recall@5"] == 1.0
    assert bm25["mrr"] == round((1 + 0.5 + 1) / 3, 4) == 0.8333
    assert bm25["by_type"] == {"identifiant": {"recall@5": 1.0}, "paraphrase": {"recall@5": 1.0}}
    assert bm25["reciprocal_ranks"] == {"q1": 1.0, "q2": 0.5, "q3": 1.0}
    assert entry["methods"]["vector"]["recall_per_question"]["q3"] == 0.5


# --- compare ----------------------------------------------------------------------------------


def test_same_figures_pass() -> None:
    checks = compare(_entry(), _scores(GOOD), 5, TYPES)
    assert checks and all(c.ok for c in checks)
    assert {c.method for c in checks} == {"bm25", "vector"}
    assert {c.metric for c in checks} == {
        "recall@5",
        "mrr",
        "recall@5[identifiant]",
        "recall@5[paraphrase]",
    }


def test_a_lowered_figure_fails_with_an_explanation() -> None:
    checks = {(c.method, c.metric): c for c in compare(_entry(), _scores(WORSE), 5, TYPES)}
    mrr = checks[("bm25", "mrr")]
    assert not mrr.ok
    assert mrr.baseline == 0.8333
    assert mrr.current == pytest.approx(2 / 3)
    # The delta is between the figures as shown (4 decimals): 0.6667 - 0.8333.
    assert mrr.delta == pytest.approx(-0.1666)
    message = mrr.message()
    assert "baseline 0.8333" in message
    assert "current 0.6667" in message
    assert "delta -0.1666" in message
    assert "q2 (0.5000 -> 0.0000)" in message
    assert "q3" not in message  # its reciprocal rank did not change

    recall = checks[("bm25", "recall@5")]
    assert not recall.ok
    assert "q2 (1.0000 -> 0.0000)" in recall.message() and "q3 (1.0000 -> 0.5000)" in recall.message()
    assert recall.worse_questions == ["q2 (1.0000 -> 0.0000)", "q3 (1.0000 -> 0.5000)"]

    per_type = checks[("bm25", "recall@5[paraphrase]")]
    assert not per_type.ok
    assert checks[("bm25", "recall@5[identifiant]")].ok
    assert all(c.ok for (method, _), c in checks.items() if method == "vector")


def test_a_failure_lists_the_ten_largest_falls_first_and_counts_the_rest() -> None:
    # FIXTURE figures of 13 questions: q00..q11 fell by 0.01 * (i + 1) from 1.0, q12 held.
    before = {f"q{i:02}": 1.0 for i in range(13)}
    after = {q: (1.0 if q == "q12" else round(1 - 0.01 * (i + 1), 2)) for i, q in enumerate(before)}
    base = {"recall@5": 1.0, "mrr": 1.0, "reciprocal_ranks": before, "recall_per_question": before}
    scores = MethodScores(
        {"recall@5": 1.0, "mrr": sum(after.values()) / 13},
        {},
        {q: {"recall@5": 1.0, "mrr": v} for q, v in after.items()},
    )
    (mrr,) = [c for c in compare({"methods": {"bm25": base}}, {"bm25": scores}, 5, {}) if not c.ok]
    assert mrr.worse_questions == [f"q{i:02} (1.0000 -> {1 - 0.01 * (i + 1):.4f})" for i in reversed(range(12))]
    assert mrr.message() == (
        "bm25 mrr fell below the baseline: baseline 1.0000, current 0.9400, delta -0.0600 (tolerance 0.0). "
        "Questions that got worse: q11 (1.0000 -> 0.8800), q10 (1.0000 -> 0.8900), q09 (1.0000 -> 0.9000), "
        "q08 (1.0000 -> 0.9100), q07 (1.0000 -> 0.9200), q06 (1.0000 -> 0.9300), q05 (1.0000 -> 0.9400), "
        "q04 (1.0000 -> 0.9500), q03 (1.0000 -> 0.9600), q02 (1.0000 -> 0.9700), and 2 more. If this change "
        "is intended, accept it with "
        '`pytest --update-baseline --allow-regression "REASON"` (the baseline records the reason; '
        "the PR summary shows it)."
    )


def test_tolerance_absorbs_small_drops() -> None:
    checks = {(c.method, c.metric): c for c in compare(_entry(), _scores(WORSE), 5, TYPES, tolerance=0.2)}
    assert checks[("bm25", "mrr")].ok  # -0.1667 within 0.2
    assert not checks[("bm25", "recall@5")].ok  # -0.5 is not


def test_methods_missing_from_the_run_are_not_checked() -> None:
    scores = _scores(GOOD)
    del scores["vector"]
    assert {c.method for c in compare(_entry(), scores, 5, TYPES)} == {"bm25"}


# --- update_baseline --------------------------------------------------------------------------


def test_update_writes_a_sorted_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "baselines" / "metrics.json"
    diff = update_baseline(path, "local", _entry())
    data = load_baseline(path)
    assert data["profiles"]["local"]["methods"]["bm25"]["mrr"] == 0.8333
    assert "bm25 mrr: new 0.8333" in diff
    text = path.read_text()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert [p.name for p in path.parent.iterdir() if p.suffix != ".lock"] == ["metrics.json"]


def test_update_refuses_to_lower_without_allow_regression(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    update_baseline(path, "local", _entry())
    before = path.read_bytes()
    with pytest.raises(BaselineError, match="refusing to lower") as caught:
        update_baseline(path, "local", _entry(WORSE))
    assert "bm25 mrr" in str(caught.value)
    assert "--allow-regression" in str(caught.value)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.suffix != ".lock"] == ["metrics.json"]


def test_update_lowers_with_allow_regression(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    update_baseline(path, "local", _entry())
    diff = update_baseline(path, "local", _entry(WORSE), allow_regression="accepted on purpose")
    assert "bm25 mrr: 0.8333 -> 0.6667 (-0.1666)" in diff
    assert load_baseline(path)["profiles"]["local"]["methods"]["bm25"]["mrr"] == 0.6667


def test_update_keeps_other_profiles_and_drops_a_stored_tolerance(tmp_path: Path) -> None:
    # The tolerance is the project file's setting: one left in the file by an older version
    # is not carried over (the gate ignores it: stricter, never looser).
    path = tmp_path / "metrics.json"
    update_baseline(path, "gemini", _entry())
    path.write_text(path.read_text().replace('"fingerprint"', '"tolerance": 0.5, "fingerprint"', 1))
    assert load_baseline(path)["profiles"]["gemini"]["tolerance"] == 0.5
    update_baseline(path, "local", _entry())
    diff = update_baseline(path, "gemini", _entry())
    data = load_baseline(path)
    assert set(data["profiles"]) == {"gemini", "local"}
    assert "tolerance" not in data["profiles"]["gemini"]
    assert "no figure changed" in diff


def test_update_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.json"
    update_baseline(path, "local", _entry())
    before = path.read_bytes()

    def broken_dumps(*args: object, **kwargs: object) -> str:
        raise OSError("disk full (simulated)")

    monkeypatch.setattr("retrieval.gate.update.json.dumps", broken_dumps)
    with pytest.raises(OSError, match="disk full"):
        update_baseline(path, "local", _entry(WORSE), allow_regression="accepted on purpose")
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.suffix != ".lock"] == ["metrics.json"]


def test_load_baseline_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "absent.json")["profiles"] == {}


def test_load_baseline_names_the_line_of_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text('{\n  "format": "retrieval-baseline-1",\n  "profiles": {,}\n}\n')
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    assert f"{path}:3:" in str(caught.value)


# --- incompatibility --------------------------------------------------------------------------


def test_compatible_run() -> None:
    assert incompatibility(_entry(), _run(GOOD), "local") is None


def test_a_dataset_not_comparable_is_named_with_why() -> None:
    older = {k: v for k, v in _entry().items() if k != "questions"}  # made before question digests
    reason = incompatibility(older, _run(GOOD, fingerprint="sha256:bbbb"), "local")
    assert reason is not None
    assert "fingerprint sha256:aaaa -> sha256:bbbb) and the baseline predates question digests" in reason
    assert "pytest --record --retrieval-profile local" in reason
    # Every question edited, and no judgments kept to score them again (a baseline from before them).
    other = {**_entry(), "questions": {q: "0" * 16 for q in _entry()["questions"]}}
    del other["judgments"]
    reason = incompatibility(other, _run(GOOD, fingerprint="sha256:bbbb"), "local")
    assert reason is not None and ") and no question id is in both: metrics are not comparable" in reason
    # With the judgments kept, edited questions are compared under them: still comparable.
    kept = {**_entry(), "questions": other["questions"]}
    assert incompatibility(kept, _run(GOOD, fingerprint="sha256:bbbb"), "local") is None
    # The same questions (only the fingerprint differs here): compared.
    assert incompatibility(_entry(), _run(GOOD, fingerprint="sha256:bbbb"), "local") is None


def test_changed_config_key_is_named_and_still_comparable() -> None:
    run = _run(GOOD, config={"rrf_k": 30})
    assert incompatibility(_entry(), run, "local") is None  # what the gate measures, not a stop
    assert config_changes(_entry(), run) == ["rrf_k: 60 -> 30"]  # only what changed


def test_added_config_key_is_named() -> None:
    assert config_changes(_entry(), _run(GOOD, config={"prompt_version": "v2"})) == ["prompt_version: None -> 'v2'"]


def test_update_refuses_to_drop_a_method_without_allow_regression(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    full: dict[str, Any] = {
        "dataset": "d",
        "fingerprint": "f",
        "config": {},
        "methods": {
            m: {
                "recall@5": 0.5,
                "mrr": 0.5,
                "by_type": {"t": {"recall@5": 0.5}},
                "reciprocal_ranks": {"q1": 0.5},
                "recall_per_question": {"q1": 0.5},
            }
            for m in ("bm25", "hybrid")
        },
    }
    update_baseline(path, "p", full)
    fewer = {**full, "methods": {"bm25": full["methods"]["bm25"]}}
    before = path.read_text()
    with pytest.raises(BaselineError, match=r"hybrid mrr \(removed\)"):
        update_baseline(path, "p", fewer)
    assert path.read_text() == before
    diff = update_baseline(path, "p", fewer, allow_regression="accepted on purpose")
    assert "hybrid mrr: removed (was 0.5000)" in diff


# --- another k ---------------------------------------------------------------------------------


def test_another_k_holds_the_runs_recall_at_k_to_the_baselines() -> None:
    # k is how many documents reach the LLM: at k = 1, q2's document (rank 2) no longer does.
    run = _run(GOOD, config={"k": 1})
    checks = compare(_entry(), score_run(run, 1), 1, TYPES, degraded={})
    bm25 = {c.metric: c for c in checks if c.method == "bm25"}
    recall = bm25["recall@1"]
    assert (recall.baseline, recall.current, recall.baseline_figure) == (1.0, 0.5, "bm25 recall@5")
    assert recall.message().startswith(
        "bm25 recall@1 fell below the baseline's recall@5: baseline 1.0000, current 0.5000, delta -0.5000"
    )
    assert "q2 (1.0000 -> 0.0000)" in recall.message() and "q3 (1.0000 -> 0.5000)" in recall.message()
    assert bm25["recall@1[paraphrase]"].baseline_figure == "bm25 recall@5[paraphrase]"
    assert bm25["mrr"].baseline_metric is None
    assert unproduced(_entry(), checks) == []
    assert config_changes(_entry(), run) == ["k: 5 -> 1"]
    assert at_k(_entry(), 1)["methods"]["bm25"]["recall@1"] == 1.0
    assert at_k(_entry(), 1)["methods"]["bm25"]["by_type"]["paraphrase"] == {"recall@1": 1.0}


def test_update_at_another_k_is_refused_as_lower_not_as_removed(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    update_baseline(path, "p", _entry())
    run = _run(GOOD, config={"k": 1})
    with pytest.raises(BaselineError) as caught:
        update_baseline(path, "p", entry_for(run, score_run(run, 1), k=1))
    assert "bm25 recall@1," in str(caught.value) and "removed" not in str(caught.value)
    diff = update_baseline(path, "p", entry_for(run, score_run(run, 1), k=1), allow_regression="accepted on purpose")
    assert "  k 5 -> 1: recall@1 compared with the baseline's recall@5" in diff.splitlines()
    assert "  bm25 recall@1: 1.0000 -> 0.5000 (-0.5000)" in diff.splitlines()


def test_a_dataset_is_compared_on_the_questions_it_kept_as_they_were() -> None:
    entry = {"corpus": "sha256:c1", "questions": {"q1": "a", "q2": "b", "q3": "c"}}
    changes = data_changes(entry, {"q1": "a", "q2": "x", "q4": "d"}, "sha256:c1")
    assert changes == DataChanges(added=("q4",), removed=("q3",), edited=("q2",), common=("q1",))
    assert str(changes) == "1 added (q4); 1 removed (q3); 1 edited (q2)"
    many = DataChanges(tuple(f"n{i}" for i in range(7)), (), (), ("q1",))
    assert str(many) == "7 added (n0, n1, n2, n3, n4 and 2 more)"
    # Other documents, the same questions: compared on every question, the documents named.
    documents = data_changes(entry, {"q1": "a", "q2": "b", "q3": "c"}, "sha256:c2")
    assert documents is not None and not documents.questions_changed
    assert str(documents) == "the documents changed (sha256:c1 -> sha256:c2)"
    # A baseline without question digests, or no question in common: a new dataset.
    assert data_changes({"corpus": "sha256:c1"}, {"q1": "a"}, "sha256:c1") is None
    assert data_changes(entry, {"q1": "z"}, "sha256:c1") is None


def test_a_degraded_count_is_kept_with_its_questions_and_counted_on_the_questions_kept() -> None:
    run = _run(GOOD)
    for result in run.results[1:]:  # the reranker's call failed for q2 and q3 (FIXTURE statuses)
        result.methods["vector"] = replace(result.methods["vector"], status="degraded: timeout")
    entry = entry_for(run, score_run(run), k=5)
    assert (entry["methods"]["vector"]["degraded"], entry["methods"]["vector"]["degraded_questions"]) == (
        2,
        ["q2", "q3"],
    )
    assert "degraded_questions" not in entry["methods"]["bm25"]  # none: the count alone, as before
    types = {q.id: q.type for q in QUESTIONS}
    kept = on_questions(entry, ["q1", "q3"], types, 5)["methods"]
    assert (kept["vector"]["degraded"], kept["vector"]["degraded_questions"]) == (1, ["q3"])
    assert kept["bm25"]["degraded"] == 0 and "degraded_questions" not in kept["bm25"]
    # Written before the questions were kept: a non-zero count cannot be split, it stays whole.
    older = {
        **entry,
        "methods": {"vector": {k: v for k, v in entry["methods"]["vector"].items() if k != "degraded_questions"}},
    }
    assert on_questions(older, ["q1"], types, 5)["methods"]["vector"]["degraded"] == 2


def test_figures_on_the_common_questions_are_means_of_the_committed_per_question_figures() -> None:
    run = _run(GOOD)
    run.corpus = "sha256:c1"
    entry = entry_for(run, score_run(run), k=5)
    assert entry["corpus"] == "sha256:c1" and sorted(entry["questions"]) == ["q1", "q2", "q3"]
    types = {q.id: q.type for q in QUESTIONS}
    kept = on_questions(entry, ["q1", "q3"], types, 5)["methods"]["bm25"]
    # bm25 ranks q1's document 1st and q3's two documents 1st and 2nd; q2 (rank 2) left out.
    assert (kept["mrr"], kept["recall@5"], kept["by_type"]) == (
        1.0,
        1.0,
        {"identifiant": {"recall@5": 1.0}, "paraphrase": {"recall@5": 1.0}},
    )
    assert on_questions(entry, ["q2"], types, 5)["methods"]["bm25"]["by_type"] == {"paraphrase": {"recall@5": 1.0}}
    # Rounded per question, then averaged: both sides the same way, so an unchanged run holds.
    rounded = {
        **entry,
        "methods": {"m": {**entry["methods"]["bm25"], "reciprocal_ranks": {"q1": 0.6667, "q2": 0.6667, "q3": 0.0}}},
    }
    assert on_questions(rounded, ["q1", "q2", "q3"], types, 5)["methods"]["m"]["mrr"] == 0.4445
    same = compare(
        on_questions(entry, ["q1", "q3"], types, 5), as_scores(on_questions(entry, ["q1", "q3"], types, 5), 5), 5, types
    )
    assert [c.ok for c in same] == [True] * len(same) and len(same) == 8


@pytest.mark.parametrize("value", ["q2", [1], {"q2": 1}])
def test_degraded_questions_of_another_shape_are_refused_naming_the_method(tmp_path: Path, value: object) -> None:
    entry = _entry()
    entry["methods"]["vector"]["degraded_questions"] = value
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"format": "retrieval-baseline-1", "profiles": {"local": entry}}))
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    assert str(caught.value) == (
        f"{path}: profile 'local': method 'vector': degraded_questions must be a list of question ids. "
        f"Restore it with `git checkout -- {path}` or rewrite it with `pytest --update-baseline`."
    )
