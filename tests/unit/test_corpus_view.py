"""The report's corpus view gives what the plain dict of every document gave, and the shortcuts
beside it (a loaded corpus's positions made once, single-line texts kept as they are) change nothing."""

from __future__ import annotations

import pickle
import random

from demo_fixture import DEMO_DATA

from retrieval.data.dataset import Document, document_positions, load_dataset
from retrieval.diagnosis.corpus_view import CorpusView, corpus_order
from retrieval.methods.prompts import _one_line


def _plain(documents: list[Document]) -> dict[str, tuple[str, str]]:
    return {d.id: (d.title, d.text) for d in documents}


def test_the_view_is_the_dict_of_every_document_with_its_order() -> None:
    documents = [Document(f"d{i}", f"t{i}", f"text {i}") for i in (3, 1, 2)]
    duplicated = [*documents, Document("d1", "again", "later")]  # a dict keeps the first place, the last value
    for corpus in (documents, duplicated):
        view, plain = CorpusView(corpus), _plain(corpus)
        assert dict(view) == plain and list(view) == list(plain) and len(view) == len(plain)
        assert dict(corpus_order(view)) == corpus_order(plain) == {d: i for i, d in enumerate(plain)}
        assert "d1" in view and "d9" not in view


def test_a_loaded_corpus_makes_its_positions_once_and_pickles_without_them() -> None:
    documents = load_dataset(DEMO_DATA).documents
    positions = document_positions(documents)
    assert document_positions(documents) is positions
    assert dict(positions) == {d.id: i for i, d in enumerate(documents)}
    copy = pickle.loads(pickle.dumps(documents))
    assert "positions" not in copy.__dict__ and dict(document_positions(copy)) == dict(positions)


def test_one_line_equals_the_split_and_join_on_every_kind_of_whitespace() -> None:
    rng = random.Random(3)
    alphabet = [*"ab é", " ", "  ", *"\n\t\r\x0b\x0c\x1c\x85\xa0\u2028\u3000\u200b"]
    texts = ["", " ", "plain words", " lead", "trail ", "two  spaces", "tab\there"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    for text in texts:
        assert _one_line(text) == " ".join(text.split()), repr(text)
