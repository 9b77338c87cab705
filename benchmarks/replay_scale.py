"""Time to record and to replay a corpus's embedding calls through the cassettes, by corpus size.

    python benchmarks/replay_scale.py                          # 3,000 and 12,000 documents
    python benchmarks/replay_scale.py --documents 50000 --scan # vcrpy's own linear look-up instead of the index

Each corpus is embedded in batches of 32 through the real client (`OpenAIEmbeddings`) and the
real recorder (vcrpy), against the fake OpenAI-compatible server of the unit tests
(tests/unit/fake_embeddings.py, 384 dimensions, base64): its vectors are test fixtures, so the
figures measure recording and replay, not a model. "comparisons" counts the body matcher's calls
during the replay: the look-up's cost, independent of the machine.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
sys.path.insert(0, str(ROOT))

from fake_embeddings import FakeEmbeddingsServer, make_profile  # noqa: E402

from retrieval.evaluation.embeddings import embed_texts  # noqa: E402
from retrieval.providers.openai_embeddings import OpenAIEmbeddings  # noqa: E402
from retrieval.recording import recorder as recording  # noqa: E402

STAGE = "corpus-embeddings"
BATCH = 32
DIMENSIONS = 384


def texts(count: int) -> list[str]:
    """`count` distinct French-like documents of about 100 words (about 700 characters)."""
    words = [
        "serveur",
        "sauvegarde",
        "jeton",
        "erreur",
        "connexion",
        "réseau",
        "utilisateur",
        "données",
        "accès",
        "compte",
    ]
    return [f"Document {n} : " + " ".join(words[(n * 7 + i) % len(words)] for i in range(100)) for n in range(count)]


def measure(count: int, scan: bool) -> dict[str, Any]:
    """Record then replay `count` documents' embeddings; seconds for each, replay comparisons."""
    calls = [0]

    @functools.wraps(recording.same_body)
    def counted(r1: Any, r2: Any, matcher: Any = recording.same_body) -> None:
        calls[0] += 1
        matcher(r1, r2)

    recording.same_body = counted
    if scan:
        recording.index_cassette = lambda cassette: False
    server = FakeEmbeddingsServer(DIMENSIONS)
    corpus = texts(count)
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder) / "cassettes" / "fixture"
        profile = make_profile(server.url, dimensions=DIMENSIONS, batch_size=BATCH)
        try:
            recorder = recording.Recorder("record", directory, "fixture")
            embedder = OpenAIEmbeddings(profile)
            started = time.perf_counter()
            with recorder.stage(STAGE):
                recorded = embed_texts(embedder, corpus, "document")
            recorder.commit({})
            record_seconds = time.perf_counter() - started
            embedder.close()
        finally:
            server.stop()
        calls[0] = 0
        embedder = OpenAIEmbeddings(profile, replay=True)
        started = time.perf_counter()
        with recording.Recorder("replay", directory, "fixture").stage(STAGE):
            replayed = embed_texts(embedder, corpus, "document")
        replay_seconds = time.perf_counter() - started
        embedder.close()
        size = (directory / f"{STAGE}.json").stat().st_size
    assert (replayed == recorded).all(), "the replay gave other vectors than the recording"
    return {"record": record_seconds, "replay": replay_seconds, "comparisons": calls[0], "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[3000, 12000])
    parser.add_argument("--scan", action="store_true", help="vcrpy's linear look-up, without the index")
    args = parser.parse_args()
    if any(not 0 < n <= 200_000 for n in args.documents):
        parser.error("--documents: between 1 and 200000")
    print(f"look-up: {'scan (vcrpy alone)' if args.scan else 'index'}; batches of {BATCH}, {DIMENSIONS} dimensions")
    print("| documents | batches | cassette | record | replay | body comparisons in replay |")
    print("|---:|---:|---:|---:|---:|---:|")
    for count in args.documents:
        figures = measure(count, args.scan)
        batches = -(-count // BATCH)
        print(
            f"| {count:,} | {batches:,} | {figures['bytes'] / 2**20:.1f} MiB | {figures['record']:.2f} s "
            f"| {figures['replay']:.2f} s | {figures['comparisons']:,} |"
        )


if __name__ == "__main__":
    main()
