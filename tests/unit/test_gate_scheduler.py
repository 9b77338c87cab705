"""The gate's pytest-xdist scheduler (retrieval.gate.plugin.gate_scheduler) driven without
processes: fake workers (named fixtures) that run what they are sent, in order, and report it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from retrieval.gate.plugin import gate_scheduler


class FakeWorker:
    """FIXTURE: an xdist worker as the scheduler sees it; `sent` is what it was asked to run."""

    def __init__(self, name: str) -> None:
        self.sent: list[int]
        self.name, self.sent, self.shutting_down = name, [], False
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _config() -> Any:
    values = {"dist": "load", "tx": ["2*popen"], "numprocesses": 2}
    return SimpleNamespace(getvalue=values.__getitem__, option=SimpleNamespace(loadscopereorder=False))


def _run(tests: list[str]) -> tuple[dict[str, list[str]], int]:
    """Every test run by the two workers, each reporting its oldest test in turn; the most scopes
    the scheduler held for a worker at once."""
    scheduler = gate_scheduler(_config(), SimpleNamespace(loadscopesched=lambda *_: None))
    workers = [FakeWorker("gw0"), FakeWorker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, tests)
    scheduler.schedule()
    ran: dict[str, list[str]] = {w.name: [] for w in workers}
    done = {w.name: 0 for w in workers}
    held = 0
    for _ in range(2 * len(tests)):  # bounded: each round reports one test
        busy = [w for w in workers if done[w.name] < len(w.sent)]
        if not busy:
            break
        worker = busy[0] if len(busy) == 1 or done[busy[0].name] <= done[busy[1].name] else busy[1]
        index = worker.sent[done[worker.name]]
        done[worker.name] += 1
        ran[worker.name].append(tests[index])
        scheduler.mark_test_complete(worker, index)
        held = max(held, *(len(scheduler.assigned_work[w]) for w in workers))
    assert scheduler.tests_finished and all(w.shutting_down for w in workers)
    return ran, held


def test_every_test_runs_once_and_the_gate_items_on_one_worker() -> None:
    tests = [f"tests/test_a.py::test_{i}" for i in range(40)]
    tests[10:10] = [f"tests/regression/test_gate.py::test_gate[bm25-{m}]" for m in ("recall", "mrr", "ndcg")]
    ran, _ = _run(tests)
    assert sorted(ran["gw0"] + ran["gw1"]) == sorted(tests)
    gate = {name for name, run in ran.items() if any("::test_gate[" in t for t in run)}
    assert len(gate) == 1
    assert [t for t in ran[gate.pop()] if "::test_gate[" in t] == tests[10:13]


def test_a_worker_holds_only_its_unfinished_scopes() -> None:
    # With a scope a test, xdist kept every finished scope and summed them all on each report:
    # quadratic in the number of tests. The scheduler keeps a window of a few.
    tests = [f"tests/test_a.py::test_{i}" for i in range(3000)]
    ran, held = _run(tests)
    assert sorted(ran["gw0"] + ran["gw1"]) == sorted(tests)
    assert held <= 4
