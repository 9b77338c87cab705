"""The package's one version: its metadata reads it (pyproject's dynamic version), `python -m
retrieval --version` prints it and the report names it. It imports nothing, so any layer may read it."""

__version__ = "0.2.0"
