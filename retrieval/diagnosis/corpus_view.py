"""A corpus as the sweeps and diagnoses read it: document id -> (title, text), in corpus order.

The report's sweeps and diagnoses read the few documents of the questions' top candidates, of a
corpus that may hold a million: a view over the documents, without a tuple per document."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from retrieval.data.dataset import document_positions

__all__ = ["CorpusView", "corpus_order"]


class CorpusView(Mapping[str, tuple[str, str]]):
    """`{d.id: (d.title, d.text) for d in documents}`, read on look-up; `order` is each id's index
    in that mapping's order, as `corpus_order` gives it (retrieval.data.dataset.document_positions)."""

    def __init__(self, documents: Sequence[Any]) -> None:
        self._documents = documents
        # id -> the index of its (last) document, as the dict's value is the last one's.
        self._at = document_positions(documents)
        unique = len(self._at) == len(documents)
        self.order: Mapping[str, int] = self._at if unique else {d: i for i, d in enumerate(self._at)}

    def __getitem__(self, doc_id: str) -> tuple[str, str]:
        document = self._documents[self._at[doc_id]]
        return document.title, document.text

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._at


def corpus_order(documents: Mapping[str, Any]) -> Mapping[str, int]:
    """Document id -> its index in `documents`' order (the order that breaks fusion ties)."""
    if isinstance(documents, CorpusView):
        return documents.order
    return {d: i for i, d in enumerate(documents)}
