"""FIXTURE retrievers built with the real LangChain, LlamaIndex and Haystack libraries over a dataset, on a
deterministic embedding named as a fixture: hashed bag-of-words counts, no model, no network. Its
vectors stand for no model's; they give the frameworks' own stores something to rank by."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import replace
from typing import Any

import numpy as np

# Haystack's PostHog telemetry, read at its import: a background thread's connection in another test's replay.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
from haystack import Document as HaystackDocument
from haystack import Pipeline, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from langchain_core.documents import Document as LangChainDocument
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import TextNode

from retrieval.data.dataset import Dataset

# Haystack copies every vector it is given and every one it returns, a float at a time (the pipeline's
# deep copy of each input, Document.to_dict per document found): at 256 that was half of the module's
# CPU beside the imports. 64 buckets still rank the demo dataset with no tie at any question's top-10 cut.
DIMENSIONS = 64
TOP_K = 10
_WORD = re.compile(r"\w+")


def fixture_embedding(text: str) -> list[float]:
    """FIXTURE vector of a text: its lowercase words counted in DIMENSIONS hashed buckets."""
    return list(_embedded(text))  # a list of its own: the caller may change it


@functools.cache
def _embedded(text: str) -> tuple[float, ...]:
    # Remembered: the three frameworks' stores embed the same few hundred texts (345 of 3,519 calls).
    vector = np.zeros(DIMENSIONS)
    for word in _WORD.findall(text.lower()):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIMENSIONS] += 1.0
    return tuple(vector.tolist()) if vector.any() else (1.0,) + (0.0,) * (DIMENSIONS - 1)


class FixtureLangChainEmbeddings(Embeddings):
    """FIXTURE LangChain embeddings: `fixture_embedding`."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [fixture_embedding(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return fixture_embedding(text)


class FixtureLlamaIndexEmbedding(BaseEmbedding):
    """FIXTURE LlamaIndex embedding: `fixture_embedding`."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return fixture_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return fixture_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return fixture_embedding(text)


def chunks(text: str, parts: int) -> list[str]:
    """A text cut in `parts` pieces of words (a document indexed as chunks)."""
    words = text.split()
    size = max(1, -(-len(words) // parts))
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)] or [text]


def langchain_retriever(dataset: Dataset, parts: int = 1, id_key: str = "id") -> Any:
    """A LangChain InMemoryVectorStore retriever over the dataset's documents (in `parts` chunks each)."""
    store = InMemoryVectorStore(embedding=FixtureLangChainEmbeddings())
    store.add_documents(
        [
            LangChainDocument(page_content=piece, metadata={id_key: d.id, "title": d.title})
            for d in dataset.documents
            for piece in chunks(d.content, parts)
        ]
    )
    return store.as_retriever(search_kwargs={"k": TOP_K})


def langchain_chunked(dataset: Dataset) -> Any:
    """The LangChain retriever over documents indexed in 3 chunks each."""
    return langchain_retriever(dataset, parts=3)


def langchain_without_ids(dataset: Dataset) -> Any:
    """FIXTURE mistake: the documents' ids indexed under `source`, not `id`."""
    return langchain_retriever(dataset, id_key="source")


def llamaindex_retriever(dataset: Dataset) -> Any:
    """A LlamaIndex VectorStoreIndex retriever (its SimpleVectorStore) over the dataset's documents."""
    # The id is metadata the retriever returns, not text it embeds.
    nodes = [
        TextNode(text=d.content, id_=f"node-{d.id}", metadata={"id": d.id}, excluded_embed_metadata_keys=["id"])
        for d in dataset.documents
    ]
    # The nodes are final: the splitter, LlamaIndex's for documents inserted later, is given a tokenizer,
    # or its default loads tiktoken's 100,000-token vocabulary (0.2 s of CPU) to split nothing.
    splitter = SentenceSplitter(tokenizer=str.split)
    index = VectorStoreIndex(nodes=nodes, embed_model=FixtureLlamaIndexEmbedding(), transformations=[splitter])
    return index.as_retriever(similarity_top_k=TOP_K)


@component
class FixtureHaystackTextEmbedder:
    """FIXTURE Haystack text embedder: `fixture_embedding` of its `text` input."""

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        return {"embedding": fixture_embedding(text)}


def _haystack_store(dataset: Dataset, parts: int = 1) -> InMemoryDocumentStore:
    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    if parts == 1:  # each document under its dataset id, Haystack's own `id`
        docs = [HaystackDocument(id=d.id, content=d.content) for d in dataset.documents]
    else:  # chunks, each naming its document as a DocumentSplitter does
        docs = [
            HaystackDocument(content=piece, meta={"source_id": d.id, "split_id": n})
            for d in dataset.documents
            for n, piece in enumerate(chunks(d.content, parts))
        ]
    store.write_documents([replace(doc, embedding=fixture_embedding(doc.content or "")) for doc in docs])
    return store


def haystack_retriever(dataset: Dataset) -> Any:
    """Haystack's InMemoryEmbeddingRetriever as a pipeline: the FIXTURE text embedder, then the retriever."""
    pipeline = Pipeline()
    pipeline.add_component("embedder", FixtureHaystackTextEmbedder())
    pipeline.add_component(
        "retriever", InMemoryEmbeddingRetriever(document_store=_haystack_store(dataset), top_k=TOP_K)
    )
    pipeline.connect("embedder.embedding", "retriever.query_embedding")
    return pipeline


def haystack_chunked(dataset: Dataset) -> Any:
    """The Haystack pipeline over documents stored in 3 chunks each, their id in meta["source_id"]."""
    pipeline = haystack_retriever(dataset)
    pipeline.get_component("retriever").document_store = _haystack_store(dataset, parts=3)
    return pipeline


def haystack_bm25(dataset: Dataset) -> Any:
    """Haystack's InMemoryBM25Retriever as a component, called with run(query=...)."""
    return InMemoryBM25Retriever(document_store=_haystack_store(dataset), top_k=TOP_K)


def haystack_two_outputs(dataset: Dataset) -> Any:
    """A pipeline with two retrievers, both outputting documents: which one is gated must be named."""
    pipeline = haystack_retriever(dataset)
    pipeline.add_component("bm25", haystack_bm25(dataset))
    return pipeline


@component
class FixtureReverser:
    """FIXTURE post-processor: the documents it is given, in reverse order."""

    @component.output_types(documents=list[HaystackDocument])
    def run(self, documents: list[HaystackDocument]) -> dict[str, Any]:
        return {"documents": documents[::-1]}


def haystack_reversed(dataset: Dataset) -> Any:
    """The fixture pipeline with a reverser after its retriever: the retriever is no longer a leaf."""
    pipeline = haystack_retriever(dataset)
    pipeline.add_component("reverser", FixtureReverser())
    pipeline.connect("retriever.documents", "reverser.documents")
    return pipeline
