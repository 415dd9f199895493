"""Emit Qt signals from Python without corrupting the interpreter on PySide6 6.12.0 + CPython 3.11.

PySide6 6.12.0's `SignalInstance.emit()` and `.disconnect()` return `True`/`False` without taking a
reference. Every call whose result is dropped takes one reference away from `True`; on CPython 3.11
(where `True` is not immortal) a few thousand emissions later the interpreter aborts with
"Fatal Python error: bool_dealloc". PySide6 6.11.2 is not affected, nor is CPython >= 3.12.

`emit()` and `disconnect()` here give the reference back when (and only when) the running PySide6 is
measured to have the defect, so the code stays correct on fixed versions. Use them for every
emission from Python code (hot paths especially: streamed text, per-image results).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

_PROBE_EMITS = 64
_borrowed: bool | None = None


def _measure() -> bool:
    if sys.version_info >= (3, 12):  # True and False are immortal: a lost reference is harmless
        return False
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(_PROBE_EMITS):
        probe.ping.emit()
    lost = before - sys.getrefcount(True)
    if lost > _PROBE_EMITS // 2:  # other threads may move the count a little; the defect moves it by one per call
        for _ in range(lost):
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))
        return True
    return False


def returns_borrowed_bool() -> bool:
    """True when this PySide6 has the defect (measured once, on first use)."""
    global _borrowed
    if _borrowed is None:
        _borrowed = _measure()
    return _borrowed


def _give_back(result: object) -> None:
    if (result is True or result is False) and returns_borrowed_bool():
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(result))


def emit(signal: Any, *args: Any) -> None:
    """`signal.emit(*args)`, safe on every PySide6 version."""
    _give_back(signal.emit(*args))


def disconnect(signal: Any, slot: Any) -> None:
    """`signal.disconnect(slot)`, safe on every PySide6 version."""
    _give_back(signal.disconnect(slot))
