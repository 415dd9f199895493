"""Hand the C allocator's free pages back to the operating system (glibc's `malloc_trim`).

glibc keeps memory freed by a thread in that thread's arena, and a long-lived process carries it as
resident memory: the photo pool's threads decode photos and run batches, and after a folder job the
pages they freed stayed (engines/vision/pipeline.py). Elsewhere (Windows, macOS, musl) there is
nothing to call. Pure ctypes, no Qt.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)

_TRIM: list[Callable[[int], int] | None] = []


def _trim_function() -> Callable[[int], int] | None:
    if not _TRIM:
        trim = None
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                trim = libc.malloc_trim
                trim.argtypes = [ctypes.c_size_t]
                trim.restype = ctypes.c_int
            except (OSError, AttributeError):  # not glibc
                trim = None
        _TRIM.append(trim)
    return _TRIM[0]


def trim() -> bool:
    """True when pages were returned. Never raises (housekeeping must not fail the work)."""
    try:
        function = _trim_function()
        return bool(function(0)) if function is not None else False
    except Exception:
        log.debug("malloc_trim failed", exc_info=True)
        return False
