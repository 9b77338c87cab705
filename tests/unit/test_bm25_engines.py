"""The sparse BM25 engine ranks exactly as rank-bm25's BM25Plus, the reference engine."""

from __future__ import annotations

import numpy as np
import pytest
from demo_fixture import demo_dataset

from retrieval.data.analyzer import analyze
from retrieval.data.dataset import Dataset, Document, Question
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.support.bm25_engine import RankBM25Index, SparseBM25Index, round_scores
from retrieval.run.ranking import Ranking


def full_rankings(dataset: Dataset, engine: str) -> list[Ranking]:
    """Every question's ranking of the whole corpus (depth = corpus size)."""
    context = Context(dataset=dataset, depth=len(dataset.documents))
    return BM25Method(engine=engine).rank(context)  # type: ignore[arg-type]


def assert_same_rankings(dataset: Dataset) -> None:
    sparse, reference = full_rankings(dataset, "sparse"), full_rankings(dataset, "rank-bm25")
    assert len(sparse) == len(reference) == len(dataset.questions)
    doc_terms = [set(analyze(d.content)) for d in dataset.documents]
    for question, fast, slow in zip(dataset.questions, sparse, reference, strict=True):
        np.testing.assert_array_equal(fast.indices, slow.indices, err_msg=question.id)
        # Exactly the documents sharing an analysed term with the question are ranked.
        terms = set(analyze(question.text))
        sharing = {i for i, d in enumerate(doc_terms) if terms & d}
        assert set(fast.indices.tolist()) == sharing, question.id
        np.testing.assert_allclose(fast.scores, slow.scores, rtol=0, atol=1e-9)


def random_dataset(seed: int, n_documents: int = 300, n_questions: int = 60) -> Dataset:
    """French-looking words with a skewed frequency: common terms, rare terms and many ties."""
    rng = np.random.default_rng(seed)
    syllables = ["ba", "ché", "de", "fi", "gra", "lo", "mè", "nu", "po", "ré", "sa", "tou", "vi"]
    vocabulary = sorted({"".join(rng.choice(syllables, int(rng.integers(2, 4)))) for _ in range(400)})
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()

    def text(n: int) -> str:
        return " ".join(vocabulary[i] for i in rng.choice(len(vocabulary), n, p=weights))

    documents = tuple(
        Document(f"d{i}", text(3) if i % 3 else "", text(int(rng.integers(1, 40)))) for i in range(n_documents)
    )
    # Repeated words (counted twice by rank-bm25) and unknown words (contribute nothing).
    questions = tuple(
        Question(f"q{j}", f"{text(int(rng.integers(1, 6)))} {text(2)} inconnu", "random", ("d0",))
        for j in range(n_questions)
    )
    return Dataset("random", documents, questions, f"random:{seed}")


def test_same_rankings_on_the_demo_set() -> None:
    assert_same_rankings(demo_dataset())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_rankings_on_a_random_corpus(seed: int) -> None:
    assert_same_rankings(random_dataset(seed))


def test_same_raw_scores_with_duplicate_and_unknown_query_terms() -> None:
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(50)]
    corpus = [list(rng.choice(words[: int(rng.integers(3, 50))], int(rng.integers(1, 30)))) for _ in range(200)]
    queries = [["w1", "w1", "w2"], ["w3", "absent", "w3", "w3"], ["absent"], [], ["w49", "w0"]]
    sparse = SparseBM25Index(corpus).scores(queries)
    reference = RankBM25Index(corpus).scores(queries)
    assert sparse.shape == reference.shape == (len(queries), len(corpus))
    np.testing.assert_allclose(sparse, reference, rtol=0, atol=1e-9)
    # Rounded, as both engines rank them: the last-bit differences are gone.
    np.testing.assert_array_equal(round_scores(sparse), round_scores(reference))


def test_rankings_are_truncated_to_the_depth_one_per_question() -> None:
    dataset = random_dataset(3, n_documents=50, n_questions=7)
    rankings = BM25Method().rank(Context(dataset=dataset, depth=10))
    assert len(rankings) == 7
    assert all(len(r) <= 10 for r in rankings) and any(len(r) == 10 for r in rankings)


def test_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown BM25 engine"):
        BM25Method(engine="bm25s")  # type: ignore[arg-type]


@pytest.fixture
def error_catalogue() -> Dataset:
    """Near-identical error pages: only the identifier tells HEL-4040 from its neighbours."""
    pages = {
        "HEL-4004": "Le fichier importé est introuvable. Vérifiez le chemin du fichier.",
        "HEL-4040": "Le fichier importé est trop volumineux. Découpez le fichier avant l'import.",
        "HEL-4041": "Le fichier importé est vide. Vérifiez le contenu du fichier avant l'import.",
        "HEL-4400": "Le fichier importé est mal encodé. Enregistrez le fichier en UTF-8.",
        "ERR-4040": "La requête d'import a expiré. Relancez l'import du fichier plus tard.",
    }
    documents = tuple(
        Document(code, f"{code} : erreur d'import", f"Code : {code}. {text} Cause : import refusé.")
        for code, text in pages.items()
    )
    questions = tuple(
        Question(f"q{i}", text, "identifiant", ("HEL-4040",))
        for i, text in enumerate(["J'obtiens HEL-4040", "hel-4040", "HEL 4040"])
    )
    return Dataset("catalogue", documents, questions, "catalogue")


@pytest.mark.parametrize("engine", ["sparse", "rank-bm25"])
def test_identifier_query_ranks_its_document_first(error_catalogue: Dataset, engine: str) -> None:
    rankings = BM25Method(engine=engine).rank(Context(dataset=error_catalogue, depth=5))  # type: ignore[arg-type]
    for question, ranking in zip(error_catalogue.questions, rankings, strict=True):
        best = error_catalogue.documents[int(ranking.indices[0])].id
        assert best == "HEL-4040", question.text
        assert len(ranking) == 1 or ranking.scores[0] > ranking.scores[1], question.text
