"""Wall time of 25 rerank calls with 1 and with 8 workers, against a local fake server.

    python benchmarks/rerank_concurrency.py [--provider gemini|openai] [--latency 0.5]

The server (tests/unit/fake_servers.py) answers every request after a fixed latency
(0.5 s by default), so the figures measure the method's concurrency, not a model.
Its answers are test fixtures. No key is needed: the Gemini path runs through the
real google-genai client with a fixture key set in this process only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
sys.path.insert(0, str(ROOT))

from fake_servers import (  # noqa: E402
    SDK_ENV,
    FakeGeminiServer,
    FakeOpenAIServer,
    gemini_profile,
    openai_profile,
)

from retrieval.data.dataset import Dataset, Document, Question  # noqa: E402
from retrieval.methods.base import Context  # noqa: E402
from retrieval.methods.rerank import RerankMethod  # noqa: E402
from retrieval.providers.base import GenerationProvider  # noqa: E402
from retrieval.providers.gemini import GeminiGenerator  # noqa: E402
from retrieval.providers.http import RetryPolicy  # noqa: E402
from retrieval.providers.openai_chat import OpenAIChat  # noqa: E402
from retrieval.run.ranking import Ranking  # noqa: E402

QUESTIONS = 25  # the seed's question count; also the bound on calls per run
DOCUMENTS = 60
CANDIDATES = 20


def make_context() -> Context:
    """25 questions over 60 documents, each with its own hand-made hybrid ranking."""
    documents = tuple(
        Document(f"doc-{i:02d}", f"Document {i}", f"Body of document {i}. " * 20) for i in range(DOCUMENTS)
    )
    questions = tuple(Question(f"q{i:02d}", f"Question {i}?", "paraphrase", ("doc-00",)) for i in range(QUESTIONS))
    dataset = Dataset("benchmark", documents, questions, "sha256:benchmark")
    scores = 1.0 / (61.0 + np.arange(DOCUMENTS))
    hybrid = [Ranking(np.roll(np.arange(DOCUMENTS), -i), scores) for i in range(QUESTIONS)]
    return Context(dataset=dataset, depth=DOCUMENTS, rankings={"hybrid": hybrid})


def make_generator(provider: str, url: str) -> GenerationProvider:
    # Timeout well above the server's latency: every call must succeed.
    retry = RetryPolicy(attempts=1)
    if provider == "gemini":
        return GeminiGenerator(gemini_profile(url, timeout=10.0), retry=retry)
    return OpenAIChat(openai_profile(url, timeout=10.0), retry=retry)


def main(argv: list[str] | None = None) -> int:
    """Run 25 rerank calls with 1 then 8 workers; print both wall times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=("gemini", "openai"), default="gemini")
    parser.add_argument("--latency", type=float, default=0.5, help="server latency per call (s)")
    args = parser.parse_args(argv)

    # This process only: never send a real key to the fake server, never follow SDK switches.
    for name in (*SDK_ENV, "GOOGLE_API_KEY"):
        os.environ.pop(name, None)
    os.environ["GEMINI_API_KEY"] = "benchmark-fixture-key"

    server_cls = FakeGeminiServer if args.provider == "gemini" else FakeOpenAIServer
    with server_cls(latency=args.latency) as server:
        generator = make_generator(args.provider, server.url)
        results = {}
        for workers in (1, 8):
            context = make_context()
            started = time.perf_counter()
            rankings = RerankMethod(generator, candidates=CANDIDATES, workers=workers).rank(context)
            wall = time.perf_counter() - started
            degraded = sum(r.status != "ok" for r in rankings)
            results[workers] = [list(r.indices) for r in rankings]
            print(
                f"{args.provider}: {QUESTIONS} rerank calls, {workers} worker(s): "
                f"{wall:.2f} s wall ({args.latency:.2f} s server latency, {degraded} degraded)"
            )
        same = results[1] == results[8]
        print(f"same rankings with 1 and 8 workers: {same}")
        close = getattr(generator, "close", None)
        if close:
            close()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
