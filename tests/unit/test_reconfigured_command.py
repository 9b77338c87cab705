"""A configuration change fails on its own until the baseline records it; against a base branch the
command it names records it against that ref too (without the ref, an accepted drop would be
recorded against the pull request's own baseline only and the base's comparison would still fail)."""

from __future__ import annotations

from pathlib import Path

import pytest
from trust_project import commit_on_main, gate, make_project


@pytest.mark.parametrize(
    ("ref", "command"),
    [(None, "pytest --update-baseline`"), ("main", "pytest --update-baseline --retrieval-baseline-ref main`")],
)
def test_the_configuration_items_command_names_the_base_branch_it_is_compared_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ref: str | None, command: str
) -> None:
    monkeypatch.chdir(tmp_path)  # the fixture retriever reads ranks.json from the working directory
    make_project(tmp_path)
    commit_on_main(tmp_path)
    toml = tmp_path / "retrieval.toml"
    toml.write_text(toml.read_text() + "candidates = 30\n")
    result = gate(tmp_path, ref)
    assert result.reconfigured == (
        "the configuration differs from the baseline's (candidates: 20 -> 30): the figures are compared with the "
        f"baseline's. If the change is intended, run `{command} (with --allow-regression if a figure fell, and say "
        "why in the PR) and commit baselines/metrics.json."
    )
