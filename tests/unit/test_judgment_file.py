"""judgments.jsonl: one judgment per line with its provenance and date, checked line by line,
written sorted and whole under a lock (concurrent writers lose nothing), and the merge rule that
makes one grade per pair from the dataset's own judgments and every source of the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.data.dataset import DatasetError, load_dataset
from retrieval.data.judgment_file import (
    JUDGMENTS_FILE,
    Judgment,
    known_judgments,
    read_judgments,
    render_judgments,
    timestamp,
    update_judgments,
)
from retrieval.data.judgment_merge import LLMCheck, merged_grades, winner

DATE = "2025-06-02T09:14:05Z"


def _line(**fields: object) -> str:
    record = {"question": "q1", "document": "d2", "grade": 2, "source": "human:ana", "date": DATE, **fields}
    return json.dumps({k: v for k, v in record.items() if v is not None})


def _dataset(root: Path, judgments: list[str] | None = None, *, beir: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    docs = [{"id": f"d{i}", "title": f"t{i}", "text": f"texte {i}"} for i in range(1, 6)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    if beir:
        (root / "queries.jsonl").write_text(
            '{"_id": "q1", "text": "un"}\n{"_id": "q2", "text": "deux"}\n{"_id": "q9", "text": "dev"}\n'
        )
        (root / "qrels").mkdir()
        (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td3\t1\n")
    else:
        (root / "questions.jsonl").write_text(
            '{"id": "q1", "text": "un", "type": "a", "relevant": ["d1"]}\n'
            '{"id": "q2", "text": "deux", "type": "b", "relevant": {"d3": 1, "d4": 0}}\n'
        )
    if judgments is not None:
        (root / JUDGMENTS_FILE).write_text("".join(f"{line}\n" for line in judgments), encoding="utf-8")
    return root


def test_a_judgments_file_is_read_line_by_line_with_its_provenance() -> None:
    assert Judgment("q1", "d2", 2, "human:ana", DATE).kind == "human"
    assert Judgment("q1", "d2", 2, "llm:gpt-4o-mini", DATE).name == "gpt-4o-mini"
    assert Judgment("q1", "d2", 0, "import:ratings.csv", DATE).line() == (
        '{"question": "q1", "document": "d2", "grade": 0, "source": "import:ratings.csv", '
        '"date": "2025-06-02T09:14:05Z"}'
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1, 2]", "expected a JSON object, got list. Write one JSON object per line."),
        (_line(grade="2"), "grade is '2': a whole number, 0 (judged not relevant), 1, 2, 3 (write it without quotes)."),
        (_line(grade=1.5), "grade is 1.5: a whole number, 0 (judged not relevant), 1, 2, 3 (write it without quotes)."),
        (
            _line(grade=True),
            "grade is True: a whole number, 0 (judged not relevant), 1, 2, 3 (write it without quotes).",
        ),
        (
            _line(source="ana"),
            "source is 'ana': write who judged as human:<name>, llm:<model> or import:<file> "
            "(a name without line breaks).",
        ),
        (
            _line(source="human:"),
            "source is 'human:': write who judged as human:<name>, llm:<model> or import:<file> "
            "(a name without line breaks).",
        ),
        (_line(date="2025-06-02"), "date is '2025-06-02': write it in UTC as YYYY-MM-DDTHH:MM:SSZ."),
        (
            _line(date="2025-13-02T09:14:05Z"),
            "date is '2025-13-02T09:14:05Z': write it in UTC as YYYY-MM-DDTHH:MM:SSZ.",
        ),
        (_line(question=" q1"), "question is ' q1': give the question's id as a string, without spaces around."),
        (_line(document=7), "document is 7: give the document's id as a string, without spaces around."),
        (_line(note="x"), "unknown field(s) note. A judgment has question, document, grade, source, date."),
        (
            _line(date=None),
            'missing date. Each line is {"question": ID, "document": ID, "grade": N, "source": "human:NAME", '
            '"date": "YYYY-MM-DDTHH:MM:SSZ"}.',
        ),
    ],
)
def test_a_bad_line_names_the_file_the_line_and_the_fix(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / JUDGMENTS_FILE
    path.write_text(_line().replace("d2", "d3") + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        read_judgments(path)
    assert str(caught.value) == f"{path}:3: {message}"


def test_a_source_judges_a_pair_once_and_both_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / JUDGMENTS_FILE
    path.write_text("\n".join([_line(), _line(source="human:bo"), _line(grade=0)]) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        read_judgments(path)
    assert str(caught.value) == (
        f"{path}:3: human:ana judges question 'q1', document 'd2' again (first at line 1). "
        "Keep one line per source and pair: remove one of them."
    )


def test_the_file_is_written_sorted_so_a_judgment_is_one_line_of_the_diff(tmp_path: Path) -> None:
    path, lock = tmp_path / JUDGMENTS_FILE, tmp_path / ".cache" / "judgments.lock"
    judgments = [
        Judgment("q2", "d1", 1, "human:ana", DATE),
        Judgment("q1", "d3", 0, "llm:m", DATE),
        Judgment("q1", "d3", 3, "human:ana", DATE),
        Judgment("q1", "d1", 2, "human:ana", DATE),
    ]
    update_judgments(path, lock, lambda current: current.update({j.key: j for j in judgments}))
    assert read_judgments(path) == sorted(judgments, key=lambda j: j.key)
    before = path.read_text().splitlines()
    changed = Judgment("q1", "d3", 1, "human:ana", "2025-06-03T10:00:00Z")
    assert update_judgments(path, lock, lambda current: current.pop(changed.key).grade) == 3
    update_judgments(path, lock, lambda current: current.update({changed.key: changed}))
    after = path.read_text().splitlines()
    assert [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b] == [1]
    assert render_judgments(read_judgments(path)) == path.read_text()
    # Nothing changed: not written (the file keeps its bytes and its inode).
    inode = path.stat().st_ino
    update_judgments(path, lock, lambda current: None)
    assert path.stat().st_ino == inode


def test_a_damaged_file_is_never_rewritten(tmp_path: Path) -> None:
    path = tmp_path / JUDGMENTS_FILE
    path.write_text(_line() + "\n{not json\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r":2: invalid JSON"):
        update_judgments(path, tmp_path / "lock", lambda current: current.clear())
    assert path.read_text() == _line() + "\n{not json\n"


# Each writer a fresh interpreter importing the judgments file's module alone (a spawned
# multiprocessing child would import pytest and this test module to find its target).
WRITER = """
import sys
from retrieval.data.judgment_file import Judgment, timestamp, update_judgments
path, lock, writer, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for n in range(count):
    judgment = Judgment(f"q{n}", f"d{writer}", n % 4, f"human:writer{writer}", timestamp())

    def add(current, j=judgment):
        current[j.key] = j

    update_judgments(path, lock, add)
"""


def test_concurrent_writers_in_other_processes_lose_no_judgment(tmp_path: Path) -> None:
    path, lock = str(tmp_path / JUDGMENTS_FILE), str(tmp_path / "judgments.lock")
    workers = [subprocess.Popen([sys.executable, "-c", WRITER, path, lock, str(w), "40"]) for w in range(3)]
    try:
        assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0]
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    found = read_judgments(path)
    assert len(found) == 120
    assert {(j.source, j.question) for j in found} == {
        (f"human:writer{w}", f"q{n}") for w in range(3) for n in range(40)
    }


def test_merge_rule_people_over_llm_latest_date_dataset_oldest() -> None:
    own = "import:questions.jsonl"
    dataset = Judgment("q", "d", 1, own)
    early = Judgment("q", "d", 3, "human:ana", "2025-01-01T00:00:00Z")
    late = Judgment("q", "d", 0, "human:bo", "2025-02-01T00:00:00Z")
    sheet = Judgment("q", "d", 2, "import:sheet.csv", "2025-02-01T00:00:00Z")
    llm = Judgment("q", "d", 2, "llm:m", "2026-01-01T00:00:00Z")
    # The latest person wins; the dataset's own judgment is older than any dated line.
    assert winner([dataset, early, late], accept_llm=True) == late
    assert winner([late, dataset, early], accept_llm=True) == late
    assert winner([dataset, early], accept_llm=False) == early
    # Same date: a person's over a file's.
    assert winner([sheet, late], accept_llm=False) == late
    # An LLM never overrules a person, a file or the dataset, however late.
    assert winner([dataset, llm], accept_llm=True) == dataset
    assert winner([sheet, llm], accept_llm=True) == sheet
    # It fills a hole only when accepted; refused, the pair stays unjudged.
    assert winner([llm], accept_llm=True) == llm
    assert winner([llm], accept_llm=False) is None
    assert merged_grades({"d": 1, "e": 2}, {"d": [late], "f": [llm]}, False, own) == ({"d": 0, "e": 2}, set())
    assert merged_grades({"d": 1}, {"d": [llm], "f": [llm]}, True, own) == ({"d": 1, "f": 2}, {"f"})


def test_a_dataset_reads_its_judgments_file_merged_with_its_own(tmp_path: Path) -> None:
    plain = load_dataset(_dataset(tmp_path / "plain"))
    lines = [
        _line(question="q1", document="d2", grade=0),  # a hole judged not relevant
        _line(question="q1", document="d5", grade=3, source="llm:m"),  # an LLM's proposal
        _line(question="q2", document="d4", grade=2, source="import:sheet.csv"),  # overrules the dataset's 0
        _line(question="q2", document="d3", grade=0, source="llm:m"),  # never overrules the dataset
        _line(question="q7", document="d1"),  # no such question
        _line(question="q1", document="gone"),  # no such document (removed from the corpus since)
    ]
    judged = load_dataset(_dataset(tmp_path / "judged", lines))
    q1, q2 = judged.questions
    assert dict(q1.judgments) == {"d1": 1, "d2": 0}
    assert q1.relevant == ("d1",)
    assert dict(q2.judgments) == {"d3": 1, "d4": 2} and q2.relevant == ("d3", "d4")
    assert judged.unused_judgments == 2 and len(judged.judgment_records) == 6
    assert judged.fingerprint != plain.fingerprint
    assert judged.llm_checks == (LLMCheck("q2", "d3", "m", 1, 0),)
    with_llm = load_dataset(tmp_path / "judged", accept_llm=True)
    assert dict(with_llm.questions[0].judgments) == {"d1": 1, "d2": 0, "d5": 3}
    assert with_llm.llm_graded == {("q1", "d5")} and judged.llm_graded == frozenset()
    assert with_llm.questions[0].relevant == ("d1", "d5")
    # LLM lines refused: the fingerprint is the one without them.
    only_llm = load_dataset(_dataset(tmp_path / "llm", [_line(source="llm:m")]))
    assert only_llm.fingerprint == plain.fingerprint
    # Grade 1 for a relevant id already listed: no new information, the same fingerprint.
    same = load_dataset(_dataset(tmp_path / "same", [_line(document="d1", grade=1)]))
    assert same.fingerprint == plain.fingerprint and not same.questions[0].graded


def test_a_judgment_can_take_a_question_out_and_a_bad_file_stops_the_load(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "out", [_line(question="q1", document="d1", grade=0)])
    dataset = load_dataset(root)
    assert [q.id for q in dataset.questions] == ["q2"] and dataset.dropped_questions == 1
    (root / JUDGMENTS_FILE).write_text(_line(grade="x") + "\n")
    with pytest.raises(DatasetError, match=rf"^{root / JUDGMENTS_FILE}:1: grade is 'x'"):
        load_dataset(root)


def test_a_beir_dataset_merges_its_qrels_with_the_file(tmp_path: Path) -> None:
    lines = [
        _line(question="q1", document="d2", grade=1),
        _line(question="q1", document="d1", grade=0, source="human:bo"),
        _line(question="q9", document="d1", grade=2),  # another split's query: not brought in
    ]
    dataset = load_dataset(_dataset(tmp_path / "beir", lines, beir=True))
    assert [q.id for q in dataset.questions] == ["q1", "q2"]
    assert dict(dataset.questions[0].judgments) == {"d1": 0, "d2": 1}
    assert dataset.unused_judgments == 1


def test_timestamps_are_utc_to_the_second() -> None:
    from datetime import datetime, timedelta, timezone

    paris = datetime(2025, 6, 2, 11, 14, 5, 999, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp(paris) == "2025-06-02T09:14:05Z"


def test_a_file_changed_by_anyone_else_is_read_again(tmp_path: Path) -> None:
    path, lock = tmp_path / JUDGMENTS_FILE, tmp_path / "lock"
    first = Judgment("q1", "d1", 1, "human:ana", DATE)
    update_judgments(path, lock, lambda current: current.__setitem__(first.key, first))
    assert list(known_judgments(path).values()) == [first]
    # A hand edit (an editor, a git checkout): same size, other content.
    path.write_text(path.read_text(encoding="utf-8").replace('"grade": 1', '"grade": 3'), encoding="utf-8")
    assert [j.grade for j in known_judgments(path).values()] == [3]
    copy = known_judgments(path)
    copy.clear()  # the caller's copy: what the next reader gets is the file's
    assert len(known_judgments(path)) == 1
    path.unlink()
    assert known_judgments(path) == {}
