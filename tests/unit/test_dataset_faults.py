"""Damaged or ambiguous datasets: one line naming the file, the line and the fix; ids read the
same everywhere; queries the qrels leave without a relevant document are counted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from retrieval.data.dataset import DatasetError, load_dataset

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = [{"_id": "d1", "text": "restaurer une sauvegarde"}, {"_id": "d2", "text": "vider le cache"}]


def _native(tmp_path: Path, questions: list[dict], corpus: list[dict] = CORPUS) -> Path:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus))
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
    return tmp_path


def _beir(tmp_path: Path, qrels: bytes) -> Path:
    root = tmp_path / "beir"
    shutil.copytree(FIXTURES / "fixture_beir", root)
    (root / "qrels" / "test.tsv").write_bytes(qrels)
    return root


def _error(root: Path) -> str:
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    return str(caught.value)


def test_a_bom_in_the_qrels_is_ignored(tmp_path: Path) -> None:
    root = _beir(tmp_path, "\ufeffquery-id\tcorpus-id\tscore\nb1\td1\t1\nb2\td2\t2\n".encode())
    assert [q.id for q in load_dataset(root).questions] == ["b1", "b2"]


def test_latin1_qrels_are_named(tmp_path: Path) -> None:
    root = _beir(tmp_path, "query-id\tcorpus-id\tscore\nb1\td1\t1\nb2\td2\t2 \xe9\n".encode("latin-1"))
    path = root / "qrels" / "test.tsv"
    assert _error(root) == f"{path}:3: not UTF-8 (invalid continuation byte at byte 41). Re-save the file as UTF-8."


@pytest.mark.parametrize("score", ["nan", "inf", "-inf", "NaN"])
def test_non_finite_scores_are_refused(tmp_path: Path, score: str) -> None:
    root = _beir(tmp_path, f"query-id\tcorpus-id\tscore\nb1\td1\t1\nb2\td2\t{score}\n".encode())
    assert _error(root) == (
        f'{root / "qrels" / "test.tsv"}:3: score "{score}" is not a finite number. '
        "Use 0 (not relevant) or a positive grade."
    )


def test_queries_judged_only_with_score_zero_are_counted(tmp_path: Path) -> None:
    root = _beir(tmp_path, b"query-id\tcorpus-id\tscore\nb1\td1\t1\nb2\td2\t0\nb3\td1\t0\n")
    dataset = load_dataset(root)
    assert [q.id for q in dataset.questions] == ["b1"]
    assert dataset.dropped_questions == 2


def test_the_fixture_beir_folder_drops_nothing() -> None:
    assert load_dataset(FIXTURES / "fixture_beir").dropped_questions == 0


def test_relevant_ids_are_stripped_like_corpus_ids(tmp_path: Path) -> None:
    corpus = [{"_id": " d1 ", "text": "restaurer"}, {"_id": "d2", "text": "vider"}]
    root = _native(tmp_path, [{"id": "q1", "text": "restaurer ?", "type": "t", "relevant": ["d1 ", "\td2"]}], corpus)
    assert load_dataset(root).questions[0].relevant == ("d1", "d2")


def test_an_empty_relevant_id_is_refused(tmp_path: Path) -> None:
    root = _native(tmp_path, [{"id": "q1", "text": "restaurer ?", "type": "t", "relevant": ["d1", " "]}])
    assert _error(root) == (
        f'{root / "questions.jsonl"}:1: an empty id in "relevant". Remove it or give the document id.'
    )


@pytest.mark.parametrize("qtype", ["", "  "])
def test_an_empty_type_is_refused(tmp_path: Path, qtype: str) -> None:
    root = _native(tmp_path, [{"id": "q1", "text": "restaurer ?", "type": qtype, "relevant": ["d1"]}])
    assert _error(root) == (
        f'{root / "questions.jsonl"}:1: empty "type". Give the question a type (a report column), e.g. "paraphrase".'
    )


def test_an_empty_beir_type_is_refused(tmp_path: Path) -> None:
    root = _beir(tmp_path, b"query-id\tcorpus-id\tscore\nb1\td1\t1\n")
    (root / "queries.jsonl").write_text('{"_id": "b1", "text": "restaurer", "metadata": {"type": " "}}\n')
    assert _error(root) == (
        f'{root / "queries.jsonl"}:1: empty "type". Give the question a type (a report column), e.g. "paraphrase".'
    )


def test_a_lone_surrogate_is_named_not_a_fingerprint_crash(tmp_path: Path) -> None:
    _native(tmp_path, [{"id": "q1", "text": "restaurer ?", "type": "t", "relevant": ["d1"]}])
    (tmp_path / "corpus.jsonl").write_text(
        '{"_id": "d1", "text": "restaurer"}\n{"_id": "d2", "text": "vider \\ud800 le cache"}\n'
    )
    assert _error(tmp_path) == (
        f"{tmp_path / 'corpus.jsonl'}:2: field \"text\" holds a lone surrogate ('\\ud800' at character 6), "
        "which is not text. Fix the \\u escape."
    )


def test_a_bom_in_the_corpus_is_ignored(tmp_path: Path) -> None:
    root = _native(tmp_path, [{"id": "q1", "text": "restaurer ?", "type": "t", "relevant": ["d1"]}])
    (root / "corpus.jsonl").write_bytes(b"\xef\xbb\xbf" + (root / "corpus.jsonl").read_bytes())
    assert load_dataset(root).doc_ids == ["d1", "d2"]


@pytest.mark.parametrize(
    "header", ["query-id \tcorpus-id\tscore", " query-id\tcorpus-id\tscore ", "Query-Id\tcorpus-id\tscore"]
)
def test_a_qrels_header_with_spaces_is_the_header(tmp_path: Path, header: str) -> None:
    root = _beir(tmp_path, f"{header}\nb1\td1\t1\nb2\td2\t2\n".encode())
    assert [q.id for q in load_dataset(root).questions] == ["b1", "b2"]


def test_an_unknown_qrels_header_is_named_as_a_header(tmp_path: Path) -> None:
    root = _beir(tmp_path, b"query\tdoc\tscore\nb1\td1\t1\n")
    assert _error(root) == (
        f"{root / 'qrels' / 'test.tsv'}:1: the first line is neither a judgment nor the header: write the header "
        "query-id<TAB>corpus-id<TAB>score, got 'query\\tdoc\\tscore'."
    )
