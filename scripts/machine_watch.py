"""What the rest of the machine did while a measured command ran: the CPU other processes took and
the CPU the host stole from this virtual machine (Linux, from /proc).

A measurement's times are an idle machine's only when both are small. The run's own processes are
told apart by descent: this process becomes a child subreaper, so what the run starts stays below it
even when a parent exits before its child (`ray start`, `pg_ctl`), and a process outside that tree
is another's. Kernel threads are the machine's own work, much of it the run's I/O: not counted.
Sampled every half second, so a process outside the tree that lives less than that is missed; on an
idle machine there are none worth a figure.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

PROC = Path("/proc")
_PR_SET_CHILD_SUBREAPER = 36
_KERNEL_THREADS = 2  # kthreadd: the parent of every kernel thread
_HZ = os.sysconf("SC_CLK_TCK")  # /proc's unit of CPU time


def machine_cpu(stat: str) -> tuple[float, float]:
    """The whole machine's busy and stolen CPU-seconds since boot, from /proc/stat's text."""
    fields = [int(n) for n in stat.split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq) / _HZ, steal / _HZ


def _machine_now() -> tuple[float, float]:
    return machine_cpu((PROC / "stat").read_text(encoding="utf-8"))


def process_line(line: str) -> tuple[int, int, int, float]:
    """(pid, parent pid, start tick, CPU-seconds) from one /proc/PID/stat line; the command name
    in parentheses may hold spaces and parentheses itself, so the fields are counted after it."""
    pid = int(line.split(" (", 1)[0])
    rest = line.rsplit(") ", 1)[1].split()
    # After the name: state(0) ppid(1) ... utime(11) stime(12) ... starttime(19).
    return pid, int(rest[1]), int(rest[19]), (int(rest[11]) + int(rest[12])) / _HZ


def processes(proc: Path = PROC) -> dict[tuple[int, int], tuple[int, float]]:
    """Every process now: (pid, start tick), which names one process even when a pid is reused,
    to (parent pid, CPU-seconds)."""
    table = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            pid, parent, started, cpu = process_line((entry / "stat").read_text(encoding="utf-8", errors="replace"))
        except (OSError, IndexError, ValueError):
            continue  # it ended while being read
        table[(pid, started)] = (parent, cpu)
    return table


def outside(table: Mapping[tuple[int, int], tuple[int, float]], root: int) -> set[tuple[int, int]]:
    """The processes of `table` that are neither below `root` nor kernel threads."""
    parents = {pid: parent for (pid, _), (parent, _) in table.items()}

    def below_root(pid: int) -> bool:
        seen = set()
        while pid not in seen and pid > 1:
            if pid == root:
                return True
            seen.add(pid)
            pid = parents.get(pid, 0)
        return False

    return {
        key
        for key, (parent, _) in table.items()
        if key[0] != _KERNEL_THREADS and parent != _KERNEL_THREADS and not below_root(key[0])
    }


@dataclass(frozen=True)
class Elsewhere:
    """CPU-seconds that went elsewhere while the command ran."""

    busy: float  # the whole machine's, the run's included
    others: float  # processes outside the run
    stolen: float  # taken by the host
    other_pids: frozenset[int] = frozenset()  # the processes outside the run it saw


class MachineWatch:
    """`with MachineWatch() as watch: run(...)`, then `watch.elsewhere`."""

    def __init__(self, every: float = 0.5) -> None:
        self._every = every
        self._stop = threading.Event()
        self._first: dict[tuple[int, int], float] = {}
        self._last: dict[tuple[int, int], float] = {}
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)
        self._machine = (0.0, 0.0)
        self.elsewhere = Elsewhere(0.0, 0.0, 0.0)

    def __enter__(self) -> MachineWatch:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot become a child subreaper")
        self._machine = _machine_now()
        self._sample(at_start=True)
        self._thread.start()
        return self

    def _sample(self, at_start: bool = False) -> None:
        table = processes()
        for key in outside(table, os.getpid()):
            # A process first seen after the start began during the run: all its CPU is the run's time.
            self._first.setdefault(key, table[key][1] if at_start else 0.0)
            self._last[key] = table[key][1]

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self._every):
            self._sample()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        busy, stolen = _machine_now()
        others = sum(self._last[key] - self._first[key] for key in self._last)
        pids = frozenset(pid for pid, _ in self._last)
        self.elsewhere = Elsewhere(busy - self._machine[0], others, stolen - self._machine[1], pids)
        _reap_orphans()


def _reap_orphans() -> None:
    """Reap the run's orphans that ended (they became this process's children); reaping only after
    the run, since a wait for any child meanwhile could take the run's own exit status."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
