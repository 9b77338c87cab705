"""FIXTURE: a throwaway adopter repository with a real base branch, and the workflow's required
check run on it as GitHub Actions runs it.

`PullRequest` makes the project of trust_project.py (one in-process retriever, no model), commits
it on `main`, pushes it to a bare `origin`, and checks out a pull request's branch `pr`. Its
`required_check()` runs the script of the workflow's "Gate against the base branch" step as it is
written in .github/workflows/eval.yml (bash -e, `BASE_REF=main`, `GITHUB_STEP_SUMMARY`), with
a `.venv/bin/activate` that puts this interpreter first on PATH: the same `git fetch`, the same
`python -m retrieval --gate` command line. That command runs in this process (`in_process`, the
default: the script's `python` is a shell function that hands its arguments over and returns the
exit status, so a check costs no interpreter start and import of the package), or as the script's
own process (`in_process=False`, which a few tests keep, for the step as GitHub runs it).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from made_once import made_once
from trust_project import git, make_project

from retrieval.cli import main
from retrieval.report.gate_summary import summary_failures

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "eval.yml"
STEP = "Gate against the base branch"


def workflow_step(name: str = STEP, job: str = "verdict") -> dict[str, Any]:
    """A step of the workflow's job, as eval.yml writes it (read again whenever the file changed)."""
    stat = WORKFLOW.stat()
    data = _workflow(stat.st_mtime_ns, stat.st_size)
    (step,) = [s for s in data["jobs"][job]["steps"] if s.get("name") == name]
    return copy.deepcopy(step)


@functools.lru_cache(maxsize=1)
def _workflow(mtime_ns: int, size: int) -> dict[str, Any]:
    """eval.yml parsed (about 50 ms of pure-Python YAML: once, not once per required check)."""
    data: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return data


@dataclass(frozen=True)
class Check:
    """What the required check gave: its exit status, its output, the job summary it wrote, and
    the failed items (name -> words) it printed and the summary listed."""

    status: int
    stdout: str
    stderr: str
    summary: str

    @property
    def printed(self) -> dict[str, str]:
        return dict(
            line.removeprefix("FAILED ").split(" - ", 1)
            for line in self.stdout.splitlines()
            if line.startswith("FAILED ")
        )

    @property
    def listed(self) -> dict[str, str]:
        return summary_failures(self.summary)


def publish(top: Path, origin: Path) -> None:
    """The project at `top` committed on `main`, pushed to a bare `origin`, and a pull request's
    branch `pr` checked out; the workflow's venv (this interpreter) and reports ignored."""
    (top / ".gitignore").write_text(".cache/\n__pycache__/\n.venv/\nreports/\n")
    activate = top / ".venv" / "bin" / "activate"
    activate.parent.mkdir(parents=True, exist_ok=True)
    activate.write_text(f'export PATH="{Path(sys.executable).parent}:$PATH"\n')
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "the gate, its baseline and its snapshots")
    git(top, "remote", "add", "origin", str(origin))
    git(top, "push", "-q", "origin", "main")
    git(top, "checkout", "-qb", "pr")


def required_check(folder: Path, top: Path, in_process: bool = True) -> Check:
    """The workflow's required step, run in `folder` as GitHub runs a `run:` script of a pull
    request; its `python -m retrieval` in this process unless `in_process` is False."""
    step = workflow_step()
    if not (folder / ".venv").exists():  # a monorepo's job installs in the project's folder
        shutil.copytree(top / ".venv", folder / ".venv")
    summary = top.parent / "step-summary.md"  # the runner's file, outside the repository
    summary.write_text("")
    env = {**os.environ, **step["env"], "BASE_REF": "main", "GITHUB_STEP_SUMMARY": str(summary)}
    env.pop("RETRIEVAL_PROFILE", None)
    command = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]]
    if not in_process:
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=600)
        return Check(done.returncode, done.stdout, done.stderr, summary.read_text())
    with tempfile.TemporaryDirectory(prefix="required-check-") as fifos:
        status, stdout, stderr = _served_in_process(command, folder, env, Path(fifos))
    return Check(status, stdout, stderr, summary.read_text())


# The script's `python`, a function: its arguments to the `call` FIFO, its status from `done`.
_PYTHON = 'python() {{ printf "%s\\0" "$@" > "{call}"; read -r status < "{done}"; return "$status"; }}\n'


def _served_in_process(command: list[str], folder: Path, env: Mapping[str, str], fifos: Path) -> tuple[int, str, str]:
    """Run the step's script with its `python` served in this process; its status and output."""
    call, done = fifos / "call", fifos / "done"
    os.mkfifo(call)
    os.mkfifo(done)
    script = _PYTHON.format(call=call, done=done) + command[-1]
    out_file, err_file = fifos / "stdout", fifos / "stderr"
    with out_file.open("w+") as out, err_file.open("w+") as err:
        shell = subprocess.Popen([*command[:-1], script], cwd=folder, env=dict(env), stdout=out, stderr=err, text=True)
        try:
            words = _called(call, shell)
            if words is not None:
                assert words[:2] == ["-m", "retrieval"], words  # the step's one command
                status, printed, said = _retrieval_here(words[2:], folder, env)
                out.flush()
                before = out_file.read_text()
                with done.open("w") as answer:
                    answer.write(f"{status}\n")
            shell.wait(timeout=600)
        finally:
            if shell.poll() is None:
                shell.kill()
                shell.wait()
    stdout, stderr = out_file.read_text(), err_file.read_text()
    if words is not None:  # the command's output where the script printed it
        stdout = before + printed + stdout[len(before) :]
        stderr += said
    return shell.returncode, stdout, stderr


def _called(call: Path, shell: subprocess.Popen[str]) -> list[str] | None:
    """The arguments the script's `python` was called with, or None if the script ended first."""
    reader = os.open(call, os.O_RDONLY | os.O_NONBLOCK)
    data = b""
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(reader, 65536)
            except BlockingIOError:  # the script is writing: the rest is coming
                time.sleep(0.001)
                continue
            if chunk:
                data += chunk
            elif data:  # the writer closed the FIFO: every argument is in
                return data.decode().split("\0")[:-1]
            elif shell.poll() is not None:
                return None
            else:
                time.sleep(0.001)
    finally:
        os.close(reader)
    raise TimeoutError("the required step never called python")


def _retrieval_here(args: list[str], folder: Path, env: Mapping[str, str]) -> tuple[int, str, str]:
    """`python -m retrieval ARGS` in `folder` with the step's environment, in this process."""
    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(env)
        with contextlib.chdir(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(args)
            except SystemExit as exc:  # argparse's refusal
                status = exc.code if isinstance(exc.code, int) else 2
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return status, out.getvalue(), err.getvalue()


def _made(folder: str) -> Path:
    """A folder holding `origin.git` and `work` as a new PullRequest in `folder` has them: made (the
    project, its gate run and its baseline, `publish`'s git calls) once per process, then copied."""

    def make(base: Path) -> None:
        root = base / "work" / folder if folder else base / "work"
        root.mkdir(parents=True)
        with contextlib.chdir(root):  # the fixture retriever reads ranks.json from the working directory
            make_project(root)
        publish(base / "work", base / "origin.git")
        _packed(base)

    return made_once("pull-request", folder, make)


def _packed(base: Path) -> None:
    for repository in (base / "work", base / "origin.git"):  # its objects in one pack: fewer files to copy
        git(repository, "repack", "-adq")
        git(repository, "prune-packed")


class PullRequest:
    """The adopter's repository, on the pull request's branch `pr` (see the module docstring)."""

    def __init__(self, base: Path, folder: str = "", made: Path | None = None) -> None:
        self.origin = base / "origin.git"
        self.top = base / "work"
        self.root = self.top / folder if folder else self.top
        # A copy of the one made for this process: the same files, commits and refs, and its
        # remote this copy's `origin` (the one path the repository holds).
        made = made or _made(folder)
        inert = shutil.ignore_patterns("*.sample")  # git's sample hooks, which never run
        shutil.copytree(made / "origin.git", self.origin, symlinks=True, ignore=inert)
        shutil.copytree(made / "work", self.top, symlinks=True, ignore=inert)
        config = self.top / ".git" / "config"
        config.write_text(config.read_text().replace(str(made / "origin.git"), str(self.origin)))

    @classmethod
    def from_main(cls, base: Path, message: str, change: Callable[[PullRequest], None]) -> PullRequest:
        """A new pull request whose `main` has `change` (`on_main(message)`): made once per process for
        this message (one change per message), then copied as the plain one is."""

        def make(folder: Path) -> None:
            made = cls(folder)
            with made.on_main(message):
                change(made)
            _packed(folder)

        return cls(base, made=made_once("pull-request-on-main", message, make))

    @contextlib.contextmanager
    def on_main(self, message: str, *args: str) -> Iterator[None]:
        """A change made on `main` (before the pull request), its baseline made again (`--gate
        --update-baseline ARGS`), pushed; the pull request's branch then starts from it."""
        git(self.top, "checkout", "-q", "main")
        yield
        shutil.rmtree(self.root / "baselines")
        done = self.gate("--update-baseline", *args)
        assert done.returncode == 0, done.stdout + done.stderr
        self.commit(message)
        git(self.top, "push", "-q", "origin", "main")
        git(self.top, "checkout", "-qB", "pr", "main")  # `pr` reset to main, and checked out

    def configure(self, text: str) -> None:
        """Lines added to the project file (retrieval.toml), as the pull request edits it."""
        with (self.root / "retrieval.toml").open("a") as f:
            f.write(text)

    def fresh_baseline(self) -> None:
        """The pull request's own baseline made again from nothing: what it does to get around its own gate."""
        shutil.rmtree(self.root / "baselines")
        done = self.gate("--update-baseline")
        assert done.returncode == 0, done.stdout + done.stderr

    def commit(self, message: str) -> None:
        git(self.top, "add", "-A")
        git(self.top, "commit", "-qm", message, "--allow-empty")

    def run(self, *args: str, where: Path | None = None) -> subprocess.CompletedProcess[str]:
        """A command in the project's folder, as the developer runs it."""
        return subprocess.run(
            list(args), cwd=where or self.root, capture_output=True, text=True, check=False, timeout=300
        )

    def gate(self, *args: str, where: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`python -m retrieval --gate ARGS` as the developer runs it in the project's folder; in this
        process (the required check alone runs as the workflow does, in its own)."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.chdir(where or self.root), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(["--gate", *args])
        return subprocess.CompletedProcess(
            ["python", "-m", "retrieval", "--gate", *args], status, out.getvalue(), err.getvalue()
        )

    def accept(self, reason: str) -> subprocess.CompletedProcess[str]:
        """The drops recorded with a reason against the base branch, as the failure says to, and committed."""
        done = self.gate("--update-baseline", "--allow-regression", reason, "--baseline-ref", "main")
        self.commit(f"accept: {reason}")
        return done

    def required_check(self, where: Path | None = None, in_process: bool = True) -> Check:
        """The workflow's required step, run as GitHub runs a `run:` script of a pull request
        (its `python -m retrieval` in this process unless `in_process` is False)."""
        return required_check(where or self.root, self.top, in_process)
