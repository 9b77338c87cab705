"""Snapshots of each method's top 10 per question.

A change that moves documents without moving the metrics still shows in review as a
snapshot diff. Accept an intended change with `pytest --snapshot-update`. Ids only: no
float goes in a snapshot. Each profile has its own snapshot folder, so gating one
profile never reports another's snapshots as unused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.amber import AmberSnapshotExtension

from retrieval.gate import GateResult
from retrieval.pipeline import BUILTIN_METHODS

pytestmark = pytest.mark.regression

TOP = 10


@pytest.fixture
def ranking_snapshot(snapshot: SnapshotAssertion, gate: GateResult) -> SnapshotAssertion:
    profile = gate.profile

    class PerProfile(AmberSnapshotExtension):
        @classmethod
        def dirname(cls, *, test_location) -> str:  # type: ignore[no-untyped-def, override]
            return str(Path(test_location.filepath).parent / "__snapshots__" / profile)

    return snapshot.use_extension(PerProfile)


@pytest.mark.parametrize("method", BUILTIN_METHODS)
def test_top10_per_question(gate: GateResult, ranking_snapshot: SnapshotAssertion, method: str) -> None:
    if method not in gate.run.methods:
        pytest.skip(
            f"{method} not evaluated for profile {gate.profile!r}: {gate.run.skipped.get(method, 'not requested')}"
        )
    top = {qid: ids[:TOP] for qid, ids in gate.run.ranked_ids(method).items()}
    assert top == ranking_snapshot
