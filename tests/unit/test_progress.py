"""Progress bars: drawn on a terminal, hidden elsewhere; the gate's live and recording runs draw
them past pytest's capture, its replays do not."""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.evaluation.embeddings import embed_texts
from retrieval.evaluation.progress import stderr_progress, terminal_progress
from retrieval.gate import result as gate
from retrieval.providers.base import Kind
from retrieval.run.cost import Usage


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Provider:
    """FIXTURE: two-dimensional unit vectors, two texts per call."""

    provider, model, dimensions, batch_size = "fixture", "fixture", 2, 2

    def __init__(self) -> None:
        self.usage = Usage()

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        return np.tile(np.array([[0.6, 0.8]], dtype=np.float32), (len(texts), 1))


def test_a_bar_is_drawn_on_a_terminal_and_cleared() -> None:
    terminal = _Terminal()
    embed_texts(_Provider(), ["a", "b", "c"], "document", None, lambda n, label: stderr_progress(n, label, terminal))
    shown = terminal.getvalue()
    assert shown.startswith("\rembedding 3 documents:   0%|          | 0/3 ")
    assert shown.endswith("\r" + " " * len(shown.split("\r")[1]) + "\r")  # leave=False: the line is cleared


def test_no_bar_when_the_stream_is_not_a_terminal() -> None:
    log = io.StringIO()
    embed_texts(_Provider(), ["a", "b", "c"], "document", None, lambda n, label: stderr_progress(n, label, log))
    assert log.getvalue() == ""


def test_the_gate_draws_on_the_process_stderr_past_pytest_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "__stderr__", terminal)
    bar = terminal_progress(4, "embedding 4 questions")
    bar.update(4)
    bar.close()
    assert "embedding 4 questions" in terminal.getvalue()


@pytest.mark.parametrize(("mode", "drawn"), [("record", True), ("live", True), ("replay", False)])
def test_the_gate_shows_progress_when_it_calls_models(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object, mode: str, drawn: bool
) -> None:
    seen: dict[str, object] = {}

    class Stop(Exception):
        pass

    def evaluate(
        dataset: object,
        settings: object,
        mode: str,
        progress: object = None,
        on_staged: object = None,
        baseline_inputs: object = None,
        keep_at_least: int = 0,
        baseline_ref: str | None = None,
    ) -> None:
        seen["progress"] = progress
        raise Stop

    monkeypatch.setattr(gate, "evaluate", evaluate)
    monkeypatch.setattr(gate, "load_dataset", lambda path, *judged, **accepted: None)
    with pytest.raises(Stop):
        gate.run_gate(Settings(root=str(tmp_path)), mode)  # type: ignore[arg-type]
    assert seen["progress"] is (terminal_progress if drawn else None)
