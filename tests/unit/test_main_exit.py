"""`python -m retrieval` ends the process without the interpreter's teardown, as its exit would
otherwise end it: the atexit functions run, the standard streams are flushed, the code is kept;
with another thread alive the interpreter's own exit waits for it, as before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from demo_fixture import DEMO_DATA

_SCRIPT = """
import atexit, sys, threading
from retrieval.__main__ import _exit_without_teardown
atexit.register(lambda: sys.stdout.write(" atexit"))
done = threading.Event()
if sys.argv[1] == "thread":  # alive until the exit above has returned (a wait of 0.5 s before)
    threading.Thread(target=done.wait).start()
sys.stdout.write("unflushed")
sys.stderr.write("err")
_exit_without_teardown(3)
sys.stdout.write(" interpreter")
done.set()
"""


def _run(case: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SCRIPT, case], capture_output=True, text=True, timeout=60)


def test_the_exit_runs_atexit_flushes_and_keeps_the_code() -> None:
    done = _run("alone")
    assert (done.returncode, done.stdout, done.stderr) == (3, "unflushed atexit", "err")


def test_with_another_thread_alive_the_interpreter_exits_as_before() -> None:
    done = _run("thread")
    assert (done.returncode, done.stdout, done.stderr) == (0, "unflushed interpreter atexit", "err")


def test_the_command_s_report_and_exit_code_are_whole(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "retrieval", "--dataset", str(DEMO_DATA), "--methods", "bm25"]
    done = subprocess.run([*command, "--format", "json"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scores"]["bm25"]["per_question"]
    bad = subprocess.run([*command, "--k", "0"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.startswith("error: ")
