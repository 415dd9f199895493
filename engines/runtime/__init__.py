"""The one place that imports onnxruntime and onnxruntime_genai (and the Windows ML / plugin EP packages
next to them), so that tests can swap in a fake at this boundary, and so that each runtime's telemetry is
turned off in every process that loads it, before anything runs: `_load` calls
`disable_telemetry_events()` of ONNX Runtime (its Windows builds emit telemetry events) and of
onnxruntime-genai (on by default since 0.15) as each is first imported. NPU Studio works offline and sends
nothing. Nothing else imports either runtime by name (tests/unit/test_runtime_imports.py); submodules come
through `load` too.

A process that runs genai on the CPU without ONNX Runtime's Python module (see `import_genai`) turns off
genai's telemetry; ONNX Runtime's native library inside it has no Python API to call there, and its
telemetry is a Windows feature, where that module is always imported first.
"""

from __future__ import annotations

import importlib
import re
import sys
from types import ModuleType
from typing import Any

from engines.errors import StudioError

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


RUNTIMES = ("onnxruntime", "onnxruntime_genai")
_quiet: set[str] = set()  # the runtimes whose telemetry this process has turned off


def load(name: str) -> ModuleType:
    """Import `name` (a runtime, or a module of one such as "onnxruntime.quantization") the one way: each
    runtime once imported has its telemetry off. The real module, whatever fake `ort()` would give."""
    top = name.partition(".")[0]
    if top in RUNTIMES:
        _load(top)
    module = importlib.import_module(name)
    _quiet_loaded()
    return module


def _load(name: str) -> ModuleType:
    module = importlib.import_module(name)
    _quiet_loaded()
    return module


def _quiet_loaded() -> None:
    """Turn the telemetry off in each runtime loaded so far (once each; a runtime that another package
    imported on the way, such as a plugin EP's, is caught here too)."""
    for name in RUNTIMES:
        module = sys.modules.get(name)
        if module is None or name in _quiet:
            continue
        _quiet.add(name)
        off = getattr(module, "disable_telemetry_events", None)
        if callable(off):
            try:
                off()
            except Exception as exc:  # an older build without it must still run
                import logging

                logging.getLogger(__name__).debug("%s.disable_telemetry_events failed: %s", name, exc)


def telemetry_off() -> frozenset[str]:
    """The runtimes whose telemetry this process has turned off."""
    return frozenset(_quiet)


def ort() -> Any:
    """The onnxruntime module in use (a test fake when one is installed with `use_fake`).

    A native load failure becomes a RuntimeLoadError (still an ImportError) that says why in plain words."""
    if _override is not None:
        return _override
    try:
        module = _load("onnxruntime")
    except ImportError as exc:
        raise RuntimeLoadError.explain(exc) from exc
    if _native_applied != _native_severity:
        _apply_native_log_level(module)
    return module


class RuntimeLoadError(StudioError, ImportError):
    """ONNX Runtime itself could not be loaded."""

    code = "runtime-load"

    @classmethod
    def explain(cls, exc: ImportError) -> RuntimeLoadError:
        text = str(exc)
        first = text.splitlines()[0] if text else "DLL load failed"
        if re.search(r"msvcp140|vcruntime140|initialization routine failed", text, re.IGNORECASE):
            return cls(
                "ONNX Runtime could not start: another package loaded an older Microsoft C++ runtime "
                f"(msvcp140.dll) into the app first ({first}).",
                "Remove or update that package (winrt-runtime 3.x bundles an old one; 4.x bundles none), "
                "or install the latest Microsoft Visual C++ Redistributable, then restart.",
                native=text,
            )
        if "No module named" in text:
            return cls(
                "ONNX Runtime is not installed in this environment.",
                "Reinstall NPU Studio (one ONNX Runtime build per platform: see installer/README.md).",
                native=text,
            )
        return cls(f"ONNX Runtime could not be loaded: {first}", "Reinstall NPU Studio.", native=text)


def use_fake(module: Any) -> None:
    """Install a fake onnxruntime (tests); `None` restores the real one.

    The fake may also carry `windowsml` (a fake Windows ML catalog package), `plugins` (import name ->
    fake bundled plugin EP package), `qnn_plugin` and `windows_build` (the Windows build number)."""
    global _override
    _override = module


def is_fake() -> bool:
    """Whether a test fake stands in for onnxruntime (`use_fake`)."""
    return _override is not None


def plugin(module_name: str) -> ModuleType | None:
    """A bundled plugin EP package (`onnxruntime_qnn`, `onnxruntime_ep_openvino`), or None when not installed."""
    if _override is not None:
        if module_name == "onnxruntime_qnn" and getattr(_override, "qnn_plugin", None) is not None:
            return getattr(_override, "qnn_plugin", None)
        found: ModuleType | None = dict(getattr(_override, "plugins", None) or {}).get(module_name)
        return found
    try:
        return load(module_name)
    except ImportError:
        return None


def qnn_plugin() -> ModuleType | None:
    """The `onnxruntime_qnn` plugin package (Windows ARM64 builds), or None when not installed."""
    return plugin("onnxruntime_qnn")


def windowsml() -> Any:
    """The `windowsml` package (Windows ML's EP catalog), or None off Windows / when not installed.

    Raises nothing: a broken install is reported by the catalog module from `windowsml_error()`."""
    global _windowsml_error
    if _override is not None:
        return getattr(_override, "windowsml", None)
    if sys.platform != "win32":
        return None
    try:
        return load("windowsml")
    except (ImportError, OSError) as exc:  # FileNotFoundError for a missing bundled DLL is an OSError
        _windowsml_error = f"{type(exc).__name__}: {exc}"
        return None


_windowsml_error = ""


def windowsml_error() -> str:
    """Why importing `windowsml` failed on Windows ("" when it did not fail or was not tried)."""
    return _windowsml_error


def windows_build() -> int:
    """The Windows build number (26100 = 24H2), 0 off Windows."""
    if _override is not None:
        return int(getattr(_override, "windows_build", 0) or 0)
    getter = getattr(sys, "getwindowsversion", None)
    return int(getter().build) if getter is not None else 0


def import_genai(runtime_first: bool = True) -> ModuleType:
    """onnxruntime_genai, imported after onnxruntime: the Windows ML genai build (onnxruntime-genai-winml)
    uses the ONNX Runtime already loaded in the process (its ARM64 wheel carries none of its own), and the
    plugin EPs registered there. `runtime_first=False` (a process that runs genai on the CPU only) skips
    that import outside Windows: there genai loads the onnxruntime package's own library itself, and ONNX
    Runtime's Python module (with numpy) would only add memory; a later call then keeps it out too (genai
    is loaded, the order is settled)."""
    global _genai_alone
    if _genai_alone and "onnxruntime_genai" in sys.modules:
        return sys.modules["onnxruntime_genai"]
    if _override is None and (runtime_first or sys.platform == "win32"):
        _load("onnxruntime")
    elif "onnxruntime_genai" not in sys.modules:
        _genai_alone = _override is None
    return _load("onnxruntime_genai")


_genai_alone = False  # genai was imported without ONNX Runtime's Python module (a CPU-only process)


def version() -> str:
    return str(getattr(ort(), "__version__", "unknown"))


def package_version(module: Any, distribution: str) -> str:
    """The installed version of `distribution`, whose import package is `module` ("" when unknown).

    The module's `__version__`, else the name of the `.dist-info` folder beside it (one listing of its
    site-packages), else importlib.metadata: its import and its scan of every installed distribution
    cost more than discovering the devices does."""
    found = str(getattr(module, "__version__", "") or "")
    if found:
        return found
    where = getattr(module, "__file__", None)
    if where:
        import os

        site = os.path.dirname(os.path.dirname(where))
        prefix = distribution.replace("-", "_").lower() + "-"
        try:
            names = [n for n in os.listdir(site) if n.lower().startswith(prefix) and n.endswith(".dist-info")]
        except OSError:
            names = []
        if len(names) == 1:
            return names[0][len(prefix) : -len(".dist-info")]
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""
