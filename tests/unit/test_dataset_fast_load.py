"""load_dataset's fast paths give what the checked path gives: the same documents, the same
fingerprints (byte for byte those of the previous implementation, json.dumps per document),
the same errors."""

from __future__ import annotations

import hashlib
import json
import pickle
import random
from pathlib import Path
from typing import Any

import pytest

from retrieval.data.dataset import Dataset, DatasetError, Document, Question, corpus_fingerprint, load_dataset

# Characters that json.dumps escapes (quote, backslash, control characters) or writes as they
# are (accents, DEL, astral code points), so that every branch of the encoder is hit. (U+2028
# would end a line of corpus.jsonl for str.splitlines: it is in the documents built by hand.)
_ALPHABET = [*"abcdefghij éèàçœ'-_ ", '"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "😀", "€"]


def _old_fingerprint(documents: Any, questions: list[Question]) -> str:
    """The fingerprint as computed before the block hashing (commit b3f98c7), verbatim."""
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(json.dumps([doc.id, doc.title, doc.text], ensure_ascii=False).encode())
    digest.update(b"\x00questions\x00")
    for q in questions:
        digest.update(json.dumps([q.id, q.text, q.type, list(q.relevant)], ensure_ascii=False).encode())
    return "sha256:" + digest.hexdigest()[:16]


def _old_corpus_fingerprint(documents: Any) -> str:
    digest = hashlib.sha256()
    for doc in sorted(documents, key=lambda d: d.id):
        digest.update(json.dumps([doc.id, doc.title, doc.text], ensure_ascii=False).encode())
    return "sha256:" + digest.hexdigest()[:16]


def _text(rng: random.Random, size: int) -> str:
    return "".join(rng.choices(_ALPHABET, k=size))  # a third of the cost of a choice per character


def _write_corpus(folder: Path, n: int, seed: int, *, escape_surrogates: bool = False) -> None:
    """A corpus of `n` documents with random text (crossing several hashing blocks) and 3 questions."""
    rng = random.Random(seed)
    folder.mkdir()
    lines = []
    for i in range(n):
        record: dict[str, Any] = {"id": f"d{i:05d}", "text": "x" + _text(rng, rng.randint(0, 40))}
        if i % 3:
            record["title"] = _text(rng, rng.randint(0, 8))
        if i % 7 == 0:
            record["metadata"] = {"k": i}
        lines.append(json.dumps(record, ensure_ascii=escape_surrogates))
    rng.shuffle(lines)
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    questions = [{"id": f"q{j}", "text": f"question {j}", "type": "t", "relevant": [f"d{j:05d}"]} for j in range(3)]
    (folder / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8")


def test_fingerprints_equal_the_previous_implementation(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "data", 9_000, seed=1)
    dataset = load_dataset(tmp_path / "data")
    assert len(dataset.documents) == 9_000
    assert dataset.fingerprint == _old_fingerprint(dataset.documents, list(dataset.questions))
    expected = _old_corpus_fingerprint(dataset.documents)
    assert corpus_fingerprint(dataset.documents) == expected
    assert corpus_fingerprint(reversed(dataset.documents)) == expected


def test_fingerprints_of_a_mostly_plain_corpus_equal_the_previous_implementation(tmp_path: Path) -> None:
    # Lines without a backslash are hashed in runs (no check per document), the others one by one:
    # a few escaped documents among plain ones, at a run's start and end and across hashing blocks.
    rng = random.Random(5)
    folder = tmp_path / "data"
    folder.mkdir()
    lines = []
    for i in range(9_000):
        text = "".join(rng.choices("abcdefghij éèàçœ'-_€😀", k=rng.randint(1, 40)))
        if i % 97 == 0 or i in (1, 8_999):
            text += rng.choice(['"', "\\", "\n", "\t", "\x00", "\x1f"])
        lines.append(json.dumps({"id": f"d{i:05d}", "text": "x" + text, "title": "t" * (i % 2)}, ensure_ascii=False))
    rng.shuffle(lines)
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    question = {"id": "q", "text": "a", "type": "t", "relevant": ["d00001"]}
    (folder / "questions.jsonl").write_text(json.dumps(question) + "\n", encoding="utf-8")
    dataset = load_dataset(folder)
    assert dataset.fingerprint == _old_fingerprint(dataset.documents, list(dataset.questions))
    assert dataset.documents.corpus_fingerprint == _old_corpus_fingerprint(dataset.documents)  # type: ignore[attr-defined]


def test_corpus_fingerprint_of_documents_built_by_hand() -> None:
    # Not strings (a caller's own Document): written as json.dumps writes them, as before.
    documents = [Document("7", 7, "seven"), Document("a", "T", 'say "hi"\n\u2028'), Document("b", None, 1.5)]  # type: ignore[arg-type]
    assert corpus_fingerprint(documents) == _old_corpus_fingerprint(documents)
    dataset = Dataset("x", tuple(documents), (), "")
    assert corpus_fingerprint(dataset.documents) == _old_corpus_fingerprint(documents)


def test_escaped_file_takes_the_checked_path_with_the_same_result(tmp_path: Path) -> None:
    # ensure_ascii=True writes "😀" as the escaped pair \ud83d\ude00: the file may hold a lone
    # surrogate, so every field is checked; the dataset is the same as the plain file's.
    _write_corpus(tmp_path / "plain", 500, seed=2)
    _write_corpus(tmp_path / "escaped", 500, seed=2, escape_surrogates=True)
    assert "\\ud83d" in (tmp_path / "escaped" / "corpus.jsonl").read_text(encoding="utf-8")
    plain, escaped = load_dataset(tmp_path / "plain"), load_dataset(tmp_path / "escaped")
    assert plain.documents == escaped.documents
    assert [d.metadata for d in plain.documents] == [d.metadata for d in escaped.documents]
    assert plain.fingerprint == escaped.fingerprint


def _corpus_lines(folder: Path, *lines: str) -> None:
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    question = {"id": "q", "text": "t", "type": "t", "relevant": ["a"]}
    (folder / "questions.jsonl").write_text(json.dumps(question) + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (
            '{"id": "a", "text": "again"}',
            'corpus.jsonl:2: duplicate document id "a" (first at line 1). Ids must be unique.',
        ),
        ('{"id": " ", "text": "t"}', 'corpus.jsonl:2: empty "id". Give every document a unique id.'),
        ('{"id": "b", "text": "  "}', 'corpus.jsonl:2: document "b" has an empty "text". Fill it or remove the line.'),
        ('{"id": "b", "text": "t", "metadata": [1]}', 'corpus.jsonl:2: "metadata" must be an object.'),
        ('{"id": "b", "text": "t", "title": true}', 'corpus.jsonl:2: field "title" must be a string. Quote the value.'),
        ('{"id": "b", "text": "t"} x', "corpus.jsonl:2: invalid JSON (Extra data at column 26)."),
        (' {"id": "b", "text": "t"}\xa0', "corpus.jsonl:2: invalid JSON (Extra data at column 26)."),
        ('{"id": "b", "text": "t\\ud800"}', 'corpus.jsonl:2: field "text" holds a lone surrogate'),
        ("[1]", "corpus.jsonl:2: expected a JSON object, got list."),
    ],
)
def test_errors_of_records_the_fast_path_refuses(tmp_path: Path, second: str, message: str) -> None:
    _corpus_lines(tmp_path / "data", '{"id": "a", "text": "first"}', second)
    with pytest.raises(DatasetError) as caught:
        load_dataset(tmp_path / "data")
    assert message in str(caught.value)


def test_records_the_fast_path_leaves_to_the_checks_still_load(tmp_path: Path) -> None:
    # Whitespace around the object, an int id, "_id": the checked path, same documents as before.
    _corpus_lines(
        tmp_path / "data",
        '  {"id": "a", "text": "first"}  ',
        '{"id": 12, "text": "int id", "title": 3}',
        '{"_id": " c ", "text": "beir", "metadata": null}',
    )
    dataset = load_dataset(tmp_path / "data")
    assert dataset.documents == (Document("12", "3", "int id"), Document("a", "", "first"), Document("c", "", "beir"))
    assert dataset.fingerprint == _old_fingerprint(dataset.documents, list(dataset.questions))


def test_carried_corpus_fingerprint_survives_pickling_and_is_dropped_by_a_slice(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "data", 300, seed=6)
    documents = load_dataset(tmp_path / "data").documents
    expected = _old_corpus_fingerprint(documents)
    assert corpus_fingerprint(documents) == expected
    copied = pickle.loads(pickle.dumps(documents))
    assert copied == documents and corpus_fingerprint(copied) == expected
    # Another corpus made from it is hashed afresh, never given the loaded corpus's digest.
    assert corpus_fingerprint(documents[:-1]) == _old_corpus_fingerprint(documents[:-1]) != expected
