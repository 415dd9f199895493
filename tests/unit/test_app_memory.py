"""Returning freed memory to the OS after a model load."""

from __future__ import annotations

import sys

import pytest

from app import memory


def test_nothing_to_trim_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory.sys, "platform", "win32")
    assert memory.release_free_memory() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim is Linux-only")
def test_freed_heap_goes_back_to_the_os() -> None:
    psutil = pytest.importorskip("psutil")
    chunks = [bytearray(4096) for _ in range(40_000)]  # ~160 MB of small blocks: they stay in malloc's heap
    del chunks
    before = psutil.Process().memory_info().rss
    assert memory.release_free_memory() is True
    assert psutil.Process().memory_info().rss < before
