"""`python -m retrieval judge` from the command line: the pool exported to a spreadsheet and its
grades brought back (every row checked first: a bad row is one line naming the file, the line and
the fix, exit 2, nothing written), and the report measuring what was judged."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from judging_fixture import project_in

from retrieval.cli import main
from retrieval.data.judgment_file import JUDGMENTS_FILE, read_judgments


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return project_in(tmp_path, monkeypatch)


def _rows(path: Path) -> list[dict[str, str]]:
    text = path.read_bytes().decode("utf-8")
    assert text.startswith("\ufeff")  # Excel reads the accents as they are
    return list(csv.DictReader(io.StringIO(text[1:], newline="")))


def _write(path: Path, rows: list[dict[str, str]], delimiter: str = ",") -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), delimiter=delimiter)
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")


def test_the_pool_goes_to_a_spreadsheet_and_its_grades_come_back(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sheet = project / "pool.csv"
    assert main(["judge", "--export", str(sheet), "--methods", "bm25"]) == 0
    rows = _rows(sheet)
    assert list(rows[0]) == [
        "question_id",
        "question",
        "type",
        "document_id",
        "title",
        "text",
        "retrieved_by",
        "needed",
        "grade",
    ]
    assert rows[0]["question_id"] == "q01" and rows[0]["retrieved_by"].startswith("bm25 #")
    assert all(r["grade"] == "" for r in rows)
    # bm25's top 5 of 25 questions, less the documents already judged.
    assert 80 < len(rows) < 125
    assert f"{sheet}: {len(rows)} pair(s) of the top 5 of bm25." in capsys.readouterr().err
    # A French Excel gives semicolons back; rows left empty are not judged yet.
    for row, grade in zip(rows[:4], ["0", "3", "", "2"], strict=True):
        row["grade"] = grade
    _write(sheet, rows, delimiter=";")
    assert main(["judge", "--import", str(sheet)]) == 0
    path = project / "data" / "demo" / JUDGMENTS_FILE
    found = read_judgments(path)
    assert {(j.question, j.document, j.grade) for j in found} == {
        (r["question_id"], r["document_id"], int(r["grade"])) for r in rows[:4] if r["grade"]
    }
    assert {j.source for j in found} == {"import:pool.csv"}
    assert f"{sheet}: 3 grade(s) written to {path} (0 it already held)." in capsys.readouterr().err
    # Imported again: nothing changes, not even a date.
    before = path.read_bytes()
    assert main(["judge", "--import", str(sheet)]) == 0
    assert path.read_bytes() == before
    # The exported pool no longer holds what was judged.
    assert main(["judge", "--export", str(sheet), "--methods", "bm25"]) == 0
    assert len(_rows(sheet)) == len(rows) - 3
    # And the report measures it: bm25's top 5 holds 3 more judged documents.
    assert main(["--methods", "bm25"]) == 0
    report = capsys.readouterr().out
    assert f"{len(rows) - 3} (question, document) pair(s) of the methods' top 5 are unjudged" in report


@pytest.mark.parametrize(
    ("change", "line", "message"),
    [
        (
            {"grade": "deux"},
            3,
            "grade 'deux' is not one of 0, 1, 2, 3 (0 not relevant, 1 related, 2 partly answers, "
            "3 answers it). Fix it, or leave it empty for a pair not judged yet.",
        ),
        ({"grade": "4"}, 3, "grade '4' is not one of 0, 1, 2, 3"),
        ({"grade": "1.5"}, 3, "grade '1.5' is not one of 0, 1, 2, 3"),
        ({"question_id": "q99"}, 3, "question 'q99' is not a question of the dataset. Fix question_id."),
        ({"document_id": "HEL-0000"}, 3, "document 'HEL-0000' is not in the corpus. Fix document_id."),
        ({"date": "hier"}, 3, "date 'hier': write it in UTC as YYYY-MM-DDTHH:MM:SSZ, or leave it empty."),
    ],
)
def test_a_bad_row_names_the_file_the_line_and_the_fix_and_nothing_is_written(
    project: Path, capsys: pytest.CaptureFixture[str], change: dict[str, str], line: int, message: str
) -> None:
    sheet = project / "graded.csv"
    assert main(["judge", "--export", str(sheet), "--methods", "bm25"]) == 0
    rows = [{**r, "date": ""} for r in _rows(sheet)[:3]]
    rows[0]["grade"] = "1"
    rows[1] = {**rows[1], "grade": "2", **change}
    _write(sheet, rows)
    capsys.readouterr()
    assert main(["judge", "--import", str(sheet)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {sheet}:{line}: {message}") and err.count("\n") == 1
    assert not (project / "data" / "demo" / JUDGMENTS_FILE).exists()


def test_a_pair_graded_twice_and_a_sheet_without_its_columns(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sheet = project / "graded.csv"
    sheet.write_text("question_id,document_id,grade\nq01,HEL-4010,1\nq02,HEL-4010,\nq01,HEL-4010,2\n", encoding="utf-8")
    assert main(["judge", "--import", str(sheet)]) == 2
    assert capsys.readouterr().err == (
        f"error: {sheet}:4: question 'q01', document 'HEL-4010' is graded again (first at line 2). "
        "Keep one row per pair.\n"
    )
    sheet.write_text("question,document,note\nq01,HEL-4010,1\n", encoding="utf-8")
    assert main(["judge", "--import", str(sheet)]) == 2
    assert capsys.readouterr().err == (
        f"error: {sheet}:1: no column question_id, document_id, grade (the header has: question, document, note). "
        "Keep the export's header row: question_id, document_id and grade at least.\n"
    )
    assert main(["judge", "--import", str(project / "nothing.csv")]) == 2
    assert "nothing.csv: no such file." in capsys.readouterr().err
    assert not (project / "data" / "demo" / JUDGMENTS_FILE).exists()


def test_the_judge_command_refuses_what_it_cannot_do_in_one_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["judge", "--depth", "0"]) == 2
    assert (
        capsys.readouterr().err == "error: --depth must be from 1 to 20 (the top of each ranking a run keeps), got 0.\n"
    )
    assert main(["judge", "--record", "--methods", "bm25"]) == 2
    assert capsys.readouterr().err == "error: --record and --holes-only go with --llm: the LLM judge's calls.\n"
    assert main(["judge", "--llm", "--methods", "bm25"]) == 2
    assert capsys.readouterr().err.startswith("error: profile 'local' has no LLM (rerank_provider, rerank_model)")
    assert main(["judge", "--judge", "bad\nname", "--methods", "bm25"]) == 2
    assert "--judge 'bad\\nname': source is 'human:bad\\nname'" in capsys.readouterr().err


SAME = '''
class Same:
    """FIXTURE retriever: bm25's rankings, under a name of its own."""

    name = "same-as-bm25"
    requires = ("bm25",)
    needs_vectors = False

    def rank(self, context):
        return list(context.rankings["bm25"])


def factory(settings):
    return Same()
'''


def test_the_pool_names_the_methods_that_ranked_as_the_report_does(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A method configured by its entry point is pooled under the name it gives itself, as the
    # report and the gate name it, not under "module:factory".
    (project / "same_fixture.py").write_text(SAME)
    sheet = project / "pool.csv"
    assert main(["judge", "--export", str(sheet), "--methods", "bm25,same_fixture:factory"]) == 0
    rows = _rows(sheet)
    assert f"{sheet}: {len(rows)} pair(s) of the top 5 of bm25, same-as-bm25." in capsys.readouterr().err
    assert any("same-as-bm25 #" in r["retrieved_by"] for r in rows)
