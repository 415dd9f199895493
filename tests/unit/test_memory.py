"""Returning freed memory to the OS after a model load."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from engines import memory


def test_nothing_to_trim_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    from engines import heap

    monkeypatch.setattr(heap.sys, "platform", "win32")
    monkeypatch.setattr(heap, "_TRIM", [])  # looked up again, on "Windows"
    assert memory.release_free_memory() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim is Linux-only")
def test_freed_heap_goes_back_to_the_os() -> None:
    psutil = pytest.importorskip("psutil")
    chunks = [bytearray(4096) for _ in range(40_000)]  # ~160 MB of small blocks: they stay in malloc's heap
    del chunks
    before = psutil.Process().memory_info().rss
    assert memory.release_free_memory() is True
    assert psutil.Process().memory_info().rss < before


def _resident_kb(start: int) -> int:
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"{start:x}-"):
            return next(int(x.split()[1]) for x in lines[i + 1:] if x.startswith("Rss:"))
    raise AssertionError("mapping not found")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps and madvise are Linux")
def test_read_pages_of_a_mapped_file_are_dropped_and_read_back_unchanged(tmp_path: Path) -> None:
    import ctypes
    import mmap

    data = bytes(range(256)) * 4096 * 4  # 4 MB
    for name in ("model.onnx.data", "written.data"):
        with open(tmp_path / name, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())  # on disk, as a model is: its page-cache pages are clean
    with open(tmp_path / "model.onnx.data", "rb") as f, open(tmp_path / "written.data", "r+b") as g:
        clean = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # private, as ONNX Runtime maps weights
        written = mmap.mmap(g.fileno(), 0, access=mmap.ACCESS_COPY)
    try:
        assert clean[:] == data and written[:] == data  # every page read once (resident)
        written[0] = 7  # one page copied on write: that mapping must keep all its pages
        start = ctypes.addressof(ctypes.c_char.from_buffer(clean))
        other = ctypes.addressof(ctypes.c_char.from_buffer(written))
        kept = _resident_kb(other)
        assert _resident_kb(start) >= 4000 and kept > 0
        released = memory.release_mapped_pages(tmp_path)
        assert released >= 4000 * 1024
        assert _resident_kb(start) < 100 and _resident_kb(other) >= kept
        assert clean[:] == data  # read back from the file, unchanged
        assert written[0] == 7 and written[1:] == data[1:]
        assert memory.release_mapped_pages(tmp_path / "elsewhere") == 0
    finally:
        clean.close()
        written.close()
