"""One rotating log file under the user log folder; console output only for warnings (or --debug).

A log that cannot be written (full or read-only disk) must not flood the terminal: Python's default
`Handler.handleError` prints `--- Logging error ---` and a traceback for every record. The file handler
here turns itself off at its first failure and says so in one line. It rolls the file over as the standard
library's RotatingFileHandler does, without `logging.handlers` (which brings socket, pickle and selectors
into every command's start, ~5 ms), and a rollover another process's open file prevents (Windows: the
chat engine's child writes the same log) leaves the file growing instead of turning logging off. The
console shows one line per record; a traceback goes to the log file only (or to the console with --debug).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

from app import paths

LOG_FILE_NAME = "npu-studio.log"
_configured = False


def log_file() -> str:
    return str(paths.log_dir() / LOG_FILE_NAME)


class SelfDisablingFileHandler(logging.FileHandler):
    """A log file rolled over at `maxBytes` into `backupCount` numbered copies (`.1` the newest; with no copies
    it is never rolled over, as the standard library's) that stops writing, and says so once, when the disk
    refuses a record."""

    disabled_reason = ""

    def __init__(self, filename: str, maxBytes: int = 0, backupCount: int = 0, encoding: str | None = None) -> None:
        super().__init__(filename, mode="a", encoding=encoding)
        self.maxBytes = maxBytes
        self.backupCount = backupCount

    def emit(self, record: logging.LogRecord) -> None:
        if self.disabled_reason:
            return
        try:
            if self.maxBytes > 0 and self.backupCount > 0 and self.stream is not None:
                position = self.stream.tell()
                if position and position + len(self.format(record)) + 1 >= self.maxBytes:
                    self._roll_over()
        except Exception:
            self.handleError(record)  # the file cannot be reopened: turned off, said once
            return
        super().emit(record)

    def _roll_over(self) -> None:
        """`name` -> `name.1` -> ... -> `name.{backupCount}` (the oldest goes). When a rename fails (another
        process holds the file open on Windows) the file keeps growing until a later record rolls it over."""
        if self.stream is not None:
            self.stream.close()
        self.stream = None
        base = self.baseFilename
        try:
            for number in range(self.backupCount, 0, -1):
                older = base if number == 1 else f"{base}.{number - 1}"
                if os.path.exists(older):
                    os.replace(older, f"{base}.{number}")
        except OSError:
            pass  # not rolled over this time: the record is appended
        self.stream = self._open()

    def handleError(self, record: logging.LogRecord) -> None:
        if self.disabled_reason:
            return
        error = sys.exc_info()[1]
        self.disabled_reason = (getattr(error, "strerror", None) or str(error) or type(error).__name__)
        with contextlib.suppress(OSError, ValueError):  # no usable stderr either: stay silent
            sys.stderr.write(
                f"npu-studio: the log file {self.baseFilename} cannot be written ({self.disabled_reason}); "
                "logging to it is off until NPU Studio restarts.\n"
            )
        with contextlib.suppress(OSError, ValueError):
            if self.stream is not None:
                self.stream.close()
        self.stream = None


def _not_file_only(record: logging.LogRecord) -> bool:
    return not getattr(record, "file_only", False)


class OneLineFormatter(logging.Formatter):
    """`LEVEL: message` without the traceback (that one is in the log file)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname}: {record.getMessage()}"


def setup_logging(debug: bool = False, console: bool = True) -> None:
    global _configured
    root = logging.getLogger()
    if _configured:
        root.setLevel(logging.DEBUG if debug else logging.INFO)
        return
    _configured = True
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    try:
        file_handler: logging.Handler | None = SelfDisablingFileHandler(
            log_file(), maxBytes=2_000_000, backupCount=3, encoding="utf-8"
        )
    except OSError:
        file_handler = None  # a read-only or full disk must not stop the app
    if file_handler is not None:
        file_handler.setFormatter(fmt)
        root.addHandler(file_handler)
    if console:
        stream = logging.StreamHandler()
        stream.setLevel(logging.DEBUG if debug else logging.WARNING)
        stream.setFormatter(fmt if debug else OneLineFormatter())
        stream.addFilter(_not_file_only)  # records the CLI also says in its own words
        root.addHandler(stream)
    _quiet_native_logs(debug)


def _quiet_native_logs(debug: bool) -> None:
    """ONNX Runtime prints its own warnings (coloured, on stderr) from native code; what matters of them
    reaches the user as an exception or a placement. Keep them for --debug only."""
    from engines import set_native_log_level

    set_native_log_level(verbose=debug)
