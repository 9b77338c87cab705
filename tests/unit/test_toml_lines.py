"""The line of a key in a TOML file, for configuration errors (FIXTURE files written here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.config.toml_lines import key_line

PYPROJECT = """[project]
name = "x"

[tool.retrieval]  # the gate
dataset = "data"
rrfk = 3
"quoted-key" = 1

[tool.retrieval.profiles.local]
embeddings.model = "m"
dimension = 3

[tool.retrieval.prices."acme-search"]
calls = 0.1

[tool.other]
k = 2

[tool.retrieval.profiles]
inline = { llm = { workers = "8" } }
"""


@pytest.mark.parametrize(
    ("at", "line"),
    [
        (("tool", "retrieval", "rrfk"), 6),
        (("tool", "retrieval", "quoted-key"), 7),
        (("tool", "retrieval", "profiles", "local"), 9),  # the table's header
        (("tool", "retrieval", "profiles", "local", "embeddings", "model"), 10),  # a dotted key
        (("tool", "retrieval", "profiles", "local", "dimension"), 11),
        (("tool", "retrieval", "prices", "acme-search", "calls"), 14),  # under a quoted table name
        (("tool", "retrieval", "profiles", "inline", "llm", "workers"), 20),  # inside an inline table
        (("tool", "retrieval", "k"), None),  # `k` is [tool.other]'s, not written under [tool.retrieval]
        (("tool", "retrieval", "depth"), None),
    ],
)
def test_key_line(tmp_path: Path, at: tuple[str, ...], line: int | None) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT, encoding="utf-8")
    assert key_line(path, at) == line


def test_an_unreadable_file_has_no_line(tmp_path: Path) -> None:
    assert key_line(tmp_path / "missing.toml", ("k",)) is None
    (tmp_path / "latin1.toml").write_bytes(b"k = '\xe9'\n")
    assert key_line(tmp_path / "latin1.toml", ("k",)) is None
