"""Device discovery: which execution providers this build has, which plugin EPs are installed and
registered, and which hardware devices ONNX Runtime reports, as plain dataclasses with reasons."""

from __future__ import annotations

import logging
import platform
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from engines import runtime
from engines.types import CPU_EP, EP_DEVICE_TYPE, Device, DeviceType

log = logging.getLogger(__name__)

QNN_EP = "QNNExecutionProvider"
DML_EP = "DmlExecutionProvider"

# EPs that are build details, not devices a user can pick.
_NOT_DEVICES = {"AzureExecutionProvider"}

_registered: dict[str, str] = {}  # ep name -> library path, registered in this process
_register_errors: dict[str, str] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class PluginStatus:
    ep: str
    package: str
    installed: bool
    registered: bool
    library: str = ""
    version: str = ""
    error: str = ""


@dataclass(frozen=True)
class DiscoveryReport:
    ort_version: str
    platform: str
    available_providers: tuple[str, ...]
    devices: tuple[Device, ...]
    plugins: tuple[PluginStatus, ...] = field(default=())

    def usable(self, device_type: DeviceType | None = None) -> list[Device]:
        return [d for d in self.devices if d.usable and (device_type is None or d.type == device_type)]

    def find_ep(self, ep: str) -> list[Device]:
        return [d for d in self.devices if d.ep == ep]

    def as_dict(self) -> dict[str, Any]:
        return {
            "onnxruntime": self.ort_version,
            "platform": self.platform,
            "available_providers": list(self.available_providers),
            "plugins": [vars(p) for p in self.plugins],
            "devices": [
                {
                    "ep": d.ep,
                    "type": d.type.value,
                    "vendor": d.vendor,
                    "vendor_id": d.vendor_id,
                    "device_id": d.device_id,
                    "ep_vendor": d.ep_vendor,
                    "ep_version": d.ep_version,
                    "driver_version": d.driver_version,
                    "description": d.description,
                    "usable": d.usable,
                    "reason": d.reason,
                    "metadata": dict(d.metadata),
                }
                for d in self.devices
            ],
        }


def platform_tag() -> str:
    return f"{sys.platform}-{platform.machine().lower()}"


def is_windows_arm64() -> bool:
    return sys.platform == "win32" and platform.machine().upper() in {"ARM64", "AARCH64"}


def is_windows_x64() -> bool:
    return sys.platform == "win32" and platform.machine().upper() in {"AMD64", "X86_64"}


def register_plugins() -> tuple[PluginStatus, ...]:
    """Register installed plugin EPs (onnxruntime-qnn) with ONNX Runtime, once per process."""
    ort = runtime.ort()
    qnn = runtime.qnn_plugin()
    if qnn is None:
        return (PluginStatus(QNN_EP, "onnxruntime-qnn", installed=False, registered=False),)
    ep_name = str(getattr(qnn, "get_ep_name", lambda: QNN_EP)())
    version = str(getattr(qnn, "__version__", ""))
    with _lock:
        if ep_name not in _registered and ep_name not in _register_errors:
            try:
                library = str(qnn.get_library_path())
                ort.register_execution_provider_library(ep_name, library)
                _registered[ep_name] = library
                log.info("registered plugin EP %s from %s", ep_name, library)
            except Exception as exc:  # a broken plugin must not stop discovery
                _register_errors[ep_name] = str(exc)
                log.warning("could not register plugin EP %s: %s", ep_name, exc)
        return (
            PluginStatus(
                ep_name,
                "onnxruntime-qnn",
                installed=True,
                registered=ep_name in _registered,
                library=_registered.get(ep_name, ""),
                version=version,
                error=_register_errors.get(ep_name, ""),
            ),
        )


def reset_registrations() -> None:
    """Forget what was registered (tests)."""
    with _lock:
        _registered.clear()
        _register_errors.clear()


def _device_type(raw: Any) -> DeviceType:
    name = str(getattr(raw, "name", raw)).rsplit(".", 1)[-1].upper()
    return DeviceType(name) if name in DeviceType.__members__ else DeviceType.CPU


def _metadata(raw: Any) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in dict(raw).items()}
    except (TypeError, ValueError):
        return {}


def _from_ep_device(ep_device: Any) -> Device:
    hw = ep_device.device
    ep_meta = _metadata(getattr(ep_device, "ep_metadata", {}))
    hw_meta = _metadata(getattr(hw, "metadata", {}))
    driver = next((v for k, v in hw_meta.items() if "driver" in k.lower() and "version" in k.lower()), "")
    description = hw_meta.get("Description", "") or hw_meta.get("description", "")
    return Device(
        ep=str(ep_device.ep_name),
        type=_device_type(hw.type),
        vendor=str(getattr(hw, "vendor", "")),
        usable=True,
        vendor_id=int(getattr(hw, "vendor_id", 0) or 0),
        device_id=int(getattr(hw, "device_id", 0) or 0),
        ep_vendor=str(getattr(ep_device, "ep_vendor", "")),
        ep_version=ep_meta.get("version", ""),
        driver_version=driver,
        description=description,
        metadata=tuple(sorted({**hw_meta, **{f"ep.{k}": v for k, v in ep_meta.items()}}.items())),
    )


def _qnn_missing_reason(plugin: PluginStatus | None, providers: tuple[str, ...]) -> str:
    if plugin is not None and plugin.installed and plugin.error:
        return (
            f"onnxruntime-qnn is installed but its library could not be loaded: {plugin.error}. "
            "Reinstall NPU Studio or update the Qualcomm NPU driver."
        )
    if plugin is not None and plugin.registered:
        return (
            "onnxruntime-qnn is installed and registered, but it found no Qualcomm NPU. "
            "Check that the Snapdragon NPU driver is installed (Device Manager > Neural processors)."
        )
    if is_windows_arm64():
        return "onnxruntime-qnn is not installed in this build. Reinstall NPU Studio (ARM64 MSI)."
    return (
        f"The Qualcomm NPU (QNN) needs Windows on ARM64 (Snapdragon X) with onnxruntime-qnn; "
        f"this machine is {platform.system()} {platform.machine()}."
    )


def _dml_missing_reason() -> str:
    if is_windows_x64():
        return (
            "This build has no DirectML provider. Install the x64 MSI (onnxruntime-directml), "
            "or check that the GPU driver supports DirectX 12."
        )
    if is_windows_arm64():
        return "DirectML is not part of the ARM64 build; on Snapdragon use the NPU (QNN) or the CPU."
    return f"DirectML (GPU) needs Windows with DirectX 12; this machine is {platform.system()}."


def discover() -> DiscoveryReport:
    """Everything ONNX Runtime can tell about this machine's devices, with reasons for what is missing."""
    ort = runtime.ort()
    plugins = register_plugins()
    providers = tuple(str(p) for p in ort.get_available_providers())
    devices: list[Device] = []
    get_ep_devices = getattr(ort, "get_ep_devices", None)
    if get_ep_devices is not None:
        try:
            devices = [_from_ep_device(d) for d in get_ep_devices()]
        except Exception as exc:
            log.warning("get_ep_devices failed: %s", exc)
    seen_eps = {d.ep for d in devices}
    # EPs compiled into this build that list no hardware device (e.g. DirectML in the classic build):
    # usable through the provider list.
    for ep in providers:
        if ep in seen_eps or ep in _NOT_DEVICES:
            continue
        devices.append(
            Device(
                ep=ep,
                type=EP_DEVICE_TYPE.get(ep, DeviceType.CPU),
                vendor="",
                usable=True,
                ep_version=runtime.version(),
                description="Reported by the build (no device details)",
            )
        )
        seen_eps.add(ep)
    plugin_by_ep = {p.ep: p for p in plugins}
    if QNN_EP not in seen_eps:
        devices.append(
            Device(
                ep=QNN_EP,
                type=DeviceType.NPU,
                vendor="Qualcomm",
                usable=False,
                reason=_qnn_missing_reason(plugin_by_ep.get(QNN_EP), providers),
                description="Qualcomm Hexagon NPU",
            )
        )
    if DML_EP not in seen_eps:
        devices.append(
            Device(
                ep=DML_EP,
                type=DeviceType.GPU,
                vendor="",
                usable=False,
                reason=_dml_missing_reason(),
                description="DirectX 12 GPU",
            )
        )
    if CPU_EP not in seen_eps:  # always present in practice; keep the app honest if not
        devices.append(Device(CPU_EP, DeviceType.CPU, "", False, "This build reports no CPU provider."))
    order = {DeviceType.NPU: 0, DeviceType.GPU: 1, DeviceType.CPU: 2}
    devices.sort(key=lambda d: (not d.usable, order[d.type], d.ep))
    return DiscoveryReport(runtime.version(), platform_tag(), providers, tuple(devices), plugins)
