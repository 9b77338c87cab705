"""The gate's life cycle on a temporary copy of the project: a change to the RRF k or the
analyzer is measured against the baseline and fails until the baseline records it; a changed
question fails the gate with a message a user understands; updating the baseline makes it
pass again; a lowered figure names the questions that got worse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from demo_fixture import DEMO_PROJECT

from retrieval.config import load_settings
from retrieval.data import analyzer
from retrieval.gate.accept import accept
from retrieval.gate.result import BASELINE_PATH, run_gate
from retrieval.gate.schema import BaselineError
from retrieval.providers.base import ReplayMissError
from retrieval.recording.cassette_files import CassetteError, cassette_digest

# FIXTURE: the project under test has its own settings, not this repository's [tool.retrieval],
# and its baseline is made by the fixture, so the committed figures never matter here.
PROJECT_FILE = 'dataset = "data/demo"\nprofile = "local"\nmethods = ["bm25", "vector", "hybrid"]\nrrf_k = 60\n'


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo data and its recorded embeddings, with a baseline made from them (once)."""
    root = tmp_path_factory.mktemp("template")
    for item in ("data/demo", "cassettes/local", "vectors/local"):
        shutil.copytree(DEMO_PROJECT / item, root / item)
    (root / "retrieval.toml").write_text(PROJECT_FILE)
    accept(run_gate(load_settings(root, {"profile": "local"})))
    return root


@pytest.fixture
def project(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The template project, copied for one test (which may change anything in it)."""
    shutil.copytree(template, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _gate(**overrides: object):
    return run_gate(load_settings(".", {"profile": "local", **overrides}))


def test_fresh_baseline_passes(project: Path) -> None:
    result = _gate()
    assert result.problem is None
    assert [f"{c.method} {c.metric}" for c in result.checks if not c.ok] == []
    # 3 methods x (recall@5, mrr, 3 types, degraded count)
    assert len(result.checks) == 18 and result.unproduced() == [] and result.ungated_methods() == []


def test_rrf_k_change_is_measured_then_update_passes(project: Path) -> None:
    # A worse RRF k: the figures are compared (what the change costs), and the configuration
    # fails on its own until the baseline records it.
    (project / "retrieval.toml").write_text(PROJECT_FILE.replace("rrf_k = 60", "rrf_k = 200"))
    worse = _gate()
    assert worse.problem is None and worse.changed_config == ("hybrid.rrf_k: 60 -> 200",)
    assert [f"{c.method} {c.metric}" for c in worse.checks if not c.ok] == ["hybrid mrr"]
    with pytest.raises(BaselineError, match="refusing to lower the baseline of profile 'local': hybrid mrr"):
        accept(worse)
    # A better one: every figure held, the configuration item alone fails, and the update needs
    # no --allow-regression.
    (project / "retrieval.toml").write_text(PROJECT_FILE.replace("rrf_k = 60", "rrf_k = 5"))
    better = _gate()
    assert better.problem is None and all(c.ok for c in better.checks)
    assert better.reconfigured == (
        "the configuration differs from the baseline's (hybrid.rrf_k: 60 -> 5): the figures are compared with the "
        "baseline's. If the change is intended, run `pytest --update-baseline` (with --allow-regression if a figure "
        "fell, and say why in the PR) and commit baselines/metrics.json."
    )
    assert "  config hybrid.rrf_k: 60 -> 5" in accept(better).splitlines()
    again = _gate()
    assert again.problem is None and again.reconfigured is None and all(c.ok for c in again.checks)
    assert json.loads(Path(BASELINE_PATH).read_text())["profiles"]["local"]["config"]["hybrid.rrf_k"] == 5


def test_analyzer_change_is_reported_as_configuration(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = analyzer.ANALYZER_VERSION
    monkeypatch.setattr(analyzer, "ANALYZER_VERSION", old + "-next")
    result = _gate()
    assert result.problem is None and result.changed_config == (f"analyzer: '{old}' -> '{old}-next'",)


def test_an_edited_question_is_measured_under_its_old_judgments_until_the_baseline_records_it(project: Path) -> None:
    path = project / "data/demo/questions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["type"] = "mixte"  # same text: the recorded embeddings still apply
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    result = _gate()
    edited, others = rows[0]["id"], [r["id"] for r in rows[1:]]
    assert result.problem is None and result.changed_data is not None
    assert (str(result.changed_data), list(result.changed_data.common)) == (f"1 edited ({edited})", others)
    assert result.changed_data.rejudged == (edited,)
    where = f"the {len(others)} questions both hold and the 1 edited one(s) under the baseline's judgments"
    assert result.redataset == (
        f"the dataset changed since the baseline (1 edited ({edited})): the figures are compared on {where}. If the "
        "change is intended, run `pytest --update-baseline` (with --allow-regression if a figure fell, and say why "
        "in the PR) and commit baselines/metrics.json."
    )
    assert [f"{c.method} {c.metric}" for c in result.checks if not c.ok] == [] and result.unproduced() == []
    # Both sides are the committed per-question figures, averaged over the unchanged questions and
    # the edited one (its relevant ids unchanged here, so its old value).
    hybrid = json.loads(Path(BASELINE_PATH).read_text())["profiles"]["local"]["methods"]["hybrid"]
    mrr = next(c for c in result.checks if (c.method, c.metric) == ("hybrid", "mrr"))
    values = [hybrid["reciprocal_ranks"][q] for q in [*others, edited]]
    assert mrr.baseline == mrr.current == round(sum(values) / len(values), 4)
    assert f"  dataset changed: 1 edited ({edited}); compared on {where}:" in accept(result)
    assert _gate().changed_data is None


def test_new_question_text_needs_a_recording(project: Path) -> None:
    path = project / "data/demo/questions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["text"] += " merci"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    with pytest.raises(ReplayMissError, match=r"pytest --record --retrieval-profile local") as caught:
        _gate()
    cassette = project / "cassettes/local/question-embeddings.json"
    assert f"questions new or changed since {cassette} was recorded: {rows[0]['id']}" in str(caught.value)


def test_an_update_that_moves_many_top_10s_lists_ten_per_method_and_points_at_the_diff(project: Path) -> None:
    # A BM25 saturation this low reorders most questions' bm25 (and so hybrid) top 10.
    (project / "retrieval.toml").write_text(PROJECT_FILE + "bm25_k1 = 0.2\n")
    diff = accept(_gate(), allow_regression="accepted on purpose").splitlines()
    moves = diff[diff.index("rankings baselines/rankings/local.json:") + 1 :]
    assert moves[10] == "  bm25 and 8 more (`git diff baselines/rankings/local.json`)"
    assert moves[21] == "  hybrid and 4 more (`git diff baselines/rankings/local.json`)"
    assert len(moves) == 22 and not any(line.startswith("  vector") for line in moves)
    # Nearest the top first: changed at rank 1, then the first changed at rank 2.
    assert [line.split(":")[0] for line in moves[:4]] == [
        "  bm25 q08",
        "  bm25 q14",
        "  bm25 q21",
        "  bm25 q05 from rank 2",
    ]


def test_lowered_figure_names_worse_questions_and_update_refuses(project: Path) -> None:
    baseline = json.loads(Path(BASELINE_PATH).read_text())
    vector = baseline["profiles"]["local"]["methods"]["vector"]
    # A question whose relevant document is in the top 5, not first: raising it moves no recall.
    question = next(
        q for q, rr in vector["reciprocal_ranks"].items() if 0 < rr < 1 and vector["recall_per_question"][q] == 1
    )
    vector["reciprocal_ranks"][question] = 1.0
    # Raised consistently (the baseline checks each figure against its per-question values, and
    # those against the top 10 the snapshot file holds).
    vector["mrr"] = round(sum(vector["reciprocal_ranks"].values()) / len(vector["reciprocal_ranks"]), 4)
    Path(BASELINE_PATH).write_text(json.dumps(baseline, indent=2, sort_keys=True))
    relevant = baseline["profiles"]["local"]["judgments"][question]["relevant"][0]
    snapshots = Path("baselines/rankings/local.json")
    tops = json.loads(snapshots.read_text())
    top = tops["methods"]["vector"][question]
    tops["methods"]["vector"][question] = [relevant, *(d for d in top if d != relevant)][:10]
    snapshots.write_text(json.dumps(tops))
    result = _gate()
    failed = [c for c in result.checks if not c.ok]
    assert [(c.method, c.metric) for c in failed] == [("vector", "mrr")]
    message = failed[0].message()
    assert "baseline" in message and "current" in message and "delta -0.0" in message and question in message
    before = Path(BASELINE_PATH).read_text()
    with pytest.raises(BaselineError, match="refusing to lower"):
        accept(result)
    assert Path(BASELINE_PATH).read_text() == before


def test_edited_cassette_fails_until_the_baseline_is_updated(project: Path) -> None:
    path = project / "cassettes/local/question-embeddings.json"
    path.write_text(path.read_text() + "\n")  # same answers, other bytes: still not the baseline's cassettes
    result = _gate()
    assert result.problem is None and result.changed_cassettes == ("question-embeddings.json",)
    assert result.stale == (
        "the cassettes changed since the baseline (question-embeddings.json): run `pytest --update-baseline` and "
        "commit baselines/metrics.json with cassettes/local/."
    )
    assert len(result.checks) == 18 and all(c.ok for c in result.checks)  # still compared: nothing moved
    digest = result.digests["question-embeddings.json"]
    was = json.loads((project / BASELINE_PATH).read_text())["profiles"]["local"]["cassettes"]
    assert sorted(was) == ["corpus-vectors.json", "question-embeddings.json"]
    diff = accept(result)
    assert diff.splitlines()[1:] == [
        f"  cassette question-embeddings.json: {was['question-embeddings.json']} -> {digest}",
        "rankings baselines/rankings/local.json:",
        "  no top 10 moved",
    ]
    assert _gate().stale is None


def test_a_cassette_no_gated_method_reads_changes_nothing(project: Path) -> None:
    # An experiment recorded with the CLI into the same folder, or the cassette of a method
    # taken out of `methods`: the figures do not come from it.
    folder = project / "cassettes/local"
    (folder / "experiment.json").write_bytes((folder / "question-embeddings.json").read_bytes())
    result = _gate()
    assert result.stale is None and sorted(result.digests) == ["corpus-vectors.json", "question-embeddings.json"]
    assert [c for c in result.checks if not c.ok] == [] and len(result.checks) == 18


def test_a_baseline_holding_one_digest_of_the_folder_is_still_checked(project: Path) -> None:
    # Baselines written before per-file digests hold one sha256 of every cassette of the folder.
    path = project / BASELINE_PATH
    data = json.loads(path.read_text())
    data["profiles"]["local"]["cassettes"] = cassette_digest(project / "cassettes/local")
    path.write_text(json.dumps(data))
    assert _gate().stale is None
    (project / "cassettes/local/experiment.json").write_text("{}")
    assert _gate().stale == (
        "the cassettes changed since the baseline (the baseline holds one digest of the whole folder): run "
        "`pytest --update-baseline` and commit baselines/metrics.json with cassettes/local/."
    )
    data["profiles"]["local"]["cassettes"] = ["not", "digests"]
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match='"cassettes" must be an object \\(cassette file -> its sha256 digest\\)'):
        _gate()


def test_a_cassette_holding_the_value_of_a_key_variable_a_method_declares_fails_the_gate(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIXTURE_GATE_KEY", "fixture-gate-key-0123")
    (project / "cassettes/local/experiment.json").write_text('{"text": "fixture-gate-key-0123"}')
    assert _gate().secrets == ()  # no gated method declares the variable
    result = _gate(methods=["bm25", "plugin_mistakes:KeyedInProcess"])
    assert result.secrets == (f"{project / 'cassettes/local/experiment.json'}: value of $FIXTURE_GATE_KEY",)
    assert result.problem is not None and result.problem.startswith("the cassettes hold what looks like a credential")


def test_a_cassette_holding_a_key_fails_the_gate(project: Path) -> None:
    path = project / "cassettes/local/question-embeddings.json"
    # A fixture key shape, JSON-escaped as a careless filter would leave it.
    path.write_text(
        path.read_text().replace(
            '"interactions"', '"note": "\\\\u0041IzaSyFIXTUREFIXTUREFIXTUREFIXTURE00", "interactions"', 1
        )
    )
    result = _gate()
    assert result.problem is not None and result.problem.startswith("the cassettes hold what looks like a credential (")
    assert (
        "question-embeddings.json" in result.problem
        and "re-record with `pytest --record --retrieval-profile local`" in result.problem
    )
    assert result.checks == []
    # An update must not accept them either: the baseline file stays as it was.
    before = Path(BASELINE_PATH).read_bytes()
    with pytest.raises(CassetteError, match="the cassettes hold what looks like a credential"):
        accept(result)
    assert Path(BASELINE_PATH).read_bytes() == before
