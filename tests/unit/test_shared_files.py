"""The one mechanism for files several processes write (engines/shared_files.py): the lock, atomic writes
with unique temporary names, and the locked read-change-write of a JSON object."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from engines import shared_files
from engines.errors import StorageError
from tests.fixtures.writers import WRITERS, run_writers


def test_the_lock_excludes_other_threads_and_says_so_after_its_timeout(tmp_path: Path) -> None:
    target = tmp_path / "store.json"
    inside = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with shared_files.locked(target):
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert inside.wait(10)
    started = time.monotonic()
    with pytest.raises(StorageError, match="another NPU Studio process") as caught, shared_files.locked(
        target, timeout=0.3
    ):
        pass
    assert 0.25 < time.monotonic() - started < 5 and caught.value.hint
    release.set()
    thread.join(10)
    with shared_files.locked(target, timeout=1):  # free again
        pass
    assert shared_files.lock_path(target).name == ".store.json.lock"


COUNTER = """
from engines import shared_files
counter, count = Path(ARGS[1]), int(ARGS[2])
for _ in range(count):
    with shared_files.locked(counter):  # a read-change-write no other process may interleave with
        value = int(counter.read_text()) if counter.exists() else 0
        shared_files.write_atomically(counter, str(value + 1).encode())
"""


def test_the_lock_excludes_other_processes(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    results = run_writers(COUNTER, [[str(counter), "25"]] * WRITERS, tmp_path,
                          imports="from engines import shared_files\n")
    assert [r.returncode for r in results] == [0] * WRITERS, [r.stderr for r in results]
    assert int(counter.read_text()) == 25 * WRITERS


def test_atomic_writes_use_a_new_temporary_name_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "history.jsonl"
    seen: list[str] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append(Path(src).name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    for i in range(3):
        shared_files.write_atomically(target, f"{i}\n".encode(), mode=0o644)
    assert target.read_text() == "2\n" and len(set(seen)) == 3
    assert all(name.startswith(".history.jsonl.") and name.endswith(".tmp") for name in seen)
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_failed_atomic_write_leaves_the_old_file_and_no_debris(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "index.json"
    shared_files.write_atomically(target, b"old")

    def full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        shared_files.write_atomically(target, b"new")
    assert target.read_bytes() == b"old" and not list(tmp_path.glob(".*.tmp"))


def test_update_json_sets_a_damaged_file_aside_and_keeps_going(tmp_path: Path) -> None:
    target = tmp_path / "index.json"
    target.write_text("{half", encoding="utf-8")
    result = shared_files.update_json(target, lambda data: {**data, "a": 1})
    assert result == {"a": 1} and json.loads(target.read_text(encoding="utf-8")) == {"a": 1}
    kept = list(tmp_path.glob("index.json.bad-*"))
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == "{half"
    assert shared_files.update_json(target, lambda data: {**data, "b": 2}) == {"a": 1, "b": 2}
