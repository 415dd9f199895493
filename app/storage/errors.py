"""SQLite's failures in the conversation store's words: which result code means what, and the error a
user reads for each (disk full, read-only, busy, damaged, disk error)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engines import StorageError

# SQLite primary result codes (extended codes keep these in the low byte).
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR = 5, 6, 8, 10
SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 11, 13, 14, 26
SQLITE_MAGIC = b"SQLite format 3\x00"


def error_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_corruption(exc: sqlite3.Error) -> bool:
    if error_code(exc) in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return True
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "encrypted" in text


def is_busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock SQLite needs (busy or locked)."""
    return error_code(exc) in (SQLITE_BUSY, SQLITE_LOCKED) or "locked" in str(exc).lower()


def storage_error(action: str, exc: sqlite3.Error, path: Path) -> StorageError:
    """A failed SQLite call in plain words: what failed, why, and what to do."""
    code = error_code(exc)
    text = str(exc).lower()
    if code == SQLITE_FULL or "disk is full" in text:
        return StorageError(
            f"Could not {action}: the disk is full.",
            "Free some disk space and try again; nothing you have open was lost.",
        )
    if code == SQLITE_READONLY or "readonly" in text or "read-only" in text:
        return StorageError(
            f"Could not {action}: the conversation database {path} is read-only.",
            "Check the folder's permissions (or set NPU_STUDIO_HOME to a writable folder) and try again.",
        )
    if code in (SQLITE_BUSY, SQLITE_LOCKED) or "locked" in text:
        return StorageError(
            f"Could not {action}: the conversation database is busy (another NPU Studio may be using it).",
            "Close other NPU Studio windows and try again.",
        )
    if is_corruption(exc):
        return StorageError(
            f"Could not {action}: the conversation database {path} is damaged.",
            "Restart NPU Studio: it keeps a copy of the damaged file and starts a fresh history.",
        )
    if code in (SQLITE_IOERR, SQLITE_CANTOPEN):
        return StorageError(
            f"Could not {action}: the disk reported an error ({exc}).",
            "Check the disk and the folder's permissions, then try again.",
        )
    return StorageError(f"Could not {action}: {exc}.", "Try again.")
