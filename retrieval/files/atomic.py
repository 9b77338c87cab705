"""Writing files so that a crash leaves the old content or the new, never a part of either.

`atomic_write` replaces one file. `commit_files` replaces files of several folders (a baseline
and its ranking snapshots) as one set, through a journal that the next run of any kind reads
to put the old set back (`recover_files`). `replace_files` replaces a set of files in one folder
(a profile's cassettes and their metadata) as one: the new set is built in a sibling folder,
then the two folders are exchanged in one step (Linux `renameat2(RENAME_EXCHANGE)`), or, where
that is unavailable, by two renames with a rollback. `recover_directory` finishes or undoes a
swap a killed process left half done, and removes the staging folders and temporary files of
processes that no longer run.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "STALE_SECONDS",
    "AtomicSetError",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "clean_stale",
    "commit_files",
    "recover_directory",
    "recover_files",
    "refuse_link",
    "replace_files",
    "staging_directory",
]

# A leftover whose process id cannot be checked (or could have been reused) is stale after a day.
STALE_SECONDS = 24 * 3600


class AtomicSetError(OSError):
    """A set of files could not be replaced; the message says which set is in place."""


def _read_umask() -> int:
    # os.umask can only be read by setting it; do it once, at import, before any worker thread.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """Call `write` on a temporary file beside `path`, flush it to disk, then rename it over `path`.

    A path that is not a regular file (`/dev/null`, `/dev/stdout`, a named pipe) is written
    through, and a symbolic link's target is the file replaced. The file gets the permissions
    a plain `open` would give (mkstemp's 0600 would hide a
    committed baseline from other users); on any error the temporary file is removed. The
    temporary file's name carries the process id, so `clean_stale` can tell a killed writer's
    leftover from a concurrent writer's file in progress.
    """
    target = Path(path)
    try:
        special = not stat.S_ISREG(os.stat(target).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        special = False
    if special:
        # /dev/null, /dev/stdout, a named pipe: renaming over one would replace it with a file
        # (as root, /dev/null for the whole machine). Written through; no atomicity to keep.
        with open(target, "wb") as handle:
            write(handle)
        return
    if target.is_symlink():
        target = target.resolve()  # the file behind the link is replaced, the link kept
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.{os.getpid()}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """`atomic_write` of `data`."""

    def write(handle: BinaryIO) -> None:
        handle.write(data)

    atomic_write(path, write)


def atomic_write_text(path: str | Path, text: str) -> None:
    """`atomic_write` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


# ".<target>.<pid>-<random>.tmp" (atomic_write), ".<target>.staging-<pid>-<random>" (staging_directory),
# ".<target>.old-<pid>-<random>" (a swap in progress).
_PID_IN_NAME = re.compile(r"\.(?:staging-|old-)?(\d+)-[A-Za-z0-9_]+(?:\.tmp)?$")


def _is_stale(path: Path, now: float) -> bool:
    """A leftover is stale when the process named in it is gone, or when it is older than a day."""
    try:
        age = now - path.lstat().st_mtime
    except FileNotFoundError:
        return False
    if age > STALE_SECONDS:
        return True
    match = _PID_IN_NAME.search(path.name)
    return match is not None and not _pid_running(int(match.group(1)))


def _mtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except FileNotFoundError:
        return 0.0


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def clean_stale(directory: str | Path, name: str) -> list[Path]:
    """Remove the leftovers of killed runs beside `directory/name`: temporary files of
    `atomic_write` and staging folders of `replace_files` / `staging_directory`. Returns them."""
    folder = Path(directory)
    if not folder.is_dir():
        return []
    now = time.time()
    removed = []
    for path in folder.glob(f".{name}.*"):
        # A lock file is never a leftover: removing one another process holds would let a third
        # take the lock at the same time. A journal is read by recover_files before it goes.
        if path.suffix in (".lock", ".journal"):
            continue
        if _is_stale(path, now):
            _remove(path)
            removed.append(path)
    return removed


def refuse_link(target: str | Path) -> None:
    """AtomicSetError (one line) when folder `target` is a symbolic link. A folder replaced as a
    whole is swapped with its staging folder: the link would be swapped away and left, pointing
    wherever it points, under a staging name; staging beside its target instead would write
    wherever that is. Neither is done: the folder must be a folder (a link may name one above it)."""
    target = Path(target)
    if target.is_symlink():
        raise AtomicSetError(
            errno.ELOOP,
            f"a symbolic link (to {os.readlink(target)}), and its files are replaced as a set by swapping the "
            "folder, which would replace the link: make it a folder (a link may name the folder above it)",
            str(target),
        )


def staging_directory(target: str | Path) -> Path:
    """A new, empty folder beside `target` (same file system, so its files can be renamed into
    place), named after the process so that a killed run's folder is found and removed later.
    `target` may not be a symbolic link (`refuse_link`)."""
    target = Path(target)
    refuse_link(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.staging-{os.getpid()}-"))


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


@functools.cache
def _renameat2() -> Any:
    """libc's renameat2, or None. Looked up once, in the process's own symbols: find_library
    would run `ldconfig -p` in a subprocess at every swap."""
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except OSError:
        return None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    # Kernel or file system without the flag: fall back to renames. Anything else is a real error.
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def recover_directory(target: str | Path) -> list[Path]:
    """Undo a swap a killed process left half done (the folder renamed away, the new one not yet
    in place: the old set is put back), then remove stale leftovers. Returns what was removed."""
    target = Path(target)
    if not target.exists() and target.parent.is_dir():
        # A dead process's, or this one's (whose swap failed to roll back): another live process
        # is between its two renames and puts its own back.
        now = time.time()
        olds = [p for p in target.parent.glob(f".{target.name}.old-{os.getpid()}-*") if p.is_dir()] or [
            p for p in target.parent.glob(f".{target.name}.old-*") if _is_stale(p, now)
        ]
        if olds:
            try:
                os.rename(max(olds, key=_mtime), target)
            except FileNotFoundError:
                pass  # another run put it back first
            except OSError:
                if not target.exists():
                    raise
    removed = clean_stale(target.parent, target.name)
    if target.exists():
        # Once the target is in place an ".old" folder is only the previous set, never needed again.
        for old in target.parent.glob(f".{target.name}.old-*"):
            _remove(old)
            removed.append(old)
    return removed


def replace_files(target: str | Path, files: Mapping[str, bytes], *, keep: bool = True) -> None:
    """Make folder `target` hold `files` (name -> content), all of them or none of them.

    With `keep`, the files of `target` not in `files` are carried over. On any error the
    previous folder is in place and no staging folder is left behind; the error says so. A
    `target` that is a symbolic link is refused before anything is written (`refuse_link`).
    """
    target = Path(target)
    refuse_link(target)
    recover_directory(target)
    new = staging_directory(target)
    try:
        if keep and target.is_dir():
            for path in target.iterdir():
                if path.is_file() and path.name not in files and not path.name.startswith("."):
                    shutil.copy2(path, new / path.name)
        for name, data in files.items():
            with open(new / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(new / name, 0o666 & ~_UMASK)
        os.chmod(new, 0o777 & ~_UMASK)
        _fsync_directory(new)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    _swap(target, new)


def _swap(target: Path, new: Path) -> None:
    if not target.exists():
        try:
            os.rename(new, target)
        except BaseException:
            shutil.rmtree(new, ignore_errors=True)
            raise
        _fsync_directory(target.parent)
        return
    try:
        exchanged = _exchange(new, target)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    if exchanged:
        # `new` now holds the previous set.
        shutil.rmtree(new, ignore_errors=True)
        _fsync_directory(target.parent)
        return
    old = target.parent / f".{target.name}.old-{os.getpid()}-{new.name.rsplit('-', 1)[-1]}"
    try:
        os.rename(target, old)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    try:
        os.rename(new, target)
    except BaseException as exc:
        try:
            os.rename(old, target)
        except OSError as undo:
            shutil.rmtree(new, ignore_errors=True)
            # The previous set is intact under `old`; recover_directory puts it back on the next run.
            raise AtomicSetError(
                f"{target}: the new files could not be moved into place ({exc}) nor the previous ones put "
                f"back ({undo}); the previous set is intact in {old} and the next run restores it."
            ) from exc
        shutil.rmtree(new, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    _fsync_directory(target.parent)


def _journal_entries(journal: Path) -> list[tuple[Path, Path, Path | None]]:
    import json

    data = json.loads(journal.read_text(encoding="utf-8"))
    return [(Path(t), Path(tmp), Path(b) if b else None) for t, tmp, b in data["files"]]


def recover_files(journal: str | Path, targets: Sequence[str | Path] = ()) -> list[Path]:
    """Put back the set a failed or killed `commit_files` left half replaced (its journal names
    each file's backup), then remove the temporary files and backups of processes that no longer
    run beside `targets`. Call it under the lock the writers hold. Returns what was restored or removed."""
    journal = Path(journal)
    touched: list[Path] = []
    if journal.exists():
        for target, tmp, backup in _journal_entries(journal):
            if backup is not None and backup.exists():
                os.replace(backup, target)  # the old file, whether or not the new one got in
                backup.unlink(missing_ok=True)  # still there when both named the same file
                touched.append(target)
            elif backup is None:
                target.unlink(missing_ok=True)  # it did not exist before the commit
                touched.append(target)
            tmp.unlink(missing_ok=True)
        journal.unlink()
        _fsync_directory(journal.parent)
    for target in map(Path, targets):
        touched += clean_stale(target.parent, target.name)
    return touched


def _write_beside(target: Path, data: bytes) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.{os.getpid()}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def commit_files(files: Mapping[Path, bytes], journal: str | Path) -> None:
    """Replace every file of `files` (path -> content) or none of them, across folders.

    Each new file is written and flushed beside its target first; a hard link keeps each old
    file; the journal lists them; then each is renamed into place. On an error the old files
    are put back before the error is raised; if that fails too (or the process is killed), the
    journal stays and `recover_files`, which every run calls first, puts the old set back.
    The caller holds the lock that serialises writers of these files.
    """
    import json

    journal = Path(journal)
    entries: list[tuple[Path, Path, Path | None]] = []
    try:
        for target, data in files.items():
            try:
                tmp = _write_beside(target, data)
            except OSError as exc:
                exc.filename = exc.filename or str(target)  # a full disk names the file it stopped
                raise
            backup = None
            if target.exists():
                backup = target.parent / f".{target.name}.old-{os.getpid()}-{tmp.stem.rsplit('-', 1)[-1]}"
                try:
                    os.link(target, backup)  # instant, and no space needed
                except OSError:
                    shutil.copy2(target, backup)  # a file system without hard links
            entries.append((target, tmp, backup))
        try:
            atomic_write_text(
                journal,
                json.dumps({"pid": os.getpid(), "files": [[str(t), str(p), b and str(b)] for t, p, b in entries]}),
            )
        except OSError as exc:
            exc.filename = exc.filename or str(journal)
            raise
    except BaseException:
        for _, tmp, backup in entries:
            tmp.unlink(missing_ok=True)
            if backup is not None:
                backup.unlink(missing_ok=True)
        raise
    try:
        for target, tmp, _ in entries:
            os.replace(tmp, target)
        for folder in {t.parent for t, _, _ in entries}:
            _fsync_directory(folder)
    except BaseException as exc:
        try:
            recover_files(journal)
        except OSError as undo:
            raise AtomicSetError(
                f"{entries[0][0]}: the new files could not be put in place ({exc}) nor the previous ones put back "
                f"({undo}); the previous set is kept beside them and the next run of any kind restores it."
            ) from exc
        raise
    journal.unlink()  # the commit point: from here the new set is the one kept
    for _, _, backup in entries:
        if backup is not None:
            backup.unlink(missing_ok=True)
