"""Hidden work folders (an import being copied, a model being quantized) that a killed process cannot
leave behind for long.

A work folder's name carries the id of the process that made it: `.import-NAME-<pid>-<random>`. The
process removes it in a `finally` (SIGTERM and SIGINT unwind the stack in the CLI, see app/cli.py).
When the process was killed outright (SIGKILL, power loss), the next run's `sweep` removes every work
folder whose process is gone, at once; a folder without a readable id (an older version's) only after
`max_age`, because its owner might still be running.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

STALE_AGE_SECONDS = 6 * 3600
_PID = re.compile(r"(?:^|[-.])p(\d{1,10})-[^-]+$")  # the pid, then mkdtemp's random part (no '-')


def make(parent: Path, prefix: str) -> Path:
    """A new empty work folder `parent/<prefix>p<pid>-<random>`."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}p{os.getpid()}-", dir=parent))


def owner(name: str, prefix: str) -> int | None:
    """The id of the process that made work folder `name`, if its name says (`...p<pid>-<random>`)."""
    match = _PID.search(name[len(prefix) :]) if name.startswith(prefix) else None
    return int(match.group(1)) if match else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        import psutil

        return bool(psutil.pid_exists(pid))
    except ImportError:  # pragma: no cover - psutil is a dependency
        return True


def sweep(parent: Path, prefixes: tuple[str, ...], max_age: float = STALE_AGE_SECONDS) -> list[Path]:
    """Remove work folders under `parent` (names starting with one of `prefixes`) left by dead processes."""
    removed: list[Path] = []
    try:
        children = list(parent.iterdir())
    except OSError:
        return removed
    now = time.time()
    for path in children:
        prefix = next((p for p in prefixes if path.name.startswith(p)), None)
        if prefix is None:
            continue
        with contextlib.suppress(OSError):
            if path.is_symlink() or not path.is_dir():
                continue
            pid = owner(path.name, prefix)
            dead = pid is not None and not _alive(pid)
            if dead or now - path.stat().st_mtime > max_age:
                shutil.rmtree(path)
                removed.append(path)
    return removed
