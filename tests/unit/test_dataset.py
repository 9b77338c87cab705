"""Dataset loading (native and BEIR), validation errors that say where and how, fingerprint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from demo_fixture import DEMO_DATA

from retrieval.data.dataset import DatasetError, load_dataset

FIXTURES = Path(__file__).parent / "fixtures"
NATIVE = FIXTURES / "fixture_native"
BEIR = FIXTURES / "fixture_beir"


def _copy(fixture: Path, tmp_path: Path, name: str = "data") -> Path:
    target = tmp_path / name
    shutil.copytree(fixture, target)
    return target


def _replace_line(path: Path, number: int, content: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[number - 1] = content
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _edit_record(path: Path, number: int, **changes: object) -> None:
    """Rewrite line `number` of a JSONL file with some fields changed (None removes one)."""
    record = json.loads(path.read_text(encoding="utf-8").splitlines()[number - 1])
    for key, value in changes.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value
    _replace_line(path, number, json.dumps(record, ensure_ascii=False))


# --- valid datasets --------------------------------------------------------------------------


def test_load_native_fixture() -> None:
    dataset = load_dataset(NATIVE)
    assert dataset.name == "fixture_native"
    # Sorted by id, not in file order (HEL-4040, proc-restauration, proc-diagnostic, faq-masquage).
    assert dataset.doc_ids == ["HEL-4040", "faq-masquage", "proc-diagnostic", "proc-restauration"]
    assert [q.id for q in dataset.questions] == ["q1", "q2", "q3"]
    assert dataset.question_types == ["identifiant", "paraphrase", "mixte"]
    q3 = dataset.questions[2]
    assert q3.relevant == ("proc-diagnostic", "proc-restauration")
    assert q3.type == "mixte"
    doc = dataset.documents[0]
    assert doc.title == "HEL-4040 : fichier d'import invalide"
    assert doc.metadata == {"kind": "error"}
    assert doc.content == f"{doc.title}\n{doc.text}"
    assert dataset.fingerprint.startswith("sha256:")


def test_load_beir_fixture() -> None:
    dataset = load_dataset(BEIR)
    assert dataset.doc_ids == ["d1", "d2", "d3"]
    # b3 has no judgement in test.tsv; score-0 lines (b2 -> d3, b1 -> an unknown id) are ignored.
    assert [(q.id, q.relevant) for q in dataset.questions] == [("b1", ("d1",)), ("b2", ("d2",))]
    assert {q.type for q in dataset.questions} == {"all"}
    assert dataset.questions[0].text == "comment restaurer une sauvegarde"
    assert dataset.documents[1].content == dataset.documents[1].text  # empty title


def test_beir_without_header_line(tmp_path: Path) -> None:
    root = _copy(BEIR, tmp_path)
    qrels = root / "qrels" / "test.tsv"
    qrels.write_text("\n".join(qrels.read_text().splitlines()[1:]) + "\n")
    assert [q.id for q in load_dataset(root).questions] == ["b1", "b2"]


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    root = _copy(NATIVE, tmp_path)
    path = root / "questions.jsonl"
    path.write_text(path.read_text().replace("\n", "\n\n"))
    assert len(load_dataset(root).questions) == 3


# --- validation errors: file, line, fix --------------------------------------------------------

NATIVE_ERRORS = [
    # (file, line 3 becomes..., what the message must say, the hint it must give)
    pytest.param(
        "corpus.jsonl",
        '{"id": "proc-diagnostic", "title": "Lancer un diagnostic", "text": "no closing brace"',
        "invalid JSON",
        "Each line must be one JSON object",
        id="bad-json",
    ),
    pytest.param(
        "questions.jsonl",
        {"text": None},
        'missing field "text"',
        'Add "text"',
        id="missing-field-question-text",
    ),
    pytest.param(
        "corpus.jsonl",
        {"text": None},
        'missing field "text"',
        'Add "text"',
        id="missing-field-document-text",
    ),
    pytest.param(
        "questions.jsonl",
        {"relevant": None},
        'missing field "relevant"',
        'Add "relevant"',
        id="missing-field-relevant",
    ),
    pytest.param(
        "corpus.jsonl",
        {"id": "HEL-4040"},
        'duplicate document id "HEL-4040" (first at line 1)',
        "must be unique",
        id="duplicate-doc-id",
    ),
    pytest.param(
        "questions.jsonl",
        {"id": "q1"},
        'duplicate question id "q1" (first at line 1)',
        "must be unique",
        id="duplicate-question-id",
    ),
    pytest.param(
        "questions.jsonl",
        {"relevant": ["proc-diagnostic", "proc-inexistante"]},
        '"proc-inexistante", which is not in corpus.jsonl',
        "Fix the id or add the document",
        id="relevant-absent-from-corpus",
    ),
    pytest.param(
        "questions.jsonl",
        {"relevant": []},
        'question "q3" has no relevant document',
        "List at least one document id",
        id="no-relevant-doc",
    ),
    pytest.param(
        "corpus.jsonl",
        {"text": "   "},
        "empty",
        "Fill it or remove the line",
        id="empty-document-text",
    ),
]


@pytest.mark.parametrize(("filename", "line3", "problem", "hint"), NATIVE_ERRORS)
def test_invalid_native_dataset(
    tmp_path: Path, filename: str, line3: str | dict[str, object], problem: str, hint: str
) -> None:
    root = _copy(NATIVE, tmp_path)
    path = root / filename
    if isinstance(line3, str):
        _replace_line(path, 3, line3)
    else:
        _edit_record(path, 3, **line3)
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    message = str(caught.value)
    assert f"{path}:3:" in message
    assert problem in message
    assert hint in message


def test_empty_question_text_names_file_and_line(tmp_path: Path) -> None:
    root = _copy(NATIVE, tmp_path)
    path = root / "questions.jsonl"
    _edit_record(path, 3, text=" ")
    with pytest.raises(DatasetError, match='question "q3" has an empty "text"') as caught:
        load_dataset(root)
    assert f"{path}:3:" in str(caught.value)


def test_beir_relevant_absent_from_corpus(tmp_path: Path) -> None:
    root = _copy(BEIR, tmp_path)
    qrels = root / "qrels" / "test.tsv"
    _replace_line(qrels, 3, "b2\tghost\t1")
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    assert f"{qrels}:3:" in str(caught.value)
    assert '"ghost"' in str(caught.value)
    assert "Fix the id or add the document" in str(caught.value)


def test_beir_bad_json_in_queries(tmp_path: Path) -> None:
    root = _copy(BEIR, tmp_path)
    queries = root / "queries.jsonl"
    _replace_line(queries, 3, "{'_id': 'b3'}")
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    assert f"{queries}:3:" in str(caught.value)
    assert "invalid JSON" in str(caught.value)


def test_missing_questions_file_is_explained(tmp_path: Path) -> None:
    root = _copy(NATIVE, tmp_path)
    (root / "questions.jsonl").unlink()
    with pytest.raises(DatasetError, match=r"questions\.jsonl"):
        load_dataset(root)


# --- fingerprint ------------------------------------------------------------------------------


def test_fingerprint_is_stable(tmp_path: Path) -> None:
    original = load_dataset(NATIVE).fingerprint
    assert load_dataset(NATIVE).fingerprint == original
    # Another folder, another JSON layout (key order, spacing), blank lines: same content.
    root = _copy(NATIVE, tmp_path, "elsewhere")
    for name in ("corpus.jsonl", "questions.jsonl"):
        path = root / name
        records = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text(
            "\n\n".join(json.dumps(dict(reversed(r.items())), indent=None, separators=(" ,", " : ")) for r in records)
        )
    assert load_dataset(root).fingerprint == original


def test_fingerprint_changes_with_one_question_text(tmp_path: Path) -> None:
    root = _copy(NATIVE, tmp_path)
    original = load_dataset(root).fingerprint
    _edit_record(root / "questions.jsonl", 2, text="Comment revenir à l'état d'avant-hier ?")
    assert load_dataset(root).fingerprint != original


def test_fingerprint_changes_with_one_document(tmp_path: Path) -> None:
    root = _copy(NATIVE, tmp_path)
    original = load_dataset(root).fingerprint
    _edit_record(root / "corpus.jsonl", 4, text="Activez le masquage dans les paramètres.")
    changed = load_dataset(root).fingerprint
    assert changed != original
    _edit_record(root / "corpus.jsonl", 4, title="Masquer les numéros de sécu")
    assert load_dataset(root).fingerprint not in {original, changed}


def test_fingerprint_changes_with_relevant_ids(tmp_path: Path) -> None:
    root = _copy(NATIVE, tmp_path)
    original = load_dataset(root).fingerprint
    _edit_record(root / "questions.jsonl", 2, relevant=["proc-restauration", "proc-diagnostic"])
    assert load_dataset(root).fingerprint != original


# --- corpus order ------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", [NATIVE, BEIR], ids=["native", "beir"])
def test_reversed_corpus_file_loads_the_same_dataset(fixture: Path, tmp_path: Path) -> None:
    original = load_dataset(fixture)
    root = _copy(fixture, tmp_path)
    corpus = root / "corpus.jsonl"
    corpus.write_text("\n".join(reversed(corpus.read_text(encoding="utf-8").splitlines())) + "\n", encoding="utf-8")
    reversed_file = load_dataset(root)
    assert reversed_file.doc_ids == sorted(original.doc_ids) == original.doc_ids
    assert reversed_file.documents == original.documents
    assert reversed_file.fingerprint == original.fingerprint


def test_demo_fingerprint_is_that_of_the_sorted_corpus() -> None:
    # The committed baseline and cassettes name this fingerprint; it changed from
    # sha256:e11a1485dfedd5aa when the corpus started being sorted by id at load time.
    demo = load_dataset(DEMO_DATA)
    assert demo.fingerprint == "sha256:1ff97372b5e530b4"
    assert demo.doc_ids[:3] == ["HEL-4010", "HEL-4020", "HEL-4030"]
    assert demo.doc_ids[-1] == "proc-webhooks"
