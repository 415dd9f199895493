"""The one place that imports onnxruntime, so that tests can swap in a fake at this boundary."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

_override: Any = None


def ort() -> Any:
    """The onnxruntime module in use (a test fake when one is installed with `use_fake`)."""
    if _override is not None:
        return _override
    return importlib.import_module("onnxruntime")


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
