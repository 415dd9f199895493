"""Plugin execution providers: registered with ONNX Runtime once per process, Windows ML's catalog
first and the bundled plugin packages second, each failure recorded in plain words and never allowed
to stop the others (one bad EP must not break discovery)."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from engines import runtime
from engines.runtime.catalog import CatalogReport, ReadyState
from engines.types import EpSource, short_ep_name

log = logging.getLogger(__name__)

QNN_EP = "QNNExecutionProvider"
OPENVINO_EP = "OpenVINOExecutionProvider"
VITISAI_EP = "VitisAIExecutionProvider"
NV_TRTRTX_EP = "NvTensorRTRTXExecutionProvider"
MIGRAPHX_EP = "MIGraphXExecutionProvider"
DML_EP = "DmlExecutionProvider"


@dataclass(frozen=True)
class BundledPlugin:
    ep: str
    package: str  # the distribution on PyPI
    module: str  # its import name


# The offline fallback when the catalog cannot serve (managed PCs, paused Windows Update, offline demos).
BUNDLED_PLUGINS = (
    BundledPlugin(QNN_EP, "onnxruntime-qnn", "onnxruntime_qnn"),
    BundledPlugin(OPENVINO_EP, "onnxruntime-ep-openvino", "onnxruntime_ep_openvino"),
)


@dataclass(frozen=True)
class PluginStatus:
    """One candidate source of a plugin EP and what became of it."""

    ep: str
    package: str  # distribution name, or "Windows ML catalog"
    installed: bool
    registered: bool  # this source is the one ONNX Runtime uses for `ep`
    library: str = ""
    version: str = ""
    error: str = ""  # why registration failed, in plain words
    source: str = EpSource.BUNDLED.value
    state: str = ""  # the catalog's ready state; "" for bundled plugins
    note: str = ""  # e.g. "not used: the Windows ML catalog's EP is registered"
    no_device: bool = False  # a probe found it offering no device here, so it was not loaded


@dataclass(frozen=True)
class Registration:
    ep: str
    library: str
    source: str
    version: str


_registered: dict[str, Registration] = {}
_errors: dict[tuple[str, str], str] = {}  # (ep, source) -> plain-words error
_without_devices: set[str] = set()  # bundled plugins a probe found offering no device: never loaded here
# {ep: devices offered, or why the probe could not tell} for (ep, library) pairs; the long-lived processes
# install one (engines/runtime/plugin_probe.py), commands none.
Probe = Callable[[list[tuple[str, str]]], dict[str, int | str]]
_probe_with: Probe | None = None
_lock = threading.Lock()

NO_DEVICE_NOTE = "not kept loaded: it found no device on this machine (checked in a separate process)"


def reset_registrations() -> None:
    """Forget what was registered (tests)."""
    with _lock:
        _registered.clear()
        _errors.clear()
        _without_devices.clear()


def set_plugin_probe(probe: Probe | None) -> None:
    """Ask `probe` ({ep: devices offered, or why it could not tell} for (ep, library) pairs) before loading a
    bundled plugin EP; load none that offers no device or that the probe could not try (a library that
    crashed or hung its process), and say why (None: register every plugin, as a command's process does)."""
    global _probe_with
    _probe_with = probe


def registration(ep: str) -> Registration | None:
    """Where the EP ONNX Runtime uses for `ep` came from (None: built in or not registered)."""
    with _lock:
        return _registered.get(ep)


_API_MISMATCH = re.compile(r"API version\s*\[?(\d+)\]?.*?\[\s*1\s*,\s*(\d+)\s*\]", re.IGNORECASE | re.DOTALL)
_CRT = re.compile(r"msvcp140|vcruntime140|initialization routine failed|error:?\s*1114\b", re.IGNORECASE)
_MISSING = re.compile(r"error:?\s*126\b|specified module could not be found|cannot open shared object", re.IGNORECASE)


def explain_load_error(ep: str, error: BaseException | str, ort_version: str = "") -> str:
    """Why a plugin EP library did not load, in plain words (the known failures users report)."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    name = short_ep_name(ep)
    ort = f"ONNX Runtime {ort_version}" if ort_version else "this ONNX Runtime"
    found = _API_MISMATCH.search(text)
    if found:
        wanted, supported = found.groups()
        return (
            f"the {name} library was built for a newer ONNX Runtime (API {wanted}) than {ort} (API {supported} "
            f"at most). Update NPU Studio, or use an {name} version made for {ort}."
        )
    if _CRT.search(text):
        return (
            f"the {name} library could not start because another package loaded an older Microsoft C++ runtime "
            "(msvcp140.dll) into the app first (winrt-runtime 3.x bundles one). Remove that package or update it "
            f"(winrt-runtime 4.x bundles none), then restart. Detail: {first}"
        )
    if _MISSING.search(text):
        return (
            f"the {name} library could not be loaded: it or a DLL it needs is missing ({first}). Reinstall NPU "
            "Studio; for an NPU, also check its driver in Device Manager."
        )
    return f"the {name} library could not be loaded: {first}"


def _register(ep: str, library: str, source: str, version: str) -> str:
    """Register one library under `ep` (caller holds the lock). Returns the error text ("" = registered)."""
    if ep in _registered:
        return ""
    if (ep, source) in _errors:
        return _errors[(ep, source)]
    try:
        runtime.ort().register_execution_provider_library(ep, library)
    except Exception as exc:  # a broken plugin must not stop discovery
        if "already registered" in str(exc):  # by this process earlier (another module, or before a reset)
            _registered[ep] = Registration(ep, library, source, version)
            return ""
        message = explain_load_error(ep, exc, runtime.version())
        _errors[(ep, source)] = message
        log.warning("could not register %s from %s (%s): %s", ep, source, library, exc)
        return message
    _registered[ep] = Registration(ep, library, source, version)
    log.info("registered %s %s from %s (%s)", ep, version, library, source)
    return ""


def register_plugins(catalog: CatalogReport | None = None) -> tuple[PluginStatus, ...]:
    """Register every plugin EP that can be: ready catalog EPs first, then the bundled plugins for the
    EPs the catalog did not provide. Idempotent; never raises."""
    statuses: list[PluginStatus] = []
    catalog_name = EpSource.CATALOG.value
    with _lock:
        for p in catalog.providers if catalog is not None else ():
            if p.state != ReadyState.READY or not p.library_path:
                statuses.append(
                    PluginStatus(
                        p.name, catalog_name, installed=p.state == ReadyState.NOT_READY, registered=False,
                        version=p.version, source=catalog_name, state=p.state.value,
                    )
                )
                continue
            error = _register(p.name, p.library_path, catalog_name, p.version)
            reg = _registered.get(p.name)
            statuses.append(
                PluginStatus(
                    p.name, catalog_name, installed=True,
                    registered=reg is not None and reg.source == catalog_name,
                    library=p.library_path, version=p.version, error=error, source=catalog_name, state=p.state.value,
                )
            )
        candidates: list[tuple[BundledPlugin, str, str, str]] = []  # (plugin, ep, library, version)
        for bundled in BUNDLED_PLUGINS:
            module = runtime.plugin(bundled.module)
            if module is None:
                statuses.append(PluginStatus(bundled.ep, bundled.package, installed=False, registered=False))
                continue
            version = runtime.package_version(module, bundled.package)
            try:
                get_name = getattr(module, "get_ep_name", None)
                ep = str(get_name()) if get_name is not None else bundled.ep
                library = str(module.get_library_path())
            except Exception as exc:
                message = explain_load_error(bundled.ep, exc)
                statuses.append(PluginStatus(bundled.ep, bundled.package, True, False, version=version, error=message))
                continue
            current = _registered.get(ep)
            if current is not None and current.source != EpSource.BUNDLED.value:
                statuses.append(
                    PluginStatus(
                        ep, bundled.package, installed=True, registered=False, library=library, version=version,
                        note=f"not used: {short_ep_name(ep)} {current.version} from the {current.source} is registered",
                    )
                )
                continue
            candidates.append((bundled, ep, library, version))
        if _probe_with is not None:
            _probe(_probe_with, [(ep, library) for _, ep, library, _ in candidates])
        for bundled, ep, library, version in candidates:
            if ep in _without_devices:
                statuses.append(
                    PluginStatus(
                        ep, bundled.package, True, registered=False, version=version, note=NO_DEVICE_NOTE,
                        no_device=True,
                    )
                )
                continue
            error = _register(ep, library, EpSource.BUNDLED.value, version)
            statuses.append(
                PluginStatus(ep, bundled.package, True, registered=not error, library=library if not error else "",
                             version=version, error=error)
            )
    return tuple(statuses)


def _probe(probe: Probe, candidates: list[tuple[str, str]]) -> None:
    """Ask which candidates offer no device (caller holds the lock); each is asked once a process."""
    unasked = [
        (ep, library) for ep, library in candidates
        if ep not in _registered and ep not in _without_devices and (ep, EpSource.BUNDLED.value) not in _errors
    ]
    if not unasked:
        return
    for ep, answer in probe(unasked).items():
        if isinstance(answer, str):  # its library crashed or hung the process that tried it
            _errors[(ep, EpSource.BUNDLED.value)] = f"the {short_ep_name(ep)} library {answer}"
        elif answer == 0:
            _without_devices.add(ep)
            log.info("%s offers no device on this machine: not loaded", ep)


def _sibling(library: str, name: str) -> str:
    sep = "\\" if "\\" in library else "/"
    return library.rsplit(sep, 1)[0] + sep + name if sep in library else name


def qnn_backend_path() -> str:
    """QnnHtp.dll of the QNN EP in use: the catalog EP's own copy (a QNN SDK of its version), else the
    bundled plugin's; a bare name lets the QNN EP search its own folder."""
    reg = registration(QNN_EP)
    if reg is not None and reg.source == EpSource.CATALOG.value:
        return _sibling(reg.library, "QnnHtp.dll")
    plugin = runtime.qnn_plugin()
    get_htp = getattr(plugin, "get_qnn_htp_path", None) if plugin is not None else None
    return str(get_htp()) if get_htp is not None else "QnnHtp.dll"


def plugin_library(ep: str) -> str:
    """The library ONNX Runtime uses for plugin EP `ep` ("" when built in or not registered)."""
    reg = registration(ep)
    if reg is not None:
        return reg.library
    if ep == QNN_EP:  # not discovered yet in this process: the bundled plugin is the one it would use
        plugin = runtime.qnn_plugin()
        return str(plugin.get_library_path()) if plugin is not None else ""
    return ""
