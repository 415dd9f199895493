"""Python child processes for the engines (the chat engine, model trials), started lean.

On POSIX, multiprocessing's spawn start method always starts its resource tracker too: one more Python
process (~13 MB resident) that lives as long as the app, only to clean up named semaphores, and a
`multiprocessing.Event` is such a semaphore. Here a child is a plain `subprocess` of the same
interpreter instead: its end of a socket pair is inherited and wrapped as a
`multiprocessing.connection.Connection` (the same send/recv/poll as a multiprocessing pipe), and the
cancel flag is one shared byte in an inherited, unnamed memory file: nothing to track, nothing left
behind. The child also skips spawn's re-import of the parent's `__main__` module.

On Windows (and any frozen build) the spawn start method stays: there is no resource tracker there, and
spawn with `multiprocessing.freeze_support()` is how the frozen app starts its own executable as a child.

`start(target, args)` runs `target(conn, *args)` in the child and returns the parent's `(process, conn)`
(`target` may be named, "package.module:function", so that the parent never imports the child's code);
the process object answers `pid`, `is_alive()`, `join()`, `kill()` and `exitcode` as a
`multiprocessing.Process` does (a negative exit code names the signal that ended the child).
"""

from __future__ import annotations

import atexit
import contextlib
import mmap
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["CHILD_MARK", "SharedFlag", "cancel_flag", "in_child", "is_child_command", "lean_children", "start"]

# On the child's command line: how tools (and tests) tell the engine's children from other processes.
CHILD_MARK = "--npu-studio-child"

_state = {"in_child": False}
_children: weakref.WeakSet[Process] = weakref.WeakSet()
_children_lock = threading.Lock()


def is_child_command(command: list[str]) -> bool:
    """Is `command` (a process's command line) one of these children, lean or spawned?"""
    return CHILD_MARK in command or any("spawn_main" in part for part in command)


def lean_children() -> bool:
    """Children are plain subprocesses here (POSIX, not frozen); else multiprocessing spawn."""
    return os.name == "posix" and not getattr(sys, "frozen", False) and bool(sys.executable)


def in_child() -> bool:
    """Is this process a child started by `start` (it starts no children of its own)?"""
    if _state["in_child"]:
        return True
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)


class SharedFlag:
    """A set/clear/is_set flag shared with the children it is passed to: one byte of an unnamed memory
    file (Linux memfd; elsewhere an unlinked temporary file) that the child maps too. Reading it is a
    memory read, cheap enough to check between tokens."""

    def __init__(self, fd: int | None = None) -> None:
        if fd is None:
            fd = _memory_file()
            os.ftruncate(fd, mmap.PAGESIZE)
        self.fd = fd
        self._map = mmap.mmap(fd, mmap.PAGESIZE)

    def set(self) -> None:
        self._map[0] = 1

    def clear(self) -> None:
        self._map[0] = 0

    def is_set(self) -> bool:
        return self._map[0] != 0

    def __reduce__(self) -> tuple[Callable[[int], SharedFlag], tuple[int]]:
        # Sent to a child started with `start`, which inherits this descriptor under the same number.
        return SharedFlag, (self.fd,)


def _memory_file() -> int:
    create = getattr(os, "memfd_create", None)
    if create is not None:
        with contextlib.suppress(OSError):
            return int(create("npu-studio-flag", getattr(os, "MFD_CLOEXEC", 0)))
    with tempfile.TemporaryFile(prefix="npu-studio-flag-") as handle:  # unlinked at once on POSIX
        return os.dup(handle.fileno())


def cancel_flag() -> Any:
    """A cancel flag for `start`'s children: a SharedFlag, or a multiprocessing Event under spawn."""
    if lean_children():
        return SharedFlag()
    import multiprocessing

    return multiprocessing.get_context("spawn").Event()


class Process:
    """The parent's handle on a lean child (the multiprocessing.Process calls the engines use)."""

    def __init__(self, popen: subprocess.Popen[bytes], name: str) -> None:
        self._popen = popen
        self.name = name

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout)

    def kill(self) -> None:
        if self._popen.poll() is None:
            with contextlib.suppress(OSError):
                self._popen.kill()


def _run_named(conn: Any, name: str, *args: Any) -> None:
    """Run the target named "package.module:function" (imported here, in the child)."""
    import importlib

    module, _, function = name.partition(":")
    getattr(importlib.import_module(module), function)(conn, *args)


def start(
    target: Callable[..., Any] | str, args: tuple[Any, ...] = (), *, name: str, duplex: bool = True
) -> tuple[Any, Any]:
    """Start `target(conn, *args)` in a child process; `(process, conn)` for the parent. `target` must be
    importable by name (a module-level function) and `args` picklable; a SharedFlag in `args` is
    shared with the child. The child is killed when this process exits, as a daemon process is."""
    if isinstance(target, str):
        target, args = _run_named, (target, *args)
    if not lean_children():
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=duplex)
        spawned = ctx.Process(target=target, args=(child, *args), name=name, daemon=True)
        spawned.start()
        child.close()
        return spawned, parent
    ours, theirs = socket.socketpair()
    flags = [a.fd for a in args if isinstance(a, SharedFlag)]
    code = f"import sys; sys.path[:] = {sys.path!r}; from engines.child import _main; _main({theirs.fileno()})"
    try:
        popen = subprocess.Popen(
            [sys.executable, *subprocess._args_from_interpreter_flags(), "-c", code, CHILD_MARK, name],  # type: ignore[attr-defined]
            stdin=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(), *flags),
            close_fds=True,
        )
    finally:
        theirs.close()
    conn = Connection(ours.detach())
    process = Process(popen, name)
    with _children_lock:
        _children.add(process)
    try:
        conn.send((target, args))
    except (OSError, ValueError):
        process.kill()
        process.join(5.0)
        raise
    return process, conn


def _main(fd: int) -> None:
    """The child's entry: receive the target and its arguments, run it with the connection."""
    _state["in_child"] = True
    # Ctrl+C reaches the whole process group; the parent decides what stops (both engines' children
    # ignore it too, once their target runs; this covers the imports before).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    try:
        target, args = conn.recv()
    except (EOFError, OSError):
        return
    try:
        target(conn, *args)
    finally:
        with contextlib.suppress(OSError):
            conn.close()


@atexit.register
def _kill_children() -> None:
    """Children do not outlive the process that started them (what multiprocessing does for daemons)."""
    with _children_lock:
        alive = [p for p in _children if p.is_alive()]
    for process in alive:
        process.kill()
    for process in alive:
        process.join(5.0)
