"""The engines' child processes (engines/child.py): lean subprocesses on POSIX, spawn elsewhere."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engines import child

REPO = Path(__file__).resolve().parents[2]
lean_only = pytest.mark.skipif(not child.lean_children(), reason="lean children are the POSIX start")


def _echo(conn: Any, prefix: str) -> None:
    """Answer each message with `prefix` + it, with whether this is a child, until None."""
    while True:
        message = conn.recv()
        if message is None:
            return
        conn.send((prefix + message, child.in_child(), os.getpid()))


def _wait_for_flag(conn: Any, flag: Any) -> None:
    conn.send("waiting")
    deadline = time.monotonic() + 20
    while not flag.is_set() and time.monotonic() < deadline:
        time.sleep(0.005)
    conn.send(flag.is_set())
    flag.clear()  # the parent sees the child's clear too
    conn.recv()


def _crash(conn: Any) -> None:
    conn.send("about to crash")
    os.kill(os.getpid(), signal.SIGKILL)


def _hang(conn: Any) -> None:
    conn.send("hanging")
    time.sleep(60)


def test_a_child_runs_the_target_and_answers_over_its_connection() -> None:
    process, conn = child.start(_echo, ("echo: ",), name="npu-studio-test")
    try:
        assert process.is_alive() and process.pid != os.getpid()
        conn.send("hello")
        assert conn.poll(20)
        text, in_child, pid = conn.recv()
        assert (text, in_child, pid) == ("echo: hello", True, process.pid)
        assert not child.in_child()  # this process started it: it is not a child
        conn.send(None)
        process.join(20)
        assert not process.is_alive() and process.exitcode == 0
    finally:
        process.kill()


def test_the_shared_flag_set_in_the_parent_is_seen_by_the_child_and_back() -> None:
    flag = child.cancel_flag()
    process, conn = child.start(_wait_for_flag, (flag,), name="npu-studio-test")
    try:
        assert conn.poll(20) and conn.recv() == "waiting"
        assert not flag.is_set()
        flag.set()
        assert conn.poll(20) and conn.recv() is True
        deadline = time.monotonic() + 5
        while flag.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not flag.is_set()
        conn.send("done")
        process.join(20)
        assert process.exitcode == 0
    finally:
        process.kill()


@pytest.mark.skipif(os.name != "posix", reason="a POSIX signal")
def test_a_crash_in_the_child_ends_its_connection_and_names_the_signal() -> None:
    process, conn = child.start(_crash, (), name="npu-studio-test")
    assert conn.poll(20) and conn.recv() == "about to crash"
    with pytest.raises(EOFError):
        conn.poll(20)
        conn.recv()
    process.join(20)
    assert not process.is_alive() and process.exitcode == -signal.SIGKILL


def test_kill_stops_a_hanging_child() -> None:
    process, conn = child.start(_hang, (), name="npu-studio-test")
    assert conn.poll(20) and conn.recv() == "hanging"
    process.kill()
    process.join(20)
    assert not process.is_alive() and process.exitcode is not None and process.exitcode != 0


@lean_only
def test_exit_kills_the_children_left_running() -> None:
    process, conn = child.start(_hang, (), name="npu-studio-test")
    assert conn.poll(20) and conn.recv() == "hanging"
    child._kill_children()  # what runs at this process's exit
    assert not process.is_alive()


@lean_only
def test_lean_children_start_no_resource_tracker_and_carry_the_mark() -> None:
    """A fresh interpreter: start a chat-engine-like child with a cancel flag, list what it started."""
    code = (
        "import psutil\n"
        "from multiprocessing import resource_tracker\n"
        "from engines import child\n"
        "from tests.unit.test_child_process import _echo\n"
        "flag = child.cancel_flag()\n"
        "process, conn = child.start(_echo, ('',), name='npu-studio-test')\n"
        "conn.send('x'); conn.recv()\n"
        "children = [' '.join(c.cmdline()) for c in psutil.Process().children(recursive=True)]\n"
        "print(len(children), all(child.is_child_command(c.split()) for c in children),"
        " resource_tracker._resource_tracker._pid is None)\n"
        "conn.send(None); process.join(10)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "True", "True"]


def test_under_spawn_the_same_calls_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Windows (and frozen) start: multiprocessing spawn, a multiprocessing Event as the flag."""
    monkeypatch.setattr(child, "lean_children", lambda: False)
    flag = child.cancel_flag()
    process, conn = child.start(_wait_for_flag, (flag,), name="npu-studio-test")
    try:
        assert conn.poll(60) and conn.recv() == "waiting"
        flag.set()
        assert conn.poll(20) and conn.recv() is True
        conn.send("done")
        process.join(20)
        assert process.exitcode == 0
    finally:
        process.kill()
