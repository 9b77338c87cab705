"""What this repository's own tests need. The gate itself is the package's pytest plugin
(retrieval/gate/plugin.py, entry point `pytest11`), as in any repository that installs it."""

import os

import pytest

pytest_plugins = ["pytester"]  # tests run the gate itself on temporary projects

# The README's test command runs a pytest-xdist worker per core (`-n auto`): OpenBLAS's default
# of a thread per core in each of them oversubscribed the cores (the suite: 10.8 -> 9.9 s with
# one thread). Set here, in each worker, before numpy loads OpenBLAS.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# The Ray module's tests share one 2-node cluster (a module fixture, 8-25 s to start): under
# `-n auto` they all go to one worker, where it starts once, the other tests spreading as usual.
ONE_WORKER = ("tests/unit/test_ray_executor.py",)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from retrieval.gate.plugin import gate_scheduler

    def scope(nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return module if module in ONE_WORKER else nodeid

    return gate_scheduler(config, log, scope)
