"""Hidden work folders (an import being copied, a model being quantized or removed, a model being compiled)
that a killed process cannot leave behind for long: the one rule for all of them.

A work folder's name says which process made it and when that process started:
`<prefix>p<pid>s<start>-<random>`, such as `.import-phi-p4242s1x9k2-ab12cd34` or
`.efficientnet-lite0-qdq.p4242s1x9k2-ab12cd34`. The process removes it in a `finally` (SIGTERM and
SIGINT unwind the stack in the CLI, see app/cli.py). When the process was killed outright (SIGKILL, power
loss), the next command that touches the folder sweeps every work folder whose process is gone: no process
has that id any more, or the one that has it started at another time (the id was reused), so a running
command's work folder is never taken. `sweep` finds them by that name, whatever their prefix, so every
kind of work is swept by the same rule. Names from before the start time was recorded (`p<pid>-`) are
judged by the id alone; names without an id (older versions) only once older than `max_age`, because
their owner might still be running; what a removal leaves (`.removing-*`: one rename, then a delete) is
garbage whoever made it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from functools import lru_cache
from pathlib import Path

STALE_AGE_SECONDS = 6 * 3600
LEGACY_PREFIXES = (".import-",)  # work folders named without their process before: swept when old
GARBAGE_PREFIXES = (".removing-",)  # a model being deleted: whatever is left of it is garbage
# The owner, then mkdtemp's random part (no '-'): "p<pid>-" or "p<pid>s<start>-".
_OWNER = re.compile(r"(?:^|[-.])p(\d{1,10})(?:s([0-9a-z]{1,16}))?-[^-]+$")


def make(parent: Path, prefix: str) -> Path:
    """A new empty work folder `parent/<prefix>p<pid>s<start>-<random>`."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=f"{prefix}{_me()}-", dir=parent))


def name(prefix: str) -> str:
    """A fresh work-folder name (for a folder that comes by a rename, such as a model being removed)."""
    import uuid

    return f"{prefix}{_me()}-{uuid.uuid4().hex[:8]}"


def _me() -> str:
    start = _start_token(os.getpid())
    return f"p{os.getpid()}" + (f"s{start}" if start else "")


def owner(name: str, prefix: str = "") -> int | None:
    """The id of the process that made work folder `name`, if its name says (`...p<pid>[s<start>]-<random>`)."""
    found = _owner(name, prefix)
    return found[0] if found else None


def _owner(name: str, prefix: str) -> tuple[int, str] | None:
    if not name.startswith(prefix):
        return None
    match = _OWNER.search(name[len(prefix) :])
    return (int(match.group(1)), match.group(2) or "") if match else None


def is_running(pid: int, start: str = "") -> bool:
    """Is the process that made a work folder still running? With `start` (the token its name recorded), a
    process that has the id now but started at another time is not it."""
    if pid == os.getpid():
        return not start or start == _start_token(pid)
    exists, now = _process(pid)
    if not exists:
        return False
    return not start or not now or now == start


def _process(pid: int) -> tuple[bool, str]:
    """(whether process `pid` exists, its start token or "" when it cannot be told)."""
    if sys.platform.startswith("linux"):
        token = _start_token(pid)
        return bool(token), token
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        return True, ""
    try:
        return True, _base36(int(psutil.Process(pid).create_time() * 100))
    except psutil.NoSuchProcess:
        return False, ""
    except psutil.Error:  # another user's process: it exists, its start time is not ours to read
        return True, ""


@lru_cache(maxsize=1)
def _own_start() -> str:
    return _read_start(os.getpid())


def _start_token(pid: int) -> str:
    """When process `pid` started, as a short token ("" when there is no such process or it cannot be told)."""
    return _own_start() if pid == os.getpid() else _read_start(pid)


def _read_start(pid: int) -> str:
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            return ""
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": the 3rd field on
        return _base36(int(fields[19])) if len(fields) > 19 else ""  # the 22nd: start time in clock ticks
    try:
        import psutil

        return _base36(int(psutil.Process(pid).create_time() * 100))
    except Exception:  # no psutil, no such process, no access: the id alone decides
        return ""


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if not number:
            return out


def sweep(parent: Path, prefixes: tuple[str, ...] | None = None, max_age: float = STALE_AGE_SECONDS) -> list[Path]:
    """Remove the work folders under `parent` whose process is gone. `prefixes`: only folders whose names
    start with one of them (a folder that is not only the app's, such as a quantize output's parent);
    None: every work folder (the model library, the compiled-model cache)."""
    removed: list[Path] = []
    try:
        children = [entry for entry in os.scandir(parent) if entry.name.startswith(".")]
    except OSError:
        return removed
    if not children:
        return removed
    now = time.time()
    for entry in children:
        prefix = next((p for p in prefixes if entry.name.startswith(p)), None) if prefixes is not None else ""
        if prefix is None:
            continue
        with contextlib.suppress(OSError):
            if entry.is_symlink() or not entry.is_dir():
                continue
            found = _owner(entry.name, prefix)
            if entry.name.startswith(GARBAGE_PREFIXES):
                stale = True
            elif found is not None:
                stale = not is_running(*found)
            else:
                legacy = prefixes if prefixes is not None else LEGACY_PREFIXES
                stale = entry.name.startswith(legacy) and now - entry.stat().st_mtime > max_age
            if stale:
                shutil.rmtree(entry.path)
                removed.append(Path(entry.path))
    return removed
