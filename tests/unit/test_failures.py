"""Failure analysis on a hand-built Run: recall vs ranking failures, shared terms, best method;
and on an evaluated run, whose kept rankings reach as deep as the candidate pool."""

from __future__ import annotations

from typing import Any

import pytest
from demo_fixture import demo_dataset

from retrieval.config import Profile, Settings
from retrieval.data.dataset import Question
from retrieval.diagnosis.failures import Failure, best_method, failures_at_rank_1, where_relevant
from retrieval.evaluation.evaluate import LOG_DEPTH, evaluate
from retrieval.measures.metrics import MethodScores
from retrieval.run.results import MethodResult, QuestionResult, Run

DOCUMENTS = {
    "HEL-4040": "HEL-4040 : fichier d'import invalide\nLe fichier importé est mal formé.",
    "HEL-4050": "HEL-4050 : quota dépassé\nLe quota d'import est atteint.",
    "proc-restauration": "Restaurer une sauvegarde\nChoisissez un point de sauvegarde.",
    "proc-diagnostic": "Lancer un diagnostic\nLe diagnostic vérifie la connexion de l'agent.",
    "proc-purger-cache": "Purger le cache\nVider le cache libère l'espace disque de l'agent.",
    "inc-2026-04": "Incident d'avril 2026\nDes doublons sont apparus après une manipulation.",
}
CANDIDATES = 3
# What the built-in methods declare (retrieval.methods.base.Declaration.as_dict), as a fixture.
DECLARATIONS: dict[str, dict[str, Any]] = {
    "bm25": {},
    "vector": {"needs_vectors": True},
    "hybrid": {"requires": ["bm25", "vector"]},
    "rerank": {"requires": ["hybrid"], "candidate_source": "hybrid", "degradable": True},
}


def _m(
    ids: list[str],
    relevant: tuple[str, ...],
    ranks: dict[str, int | None] | None = None,
    status: str = "ok",
) -> MethodResult:
    """A method's answer; relevant ranks default to the positions in `ids` (None when absent)."""
    if ranks is None:
        ranks = {d: ids.index(d) + 1 if d in ids else None for d in relevant}
    return MethodResult(
        ids=ids,
        scores=[1.0 / (i + 1) for i in range(len(ids))],
        relevant_ranks=ranks,
        status=status,
    )


def _result(q: Question, **methods: MethodResult) -> QuestionResult:
    return QuestionResult(q, methods)


Q_OK = Question("q1", "J'obtiens HEL-4040 en important", "identifiant", ("HEL-4040",))
Q_RECALL = Question(
    "q2",
    "Comment revenir à l'état d'hier après une fausse manipulation ?",
    "paraphrase",
    ("proc-restauration",),
)
Q_RANKING = Question("q3", "Le diagnostic de l'agent échoue", "mixte", ("proc-diagnostic",))
Q_BOUNDARY = Question("q4", "quota HEL-4050", "identifiant", ("HEL-4050",))


def _run() -> Run:
    rel = Q_RECALL.relevant
    return Run(
        dataset="fixture",
        fingerprint="sha256:fixture",
        config={"k": 5, "candidates": CANDIDATES},
        methods=["bm25", "vector", "hybrid", "rerank"],
        declarations=DECLARATIONS,
        results=[
            _result(
                Q_OK,
                bm25=_m(["HEL-4040", "HEL-4050"], Q_OK.relevant),
                vector=_m(["HEL-4050", "HEL-4040"], Q_OK.relevant),
                hybrid=_m(["HEL-4040", "HEL-4050"], Q_OK.relevant),
                rerank=_m(["HEL-4040", "HEL-4050"], Q_OK.relevant),
            ),
            # The relevant document is 4th in hybrid: outside the reranker's 3 candidates.
            _result(
                Q_RECALL,
                bm25=_m(["inc-2026-04", "HEL-4040"], rel, {"proc-restauration": None}),
                vector=_m(
                    ["inc-2026-04", "proc-diagnostic", "proc-purger-cache", "proc-restauration"],
                    rel,
                    {"proc-restauration": 28},
                ),
                hybrid=_m(
                    ["inc-2026-04", "proc-diagnostic", "proc-purger-cache", "proc-restauration"],
                    rel,
                ),
                rerank=_m(
                    ["proc-diagnostic", "proc-purger-cache", "inc-2026-04"],
                    rel,
                    {"proc-restauration": None},
                ),
            ),
            # The relevant document is 3rd in hybrid (inside the pool) but the reranker put it 2nd.
            _result(
                Q_RANKING,
                bm25=_m(["proc-purger-cache", "proc-diagnostic"], Q_RANKING.relevant),
                vector=_m(["proc-diagnostic", "proc-purger-cache"], Q_RANKING.relevant),
                hybrid=_m(["proc-purger-cache", "HEL-4040", "proc-diagnostic"], Q_RANKING.relevant),
                rerank=_m(
                    ["proc-purger-cache", "proc-diagnostic", "HEL-4040"],
                    Q_RANKING.relevant,
                    status="degraded: http 500",
                ),
            ),
            # Exactly at the pool's boundary: rank 3 of 3 is a candidate.
            _result(
                Q_BOUNDARY,
                bm25=_m(["HEL-4050"], Q_BOUNDARY.relevant),
                vector=_m(["HEL-4040", "proc-diagnostic", "HEL-4050"], Q_BOUNDARY.relevant),
                hybrid=_m(["HEL-4040", "proc-diagnostic", "HEL-4050"], Q_BOUNDARY.relevant),
                rerank=_m(["HEL-4050", "HEL-4040"], Q_BOUNDARY.relevant),
            ),
        ],
    )


def _by_id(failures: list[Failure]) -> dict[str, Failure]:
    return {f.question_id: f for f in failures}


def test_only_questions_without_a_relevant_first_result_fail() -> None:
    failures = _by_id(failures_at_rank_1(_run(), "rerank", DOCUMENTS, CANDIDATES))
    assert set(failures) == {"q2", "q3"}


def test_relevant_absent_from_the_candidate_pool_is_a_recall_failure() -> None:
    f = _by_id(failures_at_rank_1(_run(), "rerank", DOCUMENTS, CANDIDATES))["q2"]
    assert f.kind == "recall"
    assert f.pool == f"hybrid top {CANDIDATES}"
    assert f.expected == ["proc-restauration"]
    assert f.obtained == ["proc-diagnostic", "proc-purger-cache", "inc-2026-04"]
    assert f.type == "paraphrase"
    assert f.question == Q_RECALL.text
    (trace,) = f.relevant
    assert trace.doc_id == "proc-restauration"
    assert trace.rank is None
    assert trace.ranks == {"bm25": None, "vector": 28}


def test_relevant_inside_the_pool_is_a_ranking_failure() -> None:
    f = _by_id(failures_at_rank_1(_run(), "rerank", DOCUMENTS, CANDIDATES))["q3"]
    assert f.kind == "ranking"
    assert f.relevant[0].rank == 2
    assert f.relevant[0].ranks == {"bm25": 2, "vector": 1}
    assert f.status == "degraded: http 500"


def test_the_pool_of_rerank_is_the_hybrid_top_n() -> None:
    run = _run()
    # With one more candidate, the reranker's pool reaches the relevant document of q2.
    assert _by_id(failures_at_rank_1(run, "rerank", DOCUMENTS, CANDIDATES + 1))["q2"].kind == "ranking"
    # With fewer candidates, q3's relevant document (hybrid rank 3) drops out of the pool,
    # even though the reranker's own list holds it at rank 2.
    assert _by_id(failures_at_rank_1(run, "rerank", DOCUMENTS, CANDIDATES - 1))["q3"].kind == "recall"


def test_where_relevant_says_in_words_what_the_gate_adds_to_a_question_that_got_worse() -> None:
    why = where_relevant(_run(), CANDIDATES)
    assert why["rerank"] == {
        "q1": "HEL-4040 at rank 1: a ranking failure, within hybrid top 3",
        "q2": "proc-restauration not in its top 3: a recall failure, none in hybrid top 3",
        "q3": "proc-diagnostic at rank 2: a ranking failure, within hybrid top 3",
        "q4": "HEL-4050 at rank 1: a ranking failure, within hybrid top 3",
    }
    assert why["bm25"]["q2"] == "proc-restauration not in its top 2: a recall failure, none in bm25 top 3"
    assert why["vector"]["q2"] == "proc-restauration at rank 28: a recall failure, none in vector top 3"


def test_a_pool_deeper_than_the_log_is_kept_whole_by_the_evaluator() -> None:
    # 30 candidates, 10 more than the run log's depth: BM25 ranks a relevant document of q16 and
    # of q18 at 25 in the demo. Within the pool, they are ranking failures; a run that kept only
    # the log's 20 would call them recall failures and send the reader to the wrong remedy.
    candidates = 30
    assert candidates > LOG_DEPTH
    demo = demo_dataset()
    run = evaluate(demo, Settings(profile=Profile("fixture"), candidates=candidates), methods=["bm25"])
    assert run.kept == {"bm25": candidates}
    assert max(len(r.methods["bm25"].ids) for r in run.results) == candidates
    documents = {d.id: d.content for d in demo.documents}
    kinds = {f.question_id: f.kind for f in failures_at_rank_1(run, "bm25", documents, candidates)}
    ranks = {r.question.id: r.methods["bm25"].relevant_ranks for r in run.results}
    assert (ranks["q16"]["faq-performances"], ranks["q18"]["proc-fusion-doublons"]) == (25, 25)
    assert (kinds["q16"], kinds["q18"]) == ("ranking", "ranking")


def test_a_method_without_candidate_source_is_its_own_pool() -> None:
    failures = _by_id(failures_at_rank_1(_run(), "vector", DOCUMENTS, CANDIDATES))
    assert set(failures) == {"q1", "q2", "q4"}
    assert failures["q1"].kind == "ranking"  # 2nd in vector's own top 3
    assert failures["q4"].kind == "ranking"  # 3rd of 3: still a candidate
    assert failures["q2"].kind == "recall"  # 4th: outside vector's top 3
    assert failures["q2"].pool == f"vector top {CANDIDATES}"


def test_no_term_in_common_versus_shared_terms() -> None:
    failures = _by_id(failures_at_rank_1(_run(), "rerank", DOCUMENTS, CANDIDATES))
    assert failures["q2"].relevant[0].shared_terms == []  # the seed's paraphrase: nothing to match
    assert failures["q3"].relevant[0].shared_terms == ["agent", "diagnostic"]


def test_first_stage_ranks_are_absent_for_methods_that_did_not_run() -> None:
    run = _run()
    for result in run.results:
        del result.methods["bm25"]
    f = _by_id(failures_at_rank_1(run, "rerank", DOCUMENTS, CANDIDATES))["q2"]
    assert f.relevant[0].ranks == {"vector": 28}


def _scores(mrr: float, recall: float) -> MethodScores:
    return MethodScores(overall={"recall@5": recall, "mrr": mrr}, by_type={}, per_question={})


def test_best_method_has_the_highest_mrr() -> None:
    scores = {
        "bm25": _scores(0.71, 0.99),
        "vector": _scores(0.79, 0.82),
        "hybrid": _scores(0.80, 0.88),
    }
    assert best_method(scores) == "hybrid"


def test_best_method_ties_on_mrr_go_to_recall_then_to_the_first_listed() -> None:
    assert best_method({"a": _scores(0.8, 0.7), "b": _scores(0.8, 0.9)}) == "b"
    assert best_method({"a": _scores(0.8, 0.9), "b": _scores(0.8, 0.9)}) == "a"
    assert best_method({"b": _scores(0.8, 0.9), "a": _scores(0.8, 0.9)}) == "b"


def test_best_method_reads_recall_at_the_given_k() -> None:
    scores = {
        "a": MethodScores({"recall@3": 0.9, "recall@5": 0.1, "mrr": 0.5}, {}, {}),
        "b": MethodScores({"recall@3": 0.1, "recall@5": 0.9, "mrr": 0.5}, {}, {}),
    }
    assert best_method(scores, k=3) == "a"
    assert best_method(scores, k=5) == "b"


@pytest.mark.parametrize("method", ["bm25", "hybrid"])
def test_obtained_is_the_top_3(method: str) -> None:
    for f in failures_at_rank_1(_run(), method, DOCUMENTS, CANDIDATES):
        assert len(f.obtained) <= 3
        assert f.obtained[0] not in f.expected
