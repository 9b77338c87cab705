"""The sweeps' fusion of cut lists (`fuse_kept`) against retrieval.measures.fusion on the uncut lists.

An independent check, not a copy: the reference is `reciprocal_rank_fusion`, the fusion the
evaluator runs, given the whole input rankings; `fuse_kept` sees them cut at random depths.
Whenever it says its top is exact, that top must be the reference's, id for id and in order;
with nothing cut it must always be exact. The cases are seeded and built to tie often:
reversed and pair-swapped lists give documents the same ranks in swapped lists, equal weights
make those ties exact, weights of 0 switch lists off, lists that hold part of the corpus only
(as BM25 returns) leave documents unseen.
"""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.measures.fusion import reciprocal_rank_fusion
from retrieval.measures.refusion import fuse_kept, kept_lists
from retrieval.run.ranking import Ranking

CASES = 1500
WEIGHTS = (0.0, 0.5, 1.0, 1.0, 1.0, 2.0, 3.0)
KS = (0, 1, 5, 10, 60)


Case = tuple[list[str], dict[str, int], list[np.ndarray], list[float], int, int, list[int]]


def _lists(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Two or three rankings of corpus positions, related so that fused scores tie."""
    first = rng.permutation(n)
    lists = [first]
    for _ in range(int(rng.integers(1, 3))):
        kind = int(rng.integers(0, 4))
        if kind == 0:  # ranks (r, n + 1 - r): the documents at r and n + 1 - r tie
            other = first[::-1].copy()
        elif kind == 1:  # neighbours swapped: each pair ties
            other = first.copy()
            other[: n - n % 2] = other[: n - n % 2].reshape(-1, 2)[:, ::-1].ravel()
        elif kind == 2:
            other = rng.permutation(n)
        else:
            other = first.copy()
        lists.append(other)
    # Some lists hold part of the corpus only, as BM25 ranks matching documents alone.
    return [r[: int(rng.integers(1, n + 1))] if rng.random() < 0.4 else r for r in lists]


def _case(seed: int) -> Case:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    ids = [f"d{i:03d}" for i in range(n)]
    lists = _lists(rng, n)
    weights = [float(rng.choice(WEIGHTS)) for _ in lists]
    if not any(weights):
        weights[0] = 1.0
    cuts = [int(rng.integers(0, len(r) + 1)) if rng.random() < 0.8 else len(r) for r in lists]
    return ids, {d: i for i, d in enumerate(ids)}, lists, weights, int(rng.choice(KS)), int(rng.integers(1, 21)), cuts


@pytest.fixture(scope="module")
def cases() -> list[tuple[Case, Ranking]]:
    """Each seeded case and the reference fusion of its uncut lists: made once for the tests of
    both sides (each reads them, none changes them)."""
    made = []
    for seed in range(CASES):
        case = _case(seed)
        ids, _, lists, weights, k, _top, _cuts = case
        for ranking in lists:
            ranking.flags.writeable = False
        fused = reciprocal_rank_fusion(
            [Ranking(r.astype(np.int64), np.zeros(len(r))) for r in lists], len(ids), k=k, weights=weights
        )
        made.append((case, fused))
    return made


def test_fuse_kept_agrees_with_the_fusion_of_the_uncut_lists(cases: list[tuple[Case, Ranking]]) -> None:
    exact_cut = exact_whole = 0
    for seed, ((ids, order, lists, weights, k, top, cuts), fused_whole) in enumerate(cases):
        expected = [ids[i] for i in fused_whole.indices[:top]]

        whole = fuse_kept(kept_lists([[ids[i] for i in r] for r in lists], [True] * len(lists), order), k, weights, top)
        assert whole.exact, seed
        assert whole.ids == expected, (seed, whole.ids, expected)
        exact_whole += 1

        cut = [[ids[i] for i in r[:c]] for r, c in zip(lists, cuts, strict=True)]
        complete = [c == len(r) for r, c in zip(lists, cuts, strict=True)]
        fused = fuse_kept(kept_lists(cut, complete, order), k, weights, top)
        if fused.exact:
            assert fused.ids == expected, (seed, fused.ids, expected, cuts)
            exact_cut += 1
    # The check means something only if many cut cases are exact, and many are ties.
    assert exact_whole == CASES
    assert exact_cut > CASES // 4, exact_cut


def test_the_cases_hold_ties_zero_weights_and_partial_lists(cases: list[tuple[Case, Ranking]]) -> None:
    ties = zero = partial = cut_exact_candidates = 0
    for (ids, _, lists, weights, _k, _top, cuts), fused in cases:
        zero += 0.0 in weights
        partial += any(len(r) < len(ids) for r in lists)
        cut_exact_candidates += any(c < len(r) for r, c in zip(lists, cuts, strict=True))
        ties += len(np.unique(fused.scores)) < len(fused.scores)
    assert ties > CASES // 6 and zero > CASES // 10 and partial > CASES // 4 and cut_exact_candidates > CASES // 2


@pytest.mark.parametrize("weights", [(0.0, 1.0), (1.0, 0.0)])
def test_a_list_of_weight_zero_is_switched_off(weights: tuple[float, float]) -> None:
    ids = [f"d{i}" for i in range(6)]
    order = {d: i for i, d in enumerate(ids)}
    lists = [["d5", "d4", "d3"], ["d0", "d1", "d2", "d3"]]
    fused = fuse_kept(kept_lists(lists, [True, True], order), 60, weights, 10)
    on = lists[weights.index(1.0)]
    assert fused.exact and fused.ids == on
