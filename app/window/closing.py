"""The staged close of the main window: running work is cancelled first and given a moment to report
back (so a partial answer is saved as stopped) before the window really closes."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QTimer

CLOSE_GRACE_MS = 3000  # how long a close waits for running work to report back after the cancel
POLL_MS = 20


class StagedClose:
    """The window's close guard: stage 0 open, 1 stopping the work, 2 closing for real."""

    def __init__(self, window: Any, hosts: Sequence[Any], busy: Callable[[], bool], grace_ms: int = CLOSE_GRACE_MS):
        self._window = window
        self._hosts = hosts
        self._busy = busy
        self._grace_ms = grace_ms
        self.stage = 0

    def guard(self) -> bool:
        """Called by the window on close: False postpones the close until running work has stopped."""
        if self.stage == 0 and self._busy():
            self.stage = 1
            self._window.set_status("shutdown", "Stopping before closing…")
            for host in self._hosts:
                host.cancel()
            self._poll(time.monotonic() + self._grace_ms / 1000)
            return False
        return True

    def _poll(self, deadline: float) -> None:
        if not self._busy() or time.monotonic() >= deadline:
            self.stage = 2
            self._window.close()
            return
        QTimer.singleShot(POLL_MS, lambda: self._poll(deadline))
