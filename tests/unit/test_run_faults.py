"""Run logs and reports under faults: a log cut short is refused naming the line, files are written
atomically, a method that degraded on every question fails the CLI."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from demo_fixture import DEMO_DATA, DEMO_PROJECT

from retrieval.cli import main
from retrieval.files import atomic
from retrieval.run.results import RunLogError, load_run

FIXTURES = Path(__file__).parent / "fixtures"
BEIR = str(FIXTURES / "fixture_beir")
AGAIN = "Write it again with --log."


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run log of the BEIR fixture (2 questions, bm25), written once for the module: the log
    names no folder of its own, and each test damages a copy (`log`)."""
    folder = tmp_path_factory.mktemp("logged")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # as the tests run: in a folder of no project
        assert main(["--dataset", BEIR, "--methods", "bm25", "--log", "run.jsonl"]) == 0
    return folder / "run.jsonl"


@pytest.fixture
def log(tmp_path: Path, logged: Path) -> Path:
    """A copy of the module's run log of the BEIR fixture (2 questions, bm25), the test's own."""
    return Path(shutil.copy(logged, tmp_path / "run.jsonl"))


def test_the_header_records_the_question_count(log: Path) -> None:
    assert json.loads(log.read_text().splitlines()[0])["questions"] == 2
    assert len(load_run(log).results) == 2


def test_a_log_missing_its_last_question_is_refused(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:-1]))
    assert main(["--dataset", BEIR, "--from-log", str(log)]) == 2
    assert capsys.readouterr().err == (
        f"error: {log}:3: the log holds 1 question lines, its header says 2 (the log was cut short or edited). "
        f"{AGAIN}\n"
    )


def test_a_log_cut_in_the_middle_of_a_line_is_refused(log: Path) -> None:
    log.write_bytes(log.read_bytes()[:-40])
    with pytest.raises(RunLogError) as caught:
        load_run(log)
    assert str(caught.value) == f"{log}:3: the last line is cut short (the log was truncated). {AGAIN}"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda text: text.encode("latin-1").replace(b"{", b"\xe9{", 1), "not UTF-8 (invalid continuation byte"),
        (lambda text: text.replace('"questions": 2, ', "", 1).encode(), ":1: the header lacks questions"),
        (lambda text: text.replace('"questions": 2', '"questions": "2"', 1).encode(), ":1: questions is '2'"),
        (lambda text: text.replace('"usage": {', '"usage": [', 1).encode(), ":1: not a run log"),
    ],
    ids=["latin-1", "no count", "count a string", "header not JSON"],
)
def test_a_damaged_log_is_one_line(log: Path, damage: object, message: str) -> None:
    log.write_bytes(damage(log.read_text()))  # type: ignore[operator]
    with pytest.raises(RunLogError) as caught:
        load_run(log)
    assert str(caught.value).startswith(f"{log}")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def _edit_line(log: Path, number: int, edit: object) -> None:
    """Apply `edit` (a function of the parsed line) to line `number` (1 = the header) of the log."""
    lines = log.read_text().splitlines()
    row = json.loads(lines[number - 1])
    edit(row)  # type: ignore[operator]
    lines[number - 1] = json.dumps(row)
    log.write_text("\n".join(lines) + "\n")


def _bm25(row: dict) -> dict:
    return row["methods"]["bm25"]


@pytest.mark.parametrize(
    ("number", "edit", "problem"),
    [
        (2, lambda row: _bm25(row).update(ids="d1"), "question 'b1': bm25 ids is 'd1', not a list of document ids"),
        (2, lambda row: _bm25(row).update(ids=[1]), "question 'b1': bm25 ids is [1], not a list of document ids"),
        (3, lambda row: row["methods"].clear(), "question 'b2': no ranking of bm25, which the header lists"),
        (
            2,
            lambda row: _bm25(row).update(relevant_ranks={"d1": "1"}),
            "question 'b1': bm25 relevant_ranks is {'d1': '1'}, not document id -> a rank from 1, or null",
        ),
        (
            2,
            lambda row: _bm25(row).update(relevant_ranks={"d1": 1.0}),
            "question 'b1': bm25 relevant_ranks is {'d1': 1.0}, not document id -> a rank from 1, or null",
        ),
        (
            2,
            lambda row: _bm25(row).update(scores=["6.07"]),
            "question 'b1': bm25 scores is ['6.07'], not a list of numbers",
        ),
        (2, lambda row: _bm25(row).update(status=None), "question 'b1': bm25 status is None, not a string"),
        (2, lambda row: row.update(relevant=[]), "question 'b1': relevant is [], not a non-empty list of document ids"),
        (
            3,
            lambda row: row.update(relevant="d2"),
            "question 'b2': relevant is 'd2', not a non-empty list of document ids",
        ),
        (3, lambda row: row.update(type=1), "question 'b2': text and type must be strings"),
        (2, lambda row: row.update(question=7), "question is 7, not an id"),
        (1, lambda row: row.update(kept={"bm25": "20"}), "kept is {'bm25': '20'}, not method -> a count of ids"),
        (1, lambda row: row.update(kept=[20]), "kept is [20], not method -> a count of ids"),
        (1, lambda row: row.update(methods="bm25"), "methods is 'bm25', not a list of method names"),
    ],
    ids=[
        "ids a string",
        "int ids",
        "method missing",
        "rank a string",
        "rank a float",
        "score a string",
        "status null",
        "relevant empty",
        "relevant a string",
        "type a number",
        "question an int",
        "kept a string",
        "kept a list",
        "methods a string",
    ],
)
def test_a_log_line_of_the_wrong_shape_is_one_line_naming_the_file_and_the_line(
    log: Path, capsys: pytest.CaptureFixture[str], number: int, edit: object, problem: str
) -> None:
    _edit_line(log, number, edit)
    expected = f"{log}:{number}: {problem} (damaged log). {AGAIN}"
    with pytest.raises(RunLogError) as caught:
        load_run(log)
    assert str(caught.value) == expected
    assert main(["--dataset", BEIR, "--from-log", str(log)]) == 2
    assert capsys.readouterr().err == f"error: {expected}\n"


def test_an_unranked_relevant_document_reads_as_null(log: Path) -> None:
    _edit_line(log, 2, lambda row: _bm25(row).update(relevant_ranks={"d1": None}))
    assert load_run(log).results[0].methods["bm25"].relevant_ranks == {"d1": None}


def _failing_replace(src: object, dst: object) -> None:
    raise OSError(28, "No space left on device (injected)", str(dst))


@pytest.mark.parametrize("flag", ["--log", "--output"])
def test_log_and_report_are_written_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    target = tmp_path / "out.txt"
    target.write_text("previous\n")
    monkeypatch.setattr(atomic.os, "replace", _failing_replace)
    assert main(["--dataset", BEIR, "--methods", "bm25", flag, str(target)]) == 2
    assert capsys.readouterr().err == f"error: cannot write or read {target}: No space left on device (injected)\n"
    assert target.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


DEGRADING = '''
from retrieval.run.ranking import Ranking


class Fallback:
    """A fixture reranker whose every call failed: bm25's order, marked degraded."""

    name = "fallback"
    requires = ("bm25",)
    needs_vectors = False

    def rank(self, context):
        return [Ranking(r.indices, r.scores, "degraded: timeout") for r in context.rankings["bm25"]]


def factory(settings):
    return Fallback()
'''


def test_a_method_degraded_on_every_question_fails_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "degrading.py").write_text(DEGRADING)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["--dataset", BEIR, "--methods", "bm25,degrading:factory", "--output", "report.md"])
    assert code == 1
    assert capsys.readouterr().err == (
        "warning: every fallback call degraded (2 of 2 questions; most often: timeout): its figures are those of "
        "its fallback. Check the model, the key and the endpoint, then run again.\n"
    )
    assert "| fallback |" in (tmp_path / "report.md").read_text()  # the report is still written
    assert os.path.getsize(tmp_path / "report.md") > 0


# The fixture's one segment of corpus vectors (named by its content).
SEGMENT = "vectors/local/seg-2672ab534b5891ca195cbbc5"


@pytest.mark.parametrize(
    ("file", "content", "expected"),
    [
        (
            "cassettes/local/corpus-vectors.json",
            b'{"format": "retrieval-vector-store-1", "segments": [',
            "damaged vector store manifest (JSONDecodeError",
        ),
        (f"{SEGMENT}.vectors.npy", b"\x93NUMPY", "damaged vector segment (not the sha256 corpus-vectors.json lists)"),
        (f"{SEGMENT}.keys.npy", b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n", "Git LFS"),
        ("cassettes/local/question-embeddings.json", b"", "damaged cassette (invalid JSON at line 1"),
        ("cassettes/local/recording.json", b"\xff", "damaged recording metadata ("),
        (
            "cassettes/local/recording.json",
            b'{"usage": []}',
            'damaged recording metadata ("usage" is list, expected an object (stage -> counters)). Restore it',
        ),
        (
            "cassettes/local/recording.json",
            b'{"usage": {"vector": []}}',
            "damaged recording metadata (\"usage\" of 'vector' is list, expected an object of counters).",
        ),
        ("baselines/metrics.json", b"[]", "expected a JSON object, got list"),
        ("baselines/metrics.json", b'{"format": ', "invalid JSON (Expecting value)"),
    ],
    ids=[
        "truncated vector manifest",
        "damaged vector segment",
        "vector segment an LFS pointer",
        "empty cassette",
        "non-UTF-8 metadata",
        "metadata usage a list",
        "metadata stage a list",
        "baseline a list",
        "baseline invalid JSON",
    ],
)
def test_a_damaged_committed_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, content: bytes, expected: str
) -> None:
    for folder in ("cassettes", "vectors", "baselines"):
        shutil.copytree(DEMO_PROJECT / folder, tmp_path / folder)
    (tmp_path / file).write_bytes(content)
    assert main(["--dataset", str(DEMO_DATA), "--methods", "bm25,vector", "--baseline"]) == 2
    err = capsys.readouterr().err
    # Paths resolve from the project root: the message names the file wherever the command ran.
    assert err.startswith(f"error: {tmp_path / file}") and expected in err
    assert err.count("\n") == 1
