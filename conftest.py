"""What this repository's own tests need. The gate itself is the package's pytest plugin
(retrieval/pytest_plugin.py, entry point `pytest11`), as in any repository that installs it."""

pytest_plugins = ["pytester"]  # tests run the gate itself on temporary projects
