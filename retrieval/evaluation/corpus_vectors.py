"""The corpus's vectors, from the profile's vector store in every mode (retrieval.recording.vector_store).

Replay reads them from the committed store and nothing else; a live run and a recording read
the same stored vectors and embed only the texts the store lacks (a live run through the
`.cache/` store, a recording straight from the provider, appending one segment of the new
vectors), so a figure never differs between live and replay. `vector_precision` rounds the
corpus vectors the same way in every mode. Query-time calls stay in vcrpy cassettes.

Also here: `compact_store` (drop the vectors the corpus no longer uses) and
`convert_corpus_cassette` (an older recording's corpus cassette into the store, same vectors).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.config import EmbeddingSettings, Settings
from retrieval.data.dataset import Dataset
from retrieval.evaluation.embeddings import embed_texts
from retrieval.executors.executor import LOCAL, Executor
from retrieval.files.atomic import replace_files
from retrieval.methods.base import ProgressFactory
from retrieval.providers import credentials
from retrieval.providers.base import EmbeddingProvider, ReplayMissError
from retrieval.recording.cache import EmbeddingCache
from retrieval.recording.cassette_files import STORE_MANIFEST, CassetteError
from retrieval.recording.recorder import Mode, Recorder
from retrieval.recording.vector_store import Space, StoreError, VectorStore

__all__ = [
    "LEGACY_STAGE",
    "compact_store",
    "convert_corpus_cassette",
    "corpus_space",
    "corpus_vectors",
    "recorder_for",
    "store_command",
    "vectors_root",
]

# The corpus cassette of recordings made before the store.
LEGACY_STAGE = "corpus-embeddings"


def vectors_root(settings: Settings) -> Path:
    """The folder of the profiles' vector segments: `vectors`, else "vectors" beside the cassettes folder."""
    return Path(settings.vectors_folder)


def embedding_variant(embedding: EmbeddingSettings) -> str:
    """What else changes a document's vector besides provider, model and dimensions."""
    # Same model name, other server or other prefixes: other vectors. The input limit changes what
    # is embedded: vectors of truncated texts are other vectors.
    # A token limit joins only when set: the vectors of a profile without one keep their space.
    tokens = f"|{embedding.max_input_tokens}" if embedding.max_input_tokens else ""
    return hashlib.sha256(
        f"{embedding.base_url}|{embedding.input_type}|{embedding.document_prefix}|{embedding.max_input_chars}"
        f"|{embedding.long_inputs}{tokens}".encode()
    ).hexdigest()[:8]


def corpus_space(embedder: EmbeddingProvider, embedding: EmbeddingSettings) -> Space:
    """The store space of a profile's corpus vectors."""
    return Space(embedder.provider, embedder.model, embedder.dimensions, "document", embedding_variant(embedding))


def rounded(vectors: np.ndarray, precision: str) -> np.ndarray:
    """Vectors as used at `precision` (float32 arrays holding float16-rounded values for "float16")."""
    if precision == "float32":
        return vectors
    return np.asarray(vectors, np.float32).astype(precision).astype(np.float32)


def _missing_error(recorder: Recorder, store: VectorStore, ids: Sequence[str], texts: Sequence[str]) -> Exception:
    if not store.segments:
        legacy = recorder.path(LEGACY_STAGE)
        if legacy.is_file():
            return CassetteError(
                f"{legacy} holds the corpus vectors in the format before the vector store: convert it with "
                f"`python -m retrieval --convert-corpus-cassette --profile {recorder.profile}` (same vectors, same "
                f"figures) or re-record with `{recorder.record_command}`"
            )
        return CassetteError(
            f"no cassette {recorder.directory / STORE_MANIFEST} (the corpus vectors' manifest): record it with "
            f"`{recorder.record_command}`"
        )
    listed = "; ".join(f"{i} «{' '.join(t.split())[:60]}»" for i, t in zip(ids[:5], texts[:5], strict=False))
    more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    return ReplayMissError(
        f"no stored vector in {recorder.directory / STORE_MANIFEST} for {len(ids)} document(s) new or changed "
        f"since it was recorded: {listed}{more}",
        "replay miss",
    )


def corpus_vectors(
    embedder: EmbeddingProvider,
    ids: Sequence[str],
    documents: Sequence[str],
    settings: Settings,
    mode: Mode,
    recorder: Recorder,
    cache: EmbeddingCache | None,
    progress: ProgressFactory | None = None,
    executor: Executor = LOCAL,
) -> np.ndarray:
    """The corpus's vectors (float32, rounded to `settings.vector_precision`), one row per document.

    The texts the store lacks are embedded through `executor.corpus_embeddings` (in this process,
    or on a Ray cluster); the store's segment is written here, by this process, once they all are.
    """
    precision = settings.vector_precision
    space = corpus_space(embedder, settings.profile.embeddings)
    store = recorder.committed_store()
    try:
        vectors, found = store.lookup(space, documents, precision)
    except StoreError as exc:  # a segment missing, damaged or a Git LFS pointer
        raise CassetteError(str(exc)) from exc
    if found.any():
        recorder.used.add(STORE_MANIFEST)
    missing = [int(i) for i in np.flatnonzero(~found)]
    if mode == "replay":
        if len(missing):
            raise _missing_error(recorder, store, [ids[i] for i in missing], [documents[i] for i in missing])
        return np.asarray(vectors)
    if not len(missing):
        if mode == "record":
            recorder.stage_vectors(store, [])
        return np.asarray(vectors)
    texts = [documents[i] for i in missing]
    with executor.corpus_embeddings(embedder, settings.profile) as provider:
        new = embed_texts(provider, texts, "document", cache if mode == "live" else None, progress)
        if cache is not None and mode == "record":
            cache.store(texts, new)
            cache.save()
        if found.any() and new.shape[1] != vectors.shape[1]:
            # The server changed its vector size (a profile without `dimensions`): stored vectors
            # cannot be mixed with the new ones; everything is embedded again, at the new size.
            missing, texts = list(range(len(documents))), list(documents)
            new = embed_texts(provider, texts, "document", None, progress)
    if mode == "record":
        try:
            store.add(store.write_segment(space, texts, new, precision))
        except StoreError as exc:  # a full disk, a read-only folder: nothing of the segment is left
            raise CassetteError(f"{exc}. The recording was discarded; the committed files are as they were.") from exc
        recorder.stage_vectors(store, store.written)
    out = np.zeros((len(documents), new.shape[1]), np.float32)
    if len(missing) < len(documents):
        out[:] = vectors
    out[missing] = rounded(new, precision)
    return out


def compact_store(recorder: Recorder, space: Space, documents: Sequence[str]) -> tuple[int, int]:
    """Keep only the vectors of `documents` in `space` (one new segment), commit the manifest and
    remove the segment files it no longer lists. Returns the store's bytes before and after."""
    store = recorder.committed_store()
    before = store.nbytes() if store.segments else 0
    compacted = store.compacted({space: documents})
    replace_files(recorder.directory, {STORE_MANIFEST: compacted.manifest_bytes()})
    for path in compacted.unreferenced():
        path.unlink(missing_ok=True)
    return before, compacted.nbytes()


def convert_corpus_cassette(
    recorder: Recorder, embedder: EmbeddingProvider, settings: Settings, documents: Sequence[str]
) -> Path:
    """Replay an older recording's corpus cassette through the profile's own embedder and keep its
    vectors in the store (float32: exactly the vectors the cassette replayed), removing the cassette
    from the set in the same commit. Returns the new manifest's path."""
    legacy = recorder.path(LEGACY_STAGE)
    if not legacy.is_file():
        raise CassetteError(f"no {legacy} to convert")
    replaying = Recorder("replay", recorder.directory, recorder.profile)
    with replaying.stage(LEGACY_STAGE):
        vectors = embed_texts(embedder, documents, "document")
    store = recorder.committed_store()
    space = corpus_space(embedder, settings.profile.embeddings)
    store.add(store.write_segment(space, documents, vectors, "float32"))
    files = {p.name: p.read_bytes() for p in recorder.directory.iterdir() if p.is_file() and p.name != legacy.name}
    files[STORE_MANIFEST] = store.manifest_bytes()
    replace_files(recorder.directory, files, keep=False)
    return recorder.directory / STORE_MANIFEST


def store_command(settings: Settings, dataset: Dataset, action: str) -> str:
    """`python -m retrieval --compact-store` / `--convert-corpus-cassette` on the profile's store:
    what was done, in one line."""
    from retrieval.providers import make_embedder
    from retrieval.recording.network import closed_network

    recorder = recorder_for(settings, "replay")
    documents = [d.content for d in dataset.documents]
    embedder = make_embedder(settings.profile, replay=True)
    try:
        recorder.hold()  # no recording writes segments while the store is rewritten
        recorder.recover()
        if action == "convert":
            with closed_network():
                manifest = convert_corpus_cassette(recorder, embedder, settings, documents)
            return f"{recorder.path(LEGACY_STAGE)} converted: {len(documents)} vectors, manifest {manifest}"
        before, after = compact_store(recorder, corpus_space(embedder, settings.profile.embeddings), documents)
        return f"{recorder.directory / STORE_MANIFEST}: compacted, {before} -> {after} bytes"
    except StoreError as exc:  # a damaged or missing segment: one line, as a replay says it
        raise CassetteError(str(exc)) from exc
    except OSError as exc:
        raise CassetteError(
            f"{recorder.directory}: the store could not be rewritten ({exc.strerror or exc}); free space or make the "
            "folder writable, then run again. The committed files are as they were."
        ) from exc
    finally:
        recorder.discard()
        if hasattr(embedder, "close"):
            embedder.close()


def recorder_for(settings: Settings, mode: Mode, baseline_ref: str | None = None) -> Recorder:
    """The profile's cassettes, with what its providers declare about their credentials;
    `baseline_ref`: the git ref whose gate they must be recorded with (`Recorder.baseline_ref`)."""
    profile = settings.profile
    declared = credentials(profile)
    return Recorder(
        mode,
        Path(settings.cassettes) / profile.name,
        profile.name,
        declared.key_variables,
        declared.needed,
        vectors=vectors_root(settings) / profile.name,
        lock=Path(settings.cache) / f"recording-{profile.name}.lock",
        baseline_ref=baseline_ref,
    )
