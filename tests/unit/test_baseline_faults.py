"""A damaged baseline is one line naming the file and the value; the degraded count is gated."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from demo_fixture import DEMO_BASELINE
from test_baseline import GOOD, TYPES, _run

from retrieval.gate.compare import compare
from retrieval.gate.schema import FORMAT, BaselineError, entry_for, load_baseline
from retrieval.gate.update import update_baseline
from retrieval.measures.metrics import score_run
from retrieval.run.results import QuestionResult, Run


def _degraded(run: Run, method: str, questions: set[str]) -> Run:
    """The run with `method` fallen back on `questions`."""
    results = [
        QuestionResult(
            r.question,
            {
                name: replace(m, status="degraded: timeout") if name == method and r.question.id in questions else m
                for name, m in r.methods.items()
            },
        )
        for r in run.results
    ]
    return replace(run, results=results)


def _file(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(content) if not isinstance(content, str) else content, encoding="utf-8")
    return path


def _valid_entry() -> dict:
    run = _run(GOOD)
    return entry_for(run, score_run(run), k=5)


def _with(change: dict) -> dict:
    entry = _valid_entry()
    entry["methods"]["bm25"].update(change)
    return {"format": FORMAT, "profiles": {"local": entry}}


RESTORE = "Restore it with `git checkout -- {path}` or rewrite it with `pytest --update-baseline`."


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ([], "expected a JSON object, got list"),
        ('{"format": "retrieval-baseline-1", ', "1: invalid JSON (Expecting property name enclosed in double quotes)"),
        ({"format": FORMAT, "profiles": []}, '"profiles" must be an object (profile -> entry)'),
        ({"format": FORMAT, "profiles": {"local": 3}}, "profile 'local': expected an object, got int"),
        (_with({"mrr": "0.8"}), "profile 'local': method 'bm25': mrr is '0.8', not a number"),
        (_with({"recall@5": None}), "profile 'local': method 'bm25': recall@5 is None, not a number"),
        (
            _with({"reciprocal_ranks": {"q1": "1"}}),
            "profile 'local': method 'bm25': reciprocal_ranks of q1 is '1', not a number",
        ),
        (
            _with({"by_type": {"paraphrase": {"recall@5": True}}}),
            "profile 'local': method 'bm25': by_type[paraphrase] recall@5 is True, not a number",
        ),
        (
            _with({"by_type": {"exact": {}}}),
            "profile 'local': method 'bm25': by_type[exact] is empty, expected its figures (e.g. recall@5)",
        ),
        (_with({"mrr": -5}), "profile 'local': method 'bm25': mrr is -5, outside its range (a number from 0 to 1)"),
        (
            {"format": FORMAT, "profiles": {"local": {**_valid_entry(), "methods": []}}},
            "profile 'local': \"methods\" must be an object (method -> figures)",
        ),
    ],
    ids=[
        "a list",
        "invalid JSON",
        "profiles a list",
        "entry a number",
        "string figure",
        "null figure",
        "string per question",
        "bool per type",
        "empty per type",
        "mrr out of range",
        "methods a list",
    ],
)
def test_a_damaged_baseline_is_one_line(tmp_path: Path, content: object, problem: str) -> None:
    path = _file(tmp_path, content)
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    sep = "" if problem[0].isdigit() else " "
    assert str(caught.value) == f"{path}:{sep}{problem}. {RESTORE.format(path=path)}"


def test_a_missing_mrr_is_named(tmp_path: Path) -> None:
    data = _with({})
    del data["profiles"]["local"]["methods"]["vector"]["mrr"]
    path = _file(tmp_path, data)
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    assert str(caught.value) == f"{path}: profile 'local': method 'vector': missing mrr. {RESTORE.format(path=path)}"


def test_a_non_utf8_baseline_is_named(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_bytes(b'{"format": "caf\xe9"}')
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    assert str(caught.value) == f"{path}: not UTF-8 (invalid continuation byte at byte 15). {RESTORE.format(path=path)}"


def test_a_baseline_written_by_update_baseline_loads() -> None:
    # The demo fixture's baseline is a copy of one `pytest --update-baseline` wrote.
    data = load_baseline(DEMO_BASELINE)
    assert sorted(data["profiles"]) == ["local"]


def test_the_entry_records_each_methods_degraded_count() -> None:
    run = _degraded(_run(GOOD), "vector", {"q1", "q3"})
    entry = entry_for(run, score_run(run), k=5)
    assert {m: f["degraded"] for m, f in entry["methods"].items()} == {"bm25": 0, "vector": 2}


def test_a_rising_degraded_count_fails_the_gate() -> None:
    entry = _valid_entry()
    run = _degraded(_run(GOOD), "vector", {"q1", "q3"})
    degraded = {m: list(run.degraded(m)) for m in run.methods}
    checks = compare(entry, score_run(run), 5, TYPES, degraded)
    failing = [c for c in checks if not c.ok]
    assert [(c.method, c.metric, c.baseline, c.current) for c in failing] == [("vector", "degraded", 0, 2)]
    assert failing[0].message() == (
        "vector degraded rose above the baseline: baseline 0, current 2, delta +2 (tolerance 0.0). "
        "Questions that got worse: q1, q3. If this change is intended, accept it with "
        '`pytest --update-baseline --allow-regression "REASON"` (the baseline records the reason; '
        "the PR summary shows it)."
    )
    # Fewer fallbacks than the baseline pass.
    fewer = compare(entry_for(run, score_run(run), k=5), score_run(_run(GOOD)), 5, TYPES, {"vector": []})
    assert [c.ok for c in fewer if c.metric == "degraded"] == [True, True]
    # Without the counts (a caller not wired yet) nothing about degraded is checked.
    assert [c for c in compare(entry, score_run(run), 5, TYPES) if c.metric == "degraded"] == []


def test_update_refuses_a_rising_degraded_count(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    update_baseline(path, "local", _valid_entry())
    run = _degraded(_run(GOOD), "vector", {"q2"})
    with pytest.raises(BaselineError, match=r"refusing to lower the baseline of profile 'local': vector degraded\."):
        update_baseline(path, "local", entry_for(run, score_run(run), k=5))


def test_a_by_type_entry_without_recall_at_k_is_one_line_naming_the_file(tmp_path: Path) -> None:
    # Loads (k is not known at load: mrr is a number), then compare() names the file and the entry.
    path = _file(tmp_path, _with({"by_type": {"identifiant": {"recall@5": 1.0}, "paraphrase": {"mrr": 1.0}}}))
    entry = load_baseline(path)["profiles"]["local"]
    with pytest.raises(BaselineError) as caught:
        compare(entry, score_run(_run(GOOD)), 5, TYPES, source=str(path))
    assert str(caught.value) == (
        f"{path}: method 'bm25' by_type[paraphrase] has no recall@5: the baseline was made with another k "
        f"or is damaged. {RESTORE.format(path=path)}"
    )


def test_a_method_without_recall_at_k_is_one_line_naming_the_file(tmp_path: Path) -> None:
    data = _with({})
    data["profiles"]["local"]["methods"]["vector"]["recall@10"] = data["profiles"]["local"]["methods"]["vector"].pop(
        "recall@5"
    )
    path = _file(tmp_path, data)
    entry = load_baseline(path)["profiles"]["local"]
    with pytest.raises(BaselineError) as caught:
        compare(entry, score_run(_run(GOOD)), 5, TYPES, source=str(path))
    assert str(caught.value) == (
        f"{path}: method 'vector' has no recall@5: the baseline was made with another k "
        f"or is damaged. {RESTORE.format(path=path)}"
    )
