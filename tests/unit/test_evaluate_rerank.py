"""A whole Gemini evaluation, keyless: the real SDK records against a local fake server,
then replays with the server stopped. The server's answers are test fixtures, so nothing
here is a baseline; what is checked is the plumbing: four methods, a degraded question
counted, the cost section, identical replay, and no key in the cassettes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from demo_fixture import DEMO_DATA, demo_dataset, demo_settings
from fake_servers import FIXTURE_KEY, Act, FakeGeminiServer, clean_gemini_env, gemini_profile

from retrieval.config import Settings
from retrieval.evaluation.evaluate import evaluate
from retrieval.recording.cassette_files import CassetteError
from retrieval.report.build import build_report
from retrieval.report.sections import render_markdown
from retrieval.text.redaction import find_secrets


def test_record_then_replay_a_gemini_run_with_reranking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_gemini_env(monkeypatch)
    demo = demo_dataset()
    # Six questions exercise every path; all 25 would only make the suite slower.
    dataset = replace(demo, questions=demo.questions[:6])
    prices = demo_settings().prices
    with FakeGeminiServer() as server:
        settings = Settings(
            dataset=str(DEMO_DATA),
            profile=gemini_profile(server.url),  # 8 concurrent rerank calls
            cassettes=str(tmp_path / "cassettes"),
            cache=str(tmp_path / "cache"),
            prices=prices,
        )
        # Corpus and questions are embedded first; the third request is the first rerank call.
        server.script(Act(), Act(), Act.answer("Voici le classement : q01, q02"))
        recorded = evaluate(dataset, settings, mode="record")
    monkeypatch.delenv("GEMINI_API_KEY")
    replayed = evaluate(dataset, settings, mode="replay")

    assert replayed.methods == ["bm25", "vector", "hybrid", "rerank"]
    for method in replayed.methods:
        assert replayed.ranked_ids(method) == recorded.ranked_ids(method)
    # Whichever rerank call came first got the unparseable answer; replay gives it to the same question.
    degraded = replayed.degraded("rerank")
    assert list(degraded.values()) == ["unparseable"] and degraded == recorded.degraded("rerank")
    [result] = [r for r in replayed.results if r.question.id in degraded]
    kept = result.methods["rerank"].ids  # hybrid is kept deeper: it is the candidate pool of the sweeps
    assert kept == result.methods["hybrid"].ids[: len(kept)] and len(kept) == 20

    report = build_report(replayed, dataset.documents, prices)
    markdown = render_markdown(report)
    assert markdown.splitlines()[2].endswith("| Degraded |")
    rerank_row = next(line for line in markdown.splitlines() if line.startswith("| rerank |"))
    assert rerank_row.endswith("| 1 |")
    cost = {row.method: row for row in report.cost}
    assert cost["rerank"].stages == ["question embeddings", "bm25", "vector", "hybrid", "rerank"]
    assert cost["rerank"].calls == 1 + len(dataset.questions)  # question embeddings + one call per question
    assert cost["rerank"].input_tokens > cost["vector"].input_tokens > 0
    rerank_cost, hybrid_cost = cost["rerank"].cost, cost["hybrid"].cost
    assert rerank_cost is not None and hybrid_cost is not None and rerank_cost > hybrid_cost
    assert "### Cost" in markdown and "1 question(s) degraded" in markdown

    cassettes = sorted(p.name for p in (tmp_path / "cassettes" / "fixture-gemini").iterdir())
    assert cassettes == [
        "corpus-vectors.json",
        "question-embeddings.json",
        "recording.json",
        "rerank-gemini-3.5-flash.json",
    ]
    for path in (tmp_path / "cassettes" / "fixture-gemini").glob("*.json"):
        assert find_secrets(path.read_text(), {"GEMINI_API_KEY": FIXTURE_KEY}) == []
        assert FIXTURE_KEY not in path.read_text()


def test_a_recording_with_a_failed_call_replaces_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rerank call that failed (HTTP 500 after retries) degrades its question; vcrpy does not
    record the error, so that cassette could never replay: the recording must not be kept."""
    clean_gemini_env(monkeypatch)
    demo = demo_dataset()
    dataset = replace(demo, questions=demo.questions[:2])
    with FakeGeminiServer() as server:
        settings = Settings(
            dataset=str(DEMO_DATA),
            profile=gemini_profile(server.url, rerank_workers=1, retry_attempts=2, retry_backoff=0.01),
            cassettes=str(tmp_path / "cassettes"),
            cache=str(tmp_path / "cache"),
        )
        # Two embedding calls, then the first rerank call fails on both of its attempts.
        server.script(Act(), Act(), Act.http(500), Act.http(500))
        with pytest.raises(CassetteError, match=r"recording not kept: rerank of q01 \(http 500\)"):
            evaluate(dataset, settings, mode="record")
    assert not (tmp_path / "cassettes" / "fixture-gemini").exists()
