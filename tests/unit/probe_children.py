"""Stand-ins for the plugin probe's child (engines/runtime/plugin_probe.py `serve`), run in a real child
process by tests/unit/test_plugin_probe.py: a plugin library that crashes its process, one that hangs."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any


def crash(conn: Any, candidates: Sequence[tuple[str, str]]) -> None:
    os.abort()  # what a plugin library's faulting load does to the process


def hang(conn: Any, candidates: Sequence[tuple[str, str]]) -> None:
    time.sleep(3600)
