"""A throwaway PostgreSQL cluster for tests and for recording: a development utility.

PostgreSQL refuses to run as root, and the tests and CI run as root. `start_cluster`
therefore creates a temporary folder owned by an unprivileged user (`nobody`) and runs
`initdb` and `pg_ctl start` as that user (the current user when it is not root). The
server listens only on a Unix socket inside that folder (listen_addresses = ''), with
trust authentication, so nothing is reachable from the network; `Cluster.stop` stops
it and removes the folder. Every wait is bounded.

As a command, it runs another command with RETRIEVAL_PG_DSN pointing at a fresh cluster,
then stops it:

    python -m retrieval.adapters.pg_cluster -- python -m retrieval --methods bm25,retrieval.adapters.postgres:factory
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cluster", "ClusterError", "find_binaries", "start_cluster", "throwaway_cluster", "unavailable_reason"]

# The unprivileged account the server runs as when we are root.
SERVER_USER = "nobody"
# Bounds, in seconds: pg_ctl's own wait for the server to accept connections, and a
# ceiling on every subprocess (initdb takes about 1 s here).
START_WAIT = 20
COMMAND_TIMEOUT = 60
# Throwaway data: no need to survive a crash, so skip every fsync.
SERVER_OPTIONS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


class ClusterError(RuntimeError):
    """The throwaway cluster could not be started; the message says which step failed and why."""


@dataclass(frozen=True)
class Cluster:
    """A running throwaway server: its folder (which holds the socket) and its connection string."""

    folder: Path
    bin_dir: Path
    user: str | None

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    @property
    def dsn(self) -> str:
        """A libpq connection string to the cluster's `postgres` database over its Unix socket."""
        return f"host={_conninfo_value(str(self.folder))} dbname=postgres user=postgres"

    def stop(self) -> None:
        """Stop the server (fast shutdown, bounded; killed if it does not stop) and remove the folder."""
        try:
            _run_as(self, [str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "10", "stop"])
        except ClusterError:
            _kill_postmaster(self.data)
        shutil.rmtree(self.folder, ignore_errors=True)


def _conninfo_value(value: str) -> str:
    """A libpq conninfo value, quoted when it holds a space, a quote or a backslash."""
    if value and not any(c in value for c in " '\\"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def find_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl: from PATH, else the newest /usr/lib/postgresql/*/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version(p.parent.name))
    for folder in reversed(candidates):
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def unavailable_reason() -> str | None:
    """Why a throwaway cluster cannot start on this machine, or None when it can (a cheap check)."""
    if find_binaries() is None:
        return "PostgreSQL is not installed (no initdb/pg_ctl on PATH nor under /usr/lib/postgresql/*/bin)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no unprivileged user {SERVER_USER!r} to run PostgreSQL as"
    return None


def start_cluster(parent: str | Path | None = None) -> Cluster:
    """Create, initialise and start a throwaway cluster in a new folder under `parent` (the
    system temporary folder by default, which must be reachable by the server user).

    Raises ClusterError when PostgreSQL is unavailable or a step fails; nothing is left behind.
    """
    reason = unavailable_reason()
    if reason:
        raise ClusterError(reason)
    bin_dir = find_binaries()
    assert bin_dir is not None
    user = SERVER_USER if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="pg-", dir=parent))
    cluster = Cluster(folder, bin_dir, user)
    if user:
        account = pwd.getpwnam(user)
        os.chown(folder, account.pw_uid, account.pw_gid)
    try:
        _run_as(
            cluster,
            [
                str(bin_dir / "initdb"),
                "-D",
                str(cluster.data),
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                # C.UTF-8: the text search parser then lowercases and classifies accented letters.
                "--locale=C.UTF-8",
                "--no-sync",
                "--no-instructions",
            ],
        )
        # listen_addresses='' : no TCP at all; the socket lives in the cluster's own folder.
        options = f"-c listen_addresses='' -k '{folder}' {SERVER_OPTIONS}"
        start = ["-D", str(cluster.data), "-l", str(cluster.log), "-o", options, "-w", "-t", str(START_WAIT), "start"]
        _run_as(cluster, [str(bin_dir / "pg_ctl"), *start])
    except ClusterError as exc:
        log = _tail(cluster.log)
        _kill_postmaster(cluster.data)
        shutil.rmtree(folder, ignore_errors=True)
        raise ClusterError(f"{exc}{'; server log: ' + log if log else ''}") from None
    return cluster


@contextlib.contextmanager
def throwaway_cluster(parent: str | Path | None = None) -> Iterator[Cluster]:
    """A started cluster for the duration of a `with` block, stopped and removed afterwards."""
    cluster = start_cluster(parent)
    try:
        yield cluster
    finally:
        cluster.stop()


def _run_as(cluster: Cluster, command: Sequence[str]) -> None:
    """Run a PostgreSQL program as the cluster's user; ClusterError with its last output line on failure."""
    account = pwd.getpwnam(cluster.user) if cluster.user else None
    # A minimal environment: no PG* variable of ours leaks into the server.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "HOME": str(cluster.folder)}
    try:
        done = subprocess.run(
            command,
            cwd=cluster.folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
            # As root: the unprivileged user, its group, and none of root's supplementary groups.
            user=account.pw_uid if account else None,
            group=account.pw_gid if account else None,
            extra_groups=[] if account else None,
        )
    except subprocess.TimeoutExpired:
        raise ClusterError(f"{Path(command[0]).name} did not finish within {COMMAND_TIMEOUT} s") from None
    except OSError as exc:
        raise ClusterError(f"cannot run {Path(command[0]).name}: {exc}") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise ClusterError(f"{Path(command[0]).name} failed (exit {done.returncode}): {lines[-1] if lines else ''}")


def _kill_postmaster(data: Path) -> None:
    """Last resort when pg_ctl cannot stop it: kill the server we started, by the pid in its pid file."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def main(argv: Sequence[str] | None = None) -> int:
    """Run `argv` (after `--`) with RETRIEVAL_PG_DSN set to a fresh cluster; return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print("usage: python -m retrieval.adapters.pg_cluster -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        with throwaway_cluster() as cluster:
            print(f"pg_cluster: RETRIEVAL_PG_DSN={cluster.dsn}", file=sys.stderr)
            return subprocess.run(args, env={**os.environ, "RETRIEVAL_PG_DSN": cluster.dsn}, check=False).returncode
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
