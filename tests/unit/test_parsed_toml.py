"""The defaults and the project file parsed once per process for the same text
(retrieval.config.project_file.parsed_toml): what tomllib gives, a copy each time that no
caller's change reaches the next, invalid TOML refused every time, and a project file edited
within the same clock tick (same size, same modification time) read as it is now."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from retrieval.config import ConfigError, load_settings
from retrieval.config.project_file import parsed_toml

TEXT = 'dataset = "data/qa"\nmethods = ["bm25"]\n[profiles.local.embeddings]\nmodel = "m"\nwhen = 2024-01-02\n'


def test_the_parse_is_tomllibs_and_each_caller_gets_its_own_copy() -> None:
    first = parsed_toml(TEXT)
    assert first == tomllib.loads(TEXT)
    first["methods"].append("vector")
    first["profiles"]["local"]["embeddings"]["model"] = "changed"
    assert parsed_toml(TEXT) == tomllib.loads(TEXT)
    assert parsed_toml(TEXT) is not parsed_toml(TEXT)
    for _ in range(2):  # refused each time, as tomllib refuses it
        with pytest.raises(tomllib.TOMLDecodeError):
            parsed_toml("k = ")


def test_a_project_file_rewritten_in_the_same_tick_is_read_as_it_is_now(tmp_path: Path) -> None:
    project = tmp_path / "retrieval.toml"
    project.write_text("k = 5\n")
    stamp = project.stat().st_mtime_ns
    assert load_settings(tmp_path).k == 5
    project.write_text("k = 7\n")
    os.utime(project, ns=(stamp, stamp))  # the same size and time: only the text tells them apart
    assert load_settings(tmp_path).k == 7
    project.write_text("k = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(tmp_path)
