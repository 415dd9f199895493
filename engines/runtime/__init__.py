"""The one place that imports onnxruntime, so that tests can swap in a fake at this boundary."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

_override: Any = None
# ONNX Runtime's own logger writes coloured lines to stderr from native code. 3 = errors only: every
# error also reaches Python as an exception with the same text, and warnings ("Removing initializer",
# "provider not in available provider names") say nothing a user can act on. --debug sets 1 (info).
_native_severity = 3
_native_applied: int | None = None


def set_native_log_level(*, verbose: bool) -> None:
    """How much ONNX Runtime itself prints on stderr: all but verbose (verbose) or errors only."""
    global _native_severity
    _native_severity = 1 if verbose else 3
    if _native_applied is not None:
        _apply_native_log_level(ort())


def _apply_native_log_level(module: Any) -> None:
    global _native_applied
    setter = getattr(module, "set_default_logger_severity", None)
    if setter is not None and _native_applied != _native_severity:
        setter(_native_severity)
        _native_applied = _native_severity


def ort() -> Any:
    """The onnxruntime module in use (a test fake when one is installed with `use_fake`)."""
    if _override is not None:
        return _override
    module = importlib.import_module("onnxruntime")
    if _native_applied != _native_severity:
        _apply_native_log_level(module)
    return module


def use_fake(module: Any) -> None:
    """Install a fake onnxruntime (tests); `None` restores the real one."""
    global _override
    _override = module


def qnn_plugin() -> ModuleType | None:
    """The `onnxruntime_qnn` plugin package (Windows ARM64 builds), or None when not installed."""
    if _override is not None:
        return getattr(_override, "qnn_plugin", None)
    try:
        return importlib.import_module("onnxruntime_qnn")
    except ImportError:
        return None


def version() -> str:
    return str(getattr(ort(), "__version__", "unknown"))
