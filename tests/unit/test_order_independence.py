"""Figures do not depend on the order of the corpus file: reversed or shuffled, the same
rankings, scores and figures for every method, byte for byte.

Two kinds of data: the demo (bm25, and vector + hybrid replayed from the demo fixture's local
cassettes, which a shuffled file still matches because the corpus is sorted at load time),
and FIXTURE datasets built here with many exact ties (duplicated documents, a five-word
vocabulary), embedded by the fake embeddings server (a FIXTURE: its vectors collide often,
so vector and hybrid tie a lot too), recorded once in file order and replayed for every
other order.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from demo_fixture import DEMO_DATA, demo_dataset, demo_settings
from fake_embeddings import FakeEmbeddingsServer, make_profile

from retrieval.config import Settings
from retrieval.data.dataset import load_dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.measures.metrics import score_run
from retrieval.run.results import Run, run_log

WORDS = ["sauvegarde", "jeton", "export", "agent", "quota"]


def _rows_and_figures(run: Run) -> str:
    """The run log's per-question lines (every method's ids, scores, ranks) and the figures:
    everything but the header, whose dataset name and timings differ between copies."""
    figures = {m: (s.overall, s.by_type, s.per_question) for m, s in score_run(run).items()}
    rows = run_log(run).splitlines()[1:]
    return "\n".join(rows) + "\n" + json.dumps(figures, sort_keys=True)


def _reordered(source: Path, target: Path, order: str, seed: int = 0) -> Path:
    """A copy of a dataset folder whose corpus.jsonl lines are reversed or shuffled."""
    shutil.copytree(source, target)
    corpus = target / "corpus.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines()
    if order == "reversed":
        lines.reverse()
    else:
        random.Random(seed).shuffle(lines)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def _tied_dataset(root: Path, seed: int) -> Path:
    """FIXTURE: 40 documents over a five-word vocabulary, a third of them duplicated under
    another id, and 12 questions of one to three words: many exact score ties."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(1, 4))) for _ in range(27)]
    texts += rng.sample(texts, 13)  # duplicates: identical documents under other ids
    ids = [f"d{rng.randrange(10_000):04d}-{i}" for i in range(len(texts))]
    docs = [{"id": i, "title": "", "text": t} for i, t in zip(ids, texts, strict=True)]
    questions = [
        {
            "id": f"q{n:02d}",
            "text": " ".join(rng.choices(WORDS, k=rng.randint(1, 3))),
            "type": rng.choice(["court", "long"]),
            "relevant": rng.sample(ids, rng.randint(1, 3)),
        }
        for n in range(12)
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    (root / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tied_fixture_datasets_give_identical_figures_in_any_file_order(
    seed: int, tmp_path: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    source = _tied_dataset(tmp_path / "source" / "data", seed)
    settings = Settings(
        dataset=str(source),
        profile=make_profile(embeddings_server.url, batch_size=16),  # three corpus batches
        methods=("bm25", "vector", "hybrid"),
        cassettes=str(tmp_path / "cassettes"),
        cache=str(tmp_path / "cache"),
    )
    recorded = evaluate(load_dataset(source), settings, mode="record")
    expected = _rows_and_figures(recorded)
    # The FIXTURE really ties: some question has equal scores in its kept ranking, in every method.
    for method in ("bm25", "vector", "hybrid"):
        tops = [r.methods[method].scores for r in recorded.results]
        assert any(len(set(top)) < len(top) for top in tops), method

    copies = [_reordered(source, tmp_path / order / "data", order, seed) for order in ("reversed", "shuffled")]
    posts = len(embeddings_server.posts)
    for copy in copies:
        dataset = load_dataset(copy)
        assert dataset.fingerprint == recorded.fingerprint
        # Replay: the embedding requests of a reordered file match the recorded ones.
        assert _rows_and_figures(evaluate(dataset, replace(settings, dataset=str(copy)), mode="replay")) == expected
    assert len(embeddings_server.posts) == posts


DEMO_METHODS = ["bm25", "vector", "hybrid"]


@pytest.fixture(scope="module")
def demo_in_file_order(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo's rows and figures replayed in the file's order: once for every other order (a
    string, which no test can change)."""
    settings = demo_settings(cache=str(tmp_path_factory.mktemp("demo-cache")))
    return _rows_and_figures(evaluate(demo_dataset(), settings, mode="replay", methods=DEMO_METHODS))


@pytest.mark.parametrize("order", ["reversed", "shuffled"])
def test_demo_gives_identical_figures_in_any_file_order(order: str, tmp_path: Path, demo_in_file_order: str) -> None:
    settings = demo_settings(cache=str(tmp_path / "cache"))
    demo = demo_dataset()
    copy = load_dataset(_reordered(DEMO_DATA, tmp_path / "demo", order, seed=11))
    assert copy.fingerprint == demo.fingerprint
    reordered = evaluate(copy, settings, mode="replay", methods=DEMO_METHODS)
    assert reordered.methods == DEMO_METHODS
    assert _rows_and_figures(reordered) == demo_in_file_order
