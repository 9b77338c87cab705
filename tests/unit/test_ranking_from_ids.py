"""ranking_from_ids: what a retriever calling a search engine builds from the ids it returns."""

from __future__ import annotations

import numpy as np
import pytest
from demo_fixture import demo_dataset

from retrieval import ranking_from_ids
from retrieval.run.ranking import RankingError


def test_the_engine_order_is_the_ranking_with_no_ties_unless_scored() -> None:
    demo = demo_dataset()
    ids = ["HEL-4040", demo.documents[0].id, "HEL-4020"]
    ranking = ranking_from_ids(ids, demo)
    assert [demo.documents[i].id for i in ranking.indices] == ids
    assert ranking.scores.tolist() == [3.0, 2.0, 1.0]
    scored = ranking_from_ids(ids, demo, scores=[7.5, 7.5, 1])
    assert scored.scores.tolist() == [7.5, 7.5, 1.0]  # equal scores: a tie the report counts
    assert ranking.indices.dtype == np.int64 and len(ranking_from_ids([], demo)) == 0


@pytest.mark.parametrize(
    ("ids", "scores", "message"),
    [
        (
            ["HEL-4040", "prod-1", "prod-2"],
            None,
            "the engine returned 2 id(s) that dataset 'demo' does not hold ('prod-1', …): leaving them out would "
            "raise the figures, so index the evaluated corpus, or export the engine's documents to the "
            "dataset's corpus.jsonl",
        ),
        (["HEL-4040", "HEL-4020", "HEL-4040"], None, "the engine returned 'HEL-4040' twice: a document has one rank"),
        (["HEL-4040", "HEL-4020"], [1.0], "1 scores for 2 ids: give one score per id, or none"),
        (
            ["HEL-4040", "HEL-4020"],
            [0.2, 0.9],
            "scores must be finite and must not increase down the ranking (best first); for a distance, pass its "
            "negation",
        ),
        (
            ["HEL-4040", "HEL-4020"],
            [float("nan"), 0.1],
            "scores must be finite and must not increase down the ranking (best first); for a distance, pass its "
            "negation",
        ),
    ],
)
def test_what_cannot_be_scored_is_refused(ids: list[str], scores: list[float] | None, message: str) -> None:
    with pytest.raises(RankingError) as caught:
        ranking_from_ids(ids, demo_dataset(), scores)
    assert str(caught.value) == message
