"""The gate's pytest-xdist scheduler given the tests' expected seconds (gate_scheduler's `weight`,
from a previous run): the scopes go out heaviest first. Driven without processes, as in
test_gate_scheduler.py: fake workers that record what they are sent."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from retrieval.gate.plugin import gate_scheduler


class Worker:
    """FIXTURE: an xdist worker as the scheduler sees it; `sent` is what it was asked to run."""

    def __init__(self, name: str) -> None:
        self.sent: list[int] = []
        self.name, self.shutting_down = name, False
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _order(tests: list[str], **kwargs: Any) -> list[str]:
    """The tests in the order the scheduler sends them (one worker, which reports each at once)."""
    config = SimpleNamespace(
        getvalue={"dist": "load", "tx": ["1*popen"], "numprocesses": 1}.__getitem__,
        option=SimpleNamespace(loadscopereorder=True),
    )
    scheduler = gate_scheduler(config, SimpleNamespace(loadscopesched=lambda *_: None), **kwargs)  # type: ignore[arg-type]
    worker = Worker("gw0")
    scheduler.add_node(worker)
    scheduler.add_node_collection(worker, tests)
    scheduler.schedule()
    done = 0
    while done < len(worker.sent):
        scheduler.mark_test_complete(worker, worker.sent[done])
        done += 1
    assert scheduler.tests_finished and sorted(worker.sent) == list(range(len(tests)))
    return [tests[i] for i in worker.sent]


TESTS = [f"tests/test_a.py::test_{i}" for i in range(6)] + ["tests/test_b.py::test_x", "tests/test_b.py::test_y"]
SECONDS = {"tests/test_a.py::test_4": 2.0, "tests/test_a.py::test_1": 0.5, "tests/test_b.py::test_x": 0.2}


def test_without_weights_the_order_is_xdists() -> None:
    assert _order(TESTS) == TESTS


def test_the_heaviest_scope_goes_first_and_ties_keep_xdists_order() -> None:
    order = _order(TESTS, weight=lambda nodeid: SECONDS.get(nodeid, 0.0))
    assert order == [
        "tests/test_a.py::test_4",
        "tests/test_a.py::test_1",
        "tests/test_b.py::test_x",
        "tests/test_a.py::test_0",
        "tests/test_a.py::test_2",
        "tests/test_a.py::test_3",
        "tests/test_a.py::test_5",
        "tests/test_b.py::test_y",
    ]


def test_a_scope_weighs_its_tests_seconds_together() -> None:
    def module(nodeid: str) -> str:
        return nodeid.split("::")[0]

    # test_b's two tests (0.5 s together) outweigh test_a's six (0.4 s): test_b first, though smaller.
    seconds = {"tests/test_b.py::test_x": 0.2, "tests/test_b.py::test_y": 0.3, "tests/test_a.py::test_0": 0.4}
    order = _order(TESTS, scope=module, weight=lambda nodeid: seconds.get(nodeid, 0.0))
    assert order[:2] == ["tests/test_b.py::test_x", "tests/test_b.py::test_y"]
