"""Files that several NPU Studio processes write at once (the app, a second window, CLI commands): the
benchmark history, the settings, the model library's own files. The one mechanism for all of them:

- `locked(path)`: an exclusive lock across processes *and* threads, held while a writer reads, changes
  and writes the file, so that no writer works from a copy another one has just replaced. The lock is
  `flock` on POSIX and `msvcrt.locking` on Windows, on a hidden lock file beside the data
  (`.NAME.lock`, never deleted: deleting a lock file lets two writers lock two different files). Both
  kinds are released by the system when a process dies, so a killed writer never leaves a stale lock.
  A lock not free after `timeout` seconds is a `StorageError`, not a hang.
- `write_atomically(path, data)`: a temporary file with a unique name in the same folder (never a fixed
  `.tmp`, which two writers would share), flushed and synced, then `os.replace`: a reader sees the old
  file or the new one, never half of one. Temporary files a killed writer left are removed later.
- `update_json(path, change)`: the read-change-write of a JSON object under the lock.

Readers need no lock: every write is a replace (or, for the history, an append under the lock).

Hand-written rather than the `filelock` package: the part used here is these few system calls, while
filelock 4 is some 16,000 lines (leases, soft and read-write locks, asyncio) and would become a
dependency of the app itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engines import jsonfile
from engines.errors import StorageError

LOCK_TIMEOUT = 30.0  # a writer holds a lock for milliseconds; this long means a process is stuck
STALE_TMP_SECONDS = 60.0  # a temporary file older than this was left by a killed writer


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


if sys.platform == "win32":  # pragma: no cover - exercised on Windows
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    _OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOINHERIT", 0)
else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    _OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


@contextlib.contextmanager
def locked(path: str | os.PathLike[str], *, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the exclusive lock of `path` (not reentrant: a holder must not lock the same path again).
    OSError when the lock file cannot be created (a read-only folder); StorageError after `timeout`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(target), _OPEN_FLAGS, 0o644)
    try:
        deadline = time.monotonic() + timeout
        pause = 0.001
        while not _try_lock(fd):
            if time.monotonic() > deadline:
                raise StorageError(
                    f"{target} is being written by another NPU Studio process that has not finished in "
                    f"{timeout:.0f} s.",
                    "Close the other NPU Studio windows or commands (or end the one that hangs) and try again.",
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove_stale_tmp_files(path: Path, keep: str) -> None:
    now = time.time()
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        if tmp.name == keep:
            continue
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                tmp.unlink()


def write_atomically(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` in one step (unique temporary file, fsync, `os.replace`). OSError on
    failure, with nothing left behind and the old file untouched. `mode`: the new file's permissions
    (default: 0600, private to the user)."""
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if mode is not None:
            os.chmod(tmp_name, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(target.parent)
    _remove_stale_tmp_files(target, keep=Path(tmp_name).name)


def set_aside_name(path: Path, tag: str = "bad") -> Path:
    """A free name `NAME.<tag>-<time>` (with a counter when taken) beside `path`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.{tag}-{stamp}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{tag}-{stamp}-{n}")
        n += 1
    return candidate


def set_aside(path: Path, tag: str = "bad") -> Path:
    """Rename a damaged file to `NAME.<tag>-<time>` (a new name each time) and return the new path."""
    candidate = set_aside_name(path, tag)
    os.replace(path, candidate)
    return candidate


def update_json(
    path: str | os.PathLike[str],
    change: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    max_bytes: int = jsonfile.DEFAULT_MAX_BYTES,
    mode: int | None = 0o644,
) -> dict[str, Any]:
    """Under the lock: read the JSON object at `path` ({} when missing; a damaged file is set aside, not
    lost), apply `change`, write the result atomically and return it. OSError or StorageError on failure."""
    target = Path(path)
    with locked(target):
        try:
            current = jsonfile.read_object(target, max_bytes=max_bytes)
        except jsonfile.JsonFileError as exc:
            if exc.kind == "unreadable":
                raise StorageError(f"{target} cannot be read: {exc.detail}.") from None
            if not exc.missing:
                set_aside(target)
            current = {}
        new = change(current)
        write_atomically(target, (json.dumps(new, ensure_ascii=False, indent=1) + "\n").encode("utf-8"), mode=mode)
        return new
