"""Optional adapters to real search engines; each needs its own extra (see pyproject.toml)."""
