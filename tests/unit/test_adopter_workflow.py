"""The workflow an adopter copies (docs/workflows/retrieval-gate.yml): this repository's own
eval.yml also lints, builds and tests this package (`pip install -e '.[test]'` of a project that
is not theirs), so README's step 5 points to this one. Its required check and its comment are
eval.yml's, step for step (which test_pull_request_bypasses.py runs on a real repository); each
of its jobs installs the package with the `gate` extra; actionlint finds nothing in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from test_workflow import assert_actionlint_clean

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "docs" / "workflows" / "retrieval-gate.yml"
WORKFLOW = ROOT / ".github" / "workflows" / "eval.yml"


def _jobs(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"]


def _step(jobs: dict[str, Any], job: str, name: str) -> dict[str, Any]:
    (step,) = [s for s in jobs[job]["steps"] if s.get("name") == name]
    return step


def test_the_adopters_required_check_and_comment_are_the_repositorys_own() -> None:
    mine, theirs = _jobs(WORKFLOW), _jobs(TEMPLATE)
    assert set(theirs) == {"gate", "verdict", "comment"}
    for job, name in [
        ("verdict", "Gate against the base branch"),
        ("comment", "Write or edit the pull request's gate comment"),
    ]:
        assert _step(theirs, job, name) == _step(mine, job, name), (job, name)
    assert theirs["comment"]["permissions"] == mine["comment"]["permissions"] == {"pull-requests": "write"}
    assert theirs["comment"]["if"] == mine["comment"]["if"]


def test_each_job_of_the_adopters_workflow_installs_the_package_with_the_gate_extra() -> None:
    for job, spec in _jobs(TEMPLATE).items():
        runs = [s["run"] for s in spec["steps"] if "run" in s and "pip install" in s["run"]]
        if job == "comment":
            assert runs == []  # it only reads the verdict job's artifact
            continue
        assert len(runs) == 1, job
        assert "'retrieval-regression[gate] @ " in runs[0], job
        assert "'.[" not in runs[0], job  # this repository's own extras


def test_actionlint_reports_nothing_in_the_adopters_workflow() -> None:
    assert_actionlint_clean(TEMPLATE)


def test_the_readme_and_the_adoption_page_point_to_the_adopters_workflow() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    adopting = (ROOT / "docs" / "adopting.md").read_text(encoding="utf-8")
    step = readme.split("**5. Gate every pull request**", 1)[1].split("\n\n", 1)[0]
    assert "docs/workflows/retrieval-gate.yml" in step
    assert "copy `.github/workflows/eval.yml`" not in step
    assert "docs/workflows/retrieval-gate.yml" in adopting.split("In another repository:", 1)[1]
