"""What this repository's own tests need. The gate itself is the package's pytest plugin
(retrieval/gate/plugin.py, entry point `pytest11`), as in any repository that installs it."""

import os

pytest_plugins = ["pytester"]  # tests run the gate itself on temporary projects

# The README's test command runs a pytest-xdist worker per core (`-n auto`): OpenBLAS's default
# of a thread per core in each of them oversubscribed the cores (the suite: 10.8 -> 9.9 s with
# one thread). Set here, in each worker, before numpy loads OpenBLAS.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
