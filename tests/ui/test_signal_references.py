"""The pinned PySide6 keeps CPython's reference counts right when Python code emits and disconnects signals.

PySide6 6.12.0 on CPython 3.11 returned True/False from `SignalInstance.emit()` and `.disconnect()` without a
reference of their own: a few thousand emissions later the interpreter aborted ("bool_dealloc"). pyproject.toml
pins 6.11.3 below Python 3.12 for that reason (on 3.12+ True and False are immortal); this fails if a pin moves
to a release with the defect, since the app emits from Python with plain `signal.emit(...)`."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication


class _Probe(QObject):
    ping = Signal(int)


def test_emit_and_disconnect_keep_the_references_of_true_and_false(qapp: QApplication) -> None:
    probe = _Probe()
    got: list[int] = []
    slot = got.append
    before = sys.getrefcount(True), sys.getrefcount(False)
    for i in range(5000):
        probe.ping.connect(slot)
        probe.ping.emit(i)
        probe.ping.disconnect(slot)
    after = sys.getrefcount(True), sys.getrefcount(False)
    assert got == list(range(5000))
    assert abs(after[0] - before[0]) < 100 and abs(after[1] - before[1]) < 100, (before, after)
