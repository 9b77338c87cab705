"""Progress bars for the runs that call models (embedding a corpus live or while recording).

tqdm, hidden when the stream is not a terminal (CI logs stay readable), cleared when done. The
CLI draws on its stderr; a pytest run (`pytest --record`, the gate's live runs) captures
sys.stderr while its items run, so the gate draws on the process's own stderr, which is the
terminal when pytest runs in one.
"""

from __future__ import annotations

import sys
from typing import IO

from retrieval.methods.base import Progress

__all__ = ["stderr_progress", "terminal_progress"]


def stderr_progress(total: int, label: str, stream: IO[str] | None = None) -> Progress:
    """A bar of `total` texts labelled `label` on `stream` (sys.stderr), hidden unless a terminal."""
    from tqdm import tqdm  # here: the gate imports this module in every pytest run

    # disable=None: tqdm hides the bar when the stream is not a terminal.
    bar: Progress = tqdm(total=total, desc=label, unit="text", file=stream or sys.stderr, disable=None, leave=False)
    return bar


def terminal_progress(total: int, label: str) -> Progress:
    """`stderr_progress` on the process's own stderr, past pytest's capture of sys.stderr."""
    return stderr_progress(total, label, sys.__stderr__)
