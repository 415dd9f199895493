"""Give memory freed while a model loaded back to the operating system (no Qt here).

Loading a model allocates and frees large temporary buffers (the protobuf read by the safety check,
graph optimisation copies). glibc's malloc keeps such freed pages in its heap, so an idle app would
carry them as resident memory until exit; `malloc_trim(0)` returns them. Elsewhere (Windows, macOS,
musl) there is nothing to call and this only collects garbage.

ONNX Runtime maps a model's external weights file and reads every weight once while it prepacks them
into its own buffers; the file's pages it read stay resident though most are never read again (~20 MB
for the demo chat model). `release_mapped_pages(folder)` drops the clean ones (Linux): exactly what
the kernel's own page reclaim does under memory pressure, only now. A page that is read again comes
back from the file (the page cache), unchanged.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import mmap
import os
import sys
from pathlib import Path

from engines import heap

log = logging.getLogger(__name__)


def release_free_memory() -> bool:
    """Collect garbage, then hand the allocator's free pages back. True when pages were returned."""
    gc.collect()
    return heap.trim()


def release_mapped_pages(folder: str | os.PathLike[str]) -> int:
    """Drop the resident, never-written pages of this process's mappings of files under `folder` (Linux);
    the bytes released (0 elsewhere or when nothing qualifies)."""
    advise = getattr(mmap, "MADV_DONTNEED", None)
    if not sys.platform.startswith("linux") or advise is None:
        return 0
    try:
        root = str(Path(folder).resolve())
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        madvise.restype = ctypes.c_int
        released = 0
        for start, end, resident in _clean_file_mappings(root):
            if madvise(start, end - start, advise) == 0:
                released += resident
        return released
    except Exception:  # never let housekeeping fail a load
        log.debug("releasing mapped pages failed", exc_info=True)
        return 0


def _clean_file_mappings(root: str) -> list[tuple[int, int, int]]:
    """(start, end, resident bytes) of mappings of files under `root` with no written (dirty or
    copied-on-write) page: dropping those loses nothing."""
    found: list[tuple[int, int, int]] = []
    current: dict[str, int] | None = None
    bounds = (0, 0)
    prefix = root.rstrip("/") + "/"

    def close() -> None:
        if current is not None and current.get("Rss", 0) and not any(
            current.get(k, 0) for k in ("Anonymous", "Private_Dirty", "Shared_Dirty")
        ):
            found.append((*bounds, current["Rss"] * 1024))

    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as smaps:
        for line in smaps:
            head, _, rest = line.partition(" ")
            if "-" in head and not head.endswith(":"):
                close()
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) > 5 else ""
                if path.startswith(prefix):
                    low, high = head.split("-")
                    bounds, current = (int(low, 16), int(high, 16)), {}
                else:
                    current = None
            elif current is not None and head.endswith(":"):
                value = rest.split()
                if value and value[0].isdigit():
                    current[head[:-1]] = int(value[0])
    close()
    return found
