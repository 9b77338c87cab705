"""The LLM judge as a recorded stage, proven through local protocol servers whose answers are named
fixtures: its grades recorded in `judge-<model>.json` and replayed with the network closed, written
as `llm:<model>` lines, counted only with accept_llm_judgments, and its agreement with people in
the report. No instruction-tuned model runs here: real grades come from a key holder's recording."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_servers import FIXTURE_KEY, Act, FakeGeminiServer, FakeOpenAIServer, clean_gemini_env
from judging_fixture import demo_pool, project_in

from retrieval.cli import main
from retrieval.data.analyzer import analyze
from retrieval.data.dataset import load_dataset
from retrieval.data.judgment_file import JUDGMENTS_FILE, read_judgments
from retrieval.judging.llm_judge import PASSAGE_CHARS, parse_grade, render_judge_prompt
from retrieval.measures.agreement import agreements
from retrieval.providers.base import ProviderError

_QUERY = re.compile(r"^Query: (.*)$", re.M)
_PASSAGE = re.compile(r"^Passage: (.*)$", re.M)


def overlap_grade(prompt: str) -> int:
    """FIXTURE judge: the grade a passage gets from how many of the query's analysed terms it holds
    (none 0, one 1, two or three 2, more 3). Deterministic, so a grade given to the wrong pair shows."""
    query, passage = _QUERY.search(prompt), _PASSAGE.search(prompt)
    assert query and passage, prompt
    shared = set(analyze(query.group(1))) & set(analyze(passage.group(1)))
    return 0 if not shared else 1 if len(shared) == 1 else 2 if len(shared) <= 3 else 3


def overlap_answer(prompt: str) -> str:
    """FIXTURE answer of the fake servers: {"grade": overlap_grade(prompt)}."""
    return json.dumps({"grade": overlap_grade(prompt)})


def _profile(url: str, provider: str = "openai") -> str:
    base = f"{url}/v1" if provider == "openai" else url
    model = "fixture-chat-model" if provider == "openai" else "gemini-3.5-flash"
    return (
        f'\n[profiles.fixture]\nembedding_provider = "{provider}"\nembedding_base_url = "{base}"\n'
        f'embedding_model = "fixture-embedder"\ndimensions = 8\nrerank_provider = "{provider}"\n'
        f'rerank_base_url = "{base}"\nrerank_model = "{model}"\nrerank_workers = 1\ntimeout = 5\n'
        "retry_attempts = 1\n"
    )


@pytest.fixture
def chat() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(answer=overlap_answer) as fake:
        yield fake


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return project_in(tmp_path, monkeypatch)


@pytest.mark.parametrize(
    ("raw", "grade"),
    [('{"grade": 2}', 2), ('{"grade": "3"}', 3), ('{"grade": 0}', 0), ("M: 2, T: 1\n##final score: 1", 1)],
)
def test_parse_grade(raw: str, grade: int) -> None:
    assert parse_grade(raw) == grade


@pytest.mark.parametrize("raw", ['{"grade": 4}', '{"grade": true}', '{"score": 2}', "I think 2", '{"grade": 1.5}', ""])
def test_parse_grade_refuses_an_answer_without_a_grade(raw: str) -> None:
    with pytest.raises(ProviderError) as refused:
        parse_grade(raw)
    assert refused.value.reason == "unparseable"


def test_the_prompt_is_versioned_deterministic_and_cut() -> None:
    prompt = render_judge_prompt("Comment  restaurer ?", "Restaurer", "une\nsauvegarde " * 400)
    assert prompt == render_judge_prompt("Comment restaurer ?", "Restaurer", "une\nsauvegarde " * 400)
    assert "Query: Comment restaurer ?\n" in prompt
    passage = _PASSAGE.search(prompt)
    assert passage and passage.group(1).startswith("Restaurer une sauvegarde une")
    assert passage.group(1).endswith(" […]") and len(passage.group(1)) <= PASSAGE_CHARS + 4
    assert "0 = the passage has nothing to do with the query" in prompt and '{"grade": N}' in prompt


def test_the_llm_judge_records_replays_and_is_measured_against_people(
    project: Path, chat: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = project / "retrieval.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + _profile(chat.url), encoding="utf-8")
    args = ["judge", "--llm", "--profile", "fixture", "--methods", "bm25"]
    assert main([*args, "--record"]) == 0
    err = capsys.readouterr().err
    cassette = project / "cassettes" / "fixture" / "judge-fixture-chat-model.json"
    assert cassette.is_file() and FIXTURE_KEY not in cassette.read_text(encoding="utf-8")
    _, dataset, pool = demo_pool(project, methods="bm25", profile="fixture")
    path = project / "data" / "demo" / JUDGMENTS_FILE
    lines = read_judgments(path)
    # Every pair of the pool, people's too (they measure the agreement), one call each.
    assert {(j.question, j.document) for j in lines} == {c.pair for c in pool}
    assert {j.source for j in lines} == {"llm:fixture-chat-model"}
    assert len(chat.requests) == len(pool)
    prompts = {(r.body["messages"][-1]["content"]) for r in chat.requests}
    expected = {
        c.pair: overlap_grade(render_judge_prompt(q.text, d.title, d.text))
        for c in pool
        for q in dataset.questions
        if q.id == c.question
        for d in [dataset.documents[dataset.positions[c.document]]]
    }
    assert {(j.question, j.document): j.grade for j in lines} == expected
    assert len(prompts) == len(pool)
    assert f"llm:fixture-chat-model proposed a grade for {len(pool)} pair(s)" in err
    assert "These grades do not count until the project sets accept_llm_judgments = true" in err

    # Agreement with people on the pairs both judged: the demo's own relevant documents.
    checks = load_dataset(project / "data" / "demo").llm_checks
    assert len(checks) == sum(c.judged for c in pool) > 0
    [agreement] = agreements(checks)
    assert main(["--methods", "bm25", "--profile", "fixture"]) == 0
    report = capsys.readouterr().out
    assert "### LLM judge `llm:fixture-chat-model` against people" in report
    assert f"On the {agreement.pairs} pair(s) both judged" in report
    assert f"the same grade for {agreement.exact:.0%} of them. Its grades do not count" in report
    assert f"{len(lines)} judgment(s) of judgments.jsonl are an LLM's proposals (`llm:`): not counted" in report

    # Replayed with the server gone: the same grades, from the cassette alone.
    chat.stop()
    path.unlink()
    assert main(args) == 0
    assert {(j.question, j.document): j.grade for j in read_judgments(path)} == expected
    assert len(chat.requests) == len(pool)  # nothing more reached the server
    capsys.readouterr()

    # A pair the recording does not hold (a deeper pool) stops the replay before anything is written.
    before = path.read_bytes()
    assert main([*args, "--depth", "6"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: judgment of question ") and "(fixture-chat-model): no recorded answer" in err
    assert path.read_bytes() == before

    # Accepted, the LLM's grades fill the holes: every document of bm25's top 5 is judged.
    toml.write_text(
        toml.read_text(encoding="utf-8").replace('profile = "local"', 'profile = "local"\naccept_llm_judgments = true')
    )
    assert main(["--methods", "bm25", "--profile", "fixture"]) == 0
    report = capsys.readouterr().out
    assert "| bm25 | 1.00 | 1.00 | 1.00 | 1.00 | 0 |" in report
    assert "Its grades count." in report


def test_an_outage_costs_a_pair_its_grade_and_nothing_else(
    project: Path, chat: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = project / "retrieval.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + _profile(chat.url), encoding="utf-8")
    chat.script(Act.http(500), Act.answer("no grade here"), Act.blocked())
    # Depth 2: the holes of bm25's top 2 (33 live calls; 101 at the default depth 5).
    args = ["judge", "--llm", "--live", "--profile", "fixture", "--methods", "bm25", "--holes-only", "--depth", "2"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "3 pair(s) got no grade (http 500: 1, unparseable: 1, blocked: 1): run it again for them." in err
    _, _, pool = demo_pool(project, depth=2, methods="bm25", profile="fixture")
    holes = [c for c in pool if not c.judged]
    lines = read_judgments(project / "data" / "demo" / JUDGMENTS_FILE)
    assert len(lines) == len(holes) - 3 and {j.question for j in lines} <= {c.question for c in holes}
    assert not (project / "cassettes" / "fixture").exists()  # --live records nothing


def test_the_llm_judge_through_gemini(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_gemini_env(monkeypatch)
    with FakeGeminiServer(answer=overlap_answer) as gemini:
        toml = project / "retrieval.toml"
        toml.write_text(toml.read_text(encoding="utf-8") + _profile(gemini.url, "gemini"), encoding="utf-8")
        assert main(["judge", "--llm", "--record", "--profile", "fixture", "--methods", "bm25", "--depth", "2"]) == 0
        asked = len(gemini.requests)
    cassette = project / "cassettes" / "fixture" / "judge-gemini-3.5-flash.json"
    assert cassette.is_file() and FIXTURE_KEY not in cassette.read_text(encoding="utf-8")
    lines = read_judgments(project / "data" / "demo" / JUDGMENTS_FILE)
    assert len(lines) == asked > 25 and {j.source for j in lines} == {"llm:gemini-3.5-flash"}
    assert "llm:gemini-3.5-flash proposed a grade for" in capsys.readouterr().err
