"""The committed baseline, in three modules of one job each, named here for their callers.

- retrieval.gate.schema: the file's format, what an entry holds, its self-check on load;
- retrieval.gate.questions: on which questions, after the dataset changed;
- retrieval.gate.compare: the checks of every gated figure;
- retrieval.gate.update: the diff, the refusal and the recorded acceptance, the locked write;
- retrieval.measures.figures: the registry that says which way each figure gets worse.
"""

from __future__ import annotations

from retrieval.gate.compare import (
    Check,
    at_k,
    compare,
    config_changes,
    incompatibility,
    ungated_types,
    unproduced,
)
from retrieval.gate.questions import (
    DataChanges,
    as_scores,
    data_changes,
    on_questions,
    rejudged,
    run_data_changes,
)
from retrieval.gate.schema import (
    DIGITS,
    FORMAT,
    BaselineError,
    entry_for,
    first_of,
    judgments,
    load_baseline,
    parse_baseline,
    question_digests,
)
from retrieval.gate.update import accepted_drop, recover_baseline, try_update, update_baseline

__all__ = [
    "DIGITS",
    "FORMAT",
    "BaselineError",
    "Check",
    "DataChanges",
    "accepted_drop",
    "as_scores",
    "at_k",
    "compare",
    "config_changes",
    "data_changes",
    "entry_for",
    "first_of",
    "incompatibility",
    "judgments",
    "load_baseline",
    "on_questions",
    "parse_baseline",
    "question_digests",
    "recover_baseline",
    "rejudged",
    "run_data_changes",
    "try_update",
    "ungated_types",
    "unproduced",
    "update_baseline",
]
