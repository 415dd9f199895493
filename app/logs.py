"""One rotating log file under the user log folder; console output only for warnings (or --debug)."""

from __future__ import annotations

import logging
import logging.handlers

from app import paths

LOG_FILE_NAME = "npu-studio.log"
_configured = False


def log_file() -> str:
    return str(paths.log_dir() / LOG_FILE_NAME)


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
        file_handler = logging.handlers.RotatingFileHandler(
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
        stream.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        root.addHandler(stream)
