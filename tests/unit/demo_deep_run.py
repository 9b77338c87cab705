"""The demo fixture (demo_fixture.py) evaluated in replay mode from its recording, kept to a given depth.

The evaluator keeps first-stage rankings deep enough for exact sweeps (retrieval.diagnosis.sweeps.
keep_depths); `demo_run(20)` cuts every ranking to the top 20, as a run log written before
that change would hold, to show what the sweeps say of a shallow run.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from demo_fixture import demo_dataset, demo_settings

from retrieval.data.dataset import Dataset
from retrieval.diagnosis.sweeps import Setup, setup_for
from retrieval.evaluation.evaluate import evaluate
from retrieval.run.results import QuestionResult, Run


@cache
def demo_run(kept: int) -> tuple[Dataset, Run, Setup]:
    """The demo run (replay, local profile) with every ranking kept to `kept`, and its Setup.

    Cached: the tests only read it."""
    settings = demo_settings()
    dataset = demo_dataset()
    run = evaluate(dataset, settings)
    run.results = [
        QuestionResult(
            r.question, {m: replace(res, ids=res.ids[:kept], scores=res.scores[:kept]) for m, res in r.methods.items()}
        )
        for r in run.results
    ]
    run.kept = {m: min(kept, depth) for m, depth in run.kept.items()}
    return dataset, run, setup_for(run, [(d.id, d.title, d.text) for d in dataset.documents])
