"""Give memory freed while a model loaded back to the operating system (no Qt here).

Loading a model allocates and frees large temporary buffers (the protobuf read by the safety check,
graph optimisation copies). glibc's malloc keeps such freed pages in its heap, so an idle app would
carry them as resident memory until exit; `malloc_trim(0)` returns them. Elsewhere (Windows, macOS,
musl) there is nothing to call and this only collects garbage.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys

log = logging.getLogger(__name__)


def _malloc_trim() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))


def release_free_memory() -> bool:
    """Collect garbage, then hand the allocator's free pages back. True when pages were returned."""
    gc.collect()
    try:
        return _malloc_trim()
    except Exception:  # never let housekeeping fail a load
        log.debug("malloc_trim failed", exc_info=True)
        return False
