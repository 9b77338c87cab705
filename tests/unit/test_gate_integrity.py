"""What keeps the gate honest, at the level of plain functions: the cassette digest, a new
dataset replacing a baseline, baseline figures no check compared, and the ranking snapshot
file (format, diff lines, damaged file)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
from fake_embeddings import FakeEmbeddingsServer, make_profile

from retrieval.config import LLMSettings, Settings
from retrieval.data.dataset import load_dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.gate.compare import Check
from retrieval.gate.compare import unproduced as unproduced_figures
from retrieval.gate.schema import BaselineError
from retrieval.gate.snapshots import load_snapshots, moved, render_snapshots, top_changed, write_snapshots
from retrieval.gate.update import update_baseline
from retrieval.recording.cassette_files import CassetteError, cassette_digest

FIXTURES = Path(__file__).parent / "fixtures"
# sha256 of nothing: a profile whose methods call no model has no cassette.
EMPTY = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def _entry(fingerprint: str, mrr: float, dataset: str = "qa") -> dict:
    # FIXTURE figures of a baseline entry.
    return {
        "dataset": dataset,
        "fingerprint": fingerprint,
        "config": {"k": 5},
        "methods": {
            "bm25": {
                "recall@5": mrr,
                "mrr": mrr,
                "by_type": {"exact": {"recall@5": mrr}},
                "reciprocal_ranks": {"q1": mrr},
                "recall_per_question": {"q1": mrr},
            }
        },
    }


def test_cassette_digest_covers_names_and_bytes_but_not_the_recording_metadata(tmp_path: Path) -> None:
    assert cassette_digest(tmp_path / "missing") == EMPTY
    (tmp_path / "a.json").write_text("{}")
    first = cassette_digest(tmp_path)
    assert first == "sha256:" + hashlib.sha256(b"a.json\x002\x00{}").hexdigest()
    (tmp_path / "recording.json").write_text('{"usage": {"seconds": 1.5}}')
    assert cassette_digest(tmp_path) == first  # timings change on every recording
    (tmp_path / "a.json").write_text("{} ")
    assert cassette_digest(tmp_path) != first
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.rankings.json").write_text("[]")
    assert cassette_digest(tmp_path) not in (first, EMPTY)


def test_a_new_dataset_replaces_the_baseline_without_allow_regression(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    update_baseline(path, "local", _entry("sha256:old", 0.9, "demo"))
    diff = update_baseline(path, "local", _entry("sha256:new", 0.5))
    assert diff.splitlines() == [
        f"baseline {path} profile 'local':",
        "  new dataset: qa (fingerprint sha256:new) replaces demo (fingerprint sha256:old)",
        "  bm25 recall@5: 0.5000",
        "  bm25 mrr: 0.5000",
    ]  # one question type: its figure is recall@5 again, not a figure of its own
    # The same dataset: a lower figure is refused as before.
    with pytest.raises(BaselineError, match=r"refusing to lower the baseline of profile 'local': bm25 recall@5, "):
        update_baseline(path, "local", _entry("sha256:new", 0.4))


def test_a_changed_cassette_digest_shows_in_the_diff(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    update_baseline(path, "local", {**_entry("sha256:f", 0.5), "cassettes": "sha256:aa"})
    diff = update_baseline(path, "local", {**_entry("sha256:f", 0.5), "cassettes": "sha256:bb"})
    assert diff.splitlines()[1:] == ["  cassette (whole folder): sha256:aa -> sha256:bb"]
    diff = update_baseline(path, "local", {**_entry("sha256:f", 0.5), "cassettes": {"a.json": "sha256:cc"}})
    assert diff.splitlines()[1:] == [
        "  cassette (whole folder): sha256:bb -> none",
        "  cassette a.json: none -> sha256:cc",
    ]


def test_baseline_figures_that_no_check_compared() -> None:
    entry = _entry("sha256:f", 0.5)
    entry["methods"]["vector"] = entry["methods"]["bm25"]
    checks = [Check("bm25", m, 0.5, 0.5, 0.0) for m in ("recall@5", "mrr")]
    assert unproduced_figures(entry, checks) == ["vector recall@5", "vector mrr"]
    # Two question types: each one's figure is gated, and unproduced when no check compared it.
    two = {"a": {"recall@5": 0.5}, "b": {"recall@5": 0.5}}
    entry["methods"]["vector"] = {**entry["methods"]["bm25"], "by_type": two}
    assert unproduced_figures(entry, checks) == [
        "vector recall@5",
        "vector mrr",
        "vector recall@5[a]",
        "vector recall@5[b]",
    ]


def test_snapshot_file_is_one_question_per_line(tmp_path: Path) -> None:
    path = tmp_path / "rankings" / "local.json"
    write_snapshots(path, "local", {"mine": {"q2": ["d3"], "q1": ["d1", "d2"]}, "bm25": {"q1": []}})
    assert path.read_text() == (
        "{\n"
        '  "format": "retrieval-rankings-1",\n'
        '  "profile": "local",\n'
        '  "top": 10,\n'
        '  "methods": {\n'
        '    "bm25": {\n'
        '      "q1": []\n'
        "    },\n"
        '    "mine": {\n'
        '      "q1": ["d1", "d2"],\n'
        '      "q2": ["d3"]\n'
        "    }\n"
        "  }\n"
        "}\n"
    )
    assert load_snapshots(path) == {"bm25": {"q1": []}, "mine": {"q1": ["d1", "d2"], "q2": ["d3"]}}
    assert render_snapshots("local", load_snapshots(path)) == path.read_text()


def test_moved_says_each_changed_question_from_its_first_differing_rank_nearest_the_top_first() -> None:
    before = {"q1": ["d1", "d2", "d3"], "q2": ["d3"], "q3": ["d4"], "q5": ["d1", "d2"], "q6": ["d1", "d2"]}
    after = {"q1": ["d1", "d3", "d2"], "q2": ["d3"], "q4": ["d5"], "q5": ["d2", "d1"], "q6": ["d1", "d2", "d9"]}
    assert moved(before, after) == [
        "q3: d4 -> (absent)",
        "q4: (absent) -> d5",
        "q5: d1 d2 -> d2 d1",
        "q1 from rank 2: d2 d3 -> d3 d2",
        "q6 from rank 3: (nothing) -> d9",
    ]


def test_a_top_10_change_lists_the_ten_questions_changed_nearest_the_top_and_counts_the_rest() -> None:
    # After a document is added, most questions change low in their top 10 (FIXTURE rankings).
    before = {f"q{i:02}": ["d1", "d2", "d3"] for i in range(12)}
    after = {**{q: ["d1", "d2", "new"] for q in before}, "q11": ["new", "d1", "d2"]}
    assert top_changed("bm25", before, after, "baselines/rankings/local.json") == (
        "bm25 top 10 changed for 12 question(s): q11: d1 d2 d3 -> new d1 d2; "
        + "; ".join(f"q{i:02} from rank 3: d3 -> new" for i in range(9))
        + "; and 2 more (`pytest --update-baseline` rewrites baselines/rankings/local.json: its diff lists all). "
        "If intended, accept it with `pytest --update-baseline`."
    )
    assert top_changed("bm25", before, dict(before), "baselines/rankings/local.json") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "retrieval-rankings-1",\n"methods": [}', r"local.json:2: invalid JSON \(Expecting value\)"),
        ('{"format": "other", "methods": {}}', r"local.json: not a ranking snapshot file"),
    ],
)
def test_a_damaged_snapshot_file_is_one_line_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "local.json"
    path.write_text(text)
    with pytest.raises(BaselineError, match=message):
        load_snapshots(path)
    assert load_snapshots(tmp_path / "none.json") == {}


def test_a_reranker_without_its_cassette_fails_in_replay_instead_of_being_skipped(
    tmp_path: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    embedder = make_profile(embeddings_server.url)
    settings = Settings(
        dataset=str(FIXTURES / "fixture_native"),
        profile=replace(embedder, llm=LLMSettings(provider="openai", model="fixture-reranker")),
        cassettes=str(tmp_path),
        cache=str(tmp_path / "cache"),  # the default, .cache, is the working directory's: the repository's
    )
    dataset = load_dataset(settings.dataset)
    # The embeddings are recorded; the reranker never was.
    evaluate(dataset, settings, mode="record", methods=["bm25", "vector", "hybrid"])
    with pytest.raises(CassetteError) as caught:
        evaluate(dataset, settings, mode="replay", methods=["bm25", "vector", "hybrid", "rerank"])
    assert str(caught.value) == (
        f"no cassette {tmp_path}/fixture/rerank-fixture-reranker.json: "
        "record it with `pytest --record --retrieval-profile fixture`"
    )
    # What the profile cannot provide is the only thing left out (said once in the gate's summary).
    run = evaluate(dataset, replace(settings, profile=embedder), methods=["bm25", "rerank"])
    assert run.methods == ["bm25"]
    assert run.skipped == {"rerank": "profile 'fixture' has no reranker (set rerank_provider and rerank_model)"}


SHAPE = (
    "method 'bm25' must map each question id to a list of document ids (strings). "
    "Restore it with `git checkout {path}`, or rewrite it with `pytest --update-baseline`."
)


@pytest.mark.parametrize(
    "methods",
    [{"bm25": ["x"]}, {"bm25": {"q1": [1, 2]}}, {"bm25": {"q1": "d1"}}, {"bm25": {"q1": ["d1", None]}}],
    ids=["method a list", "int ids", "ids a string", "a null id"],
)
def test_a_snapshot_file_of_the_wrong_shape_is_one_line_naming_it(tmp_path: Path, methods: dict) -> None:
    path = tmp_path / "local.json"
    path.write_text(json.dumps({"format": "retrieval-rankings-1", "methods": {"vector": {"q1": ["d1"]}, **methods}}))
    with pytest.raises(BaselineError) as caught:
        load_snapshots(path)
    assert str(caught.value) == f"{path}: {SHAPE.format(path=path)}"
