"""scripts/machine_watch.py: which processes are the measured run's and which are other work, from
FIXTURE /proc lines and from real processes (a subreaper's orphan, a process beside the run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from script_modules import SCRIPTS, load_script

machine_watch = load_script("machine_watch")


def test_the_machine_and_a_process_are_read_from_their_proc_lines() -> None:
    hz = os.sysconf("SC_CLK_TCK")
    # FIXTURE: /proc/stat's first line, user nice system idle iowait irq softirq steal guest guest_nice.
    stat = f"cpu  {30 * hz} {hz} {5 * hz} 999 4 {hz} {hz} {2 * hz} 0 0\ncpu0 1 2 3\n"
    assert machine_watch.machine_cpu(stat) == (38.0, 2.0)
    # FIXTURE: a /proc/PID/stat line whose command name holds ") (" and spaces.
    fields = ["S", "41"] + ["0"] * 9 + [str(3 * hz), str(hz)] + ["0"] * 6 + ["777"]
    line = f"4242 (a) (b c) {' '.join(fields)} 0 0\n"
    assert machine_watch.process_line(line) == (4242, 41, 777, 4.0)


def test_other_processes_are_those_neither_below_the_run_nor_kernel_threads() -> None:
    # FIXTURE: (pid, start tick) -> (parent pid, CPU-s); the run's root is 100.
    table = {
        (1, 0): (0, 1.0),  # init: another's
        (2, 0): (0, 0.0),  # kthreadd and a kernel thread: the machine's own
        (7, 5): (2, 3.0),
        (100, 9): (1, 0.5),  # the root, its child, its grandchild: the run's
        (101, 9): (100, 2.0),
        (102, 9): (101, 2.0),
        (200, 9): (1, 4.0),  # beside the run: another's
        (201, 9): (200, 1.0),
    }
    assert machine_watch.outside(table, 100) == {(1, 0), (200, 9), (201, 9)}


WATCHED = """
import json, subprocess, sys
sys.path.insert(0, sys.argv[1])
from machine_watch import MachineWatch
with MachineWatch(every=0.1) as watch:
    # The orphan's parent exits at once: it is the run's still, as the subreaper's child.
    subprocess.run(["bash", "-c", "(sleep 2 & echo $! > orphan); sleep 0.5"], check=True)
print(json.dumps(sorted(watch.elsewhere.other_pids)))
"""


def test_a_run_s_orphan_is_the_run_s_and_a_process_beside_it_is_another_s(tmp_path: Path) -> None:
    beside = subprocess.Popen(["sleep", "5"])
    try:
        done = subprocess.run(
            [sys.executable, "-c", WATCHED, str(SCRIPTS)], cwd=tmp_path, capture_output=True, text=True, timeout=30
        )
    finally:
        beside.kill()
        beside.wait()
    assert done.returncode == 0, done.stderr
    others = json.loads(done.stdout)
    orphan = int((tmp_path / "orphan").read_text())
    assert beside.pid in others and os.getpid() in others
    assert orphan not in others
