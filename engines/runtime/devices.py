"""Device discovery: which execution providers this build has, which plugin EPs came from Windows ML's
catalog or the bundled packages, and which hardware devices ONNX Runtime reports, as plain dataclasses
with the reason, in plain words, for every NPU and GPU that is not usable."""

from __future__ import annotations

import logging
import platform
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from engines import runtime
from engines.runtime import catalog as winml
from engines.runtime.catalog import CatalogReport
from engines.runtime.planning import order_key
from engines.runtime.reasons import (
    EP_HARDWARE,
    EP_VENDOR,
    driver_problem,
    meteor_lake_note,
    missing_reason,
    source_label,
    vendor_of,
)
from engines.runtime.registration import (
    DML_EP,
    OPENVINO_EP,
    QNN_EP,
    VITISAI_EP,
    PluginStatus,
    registration,
)
from engines.runtime.registration import register_plugins as _register_plugins
from engines.types import CPU_EP, EP_DEVICE_TYPE, Device, DeviceChoice, DeviceType, Policy

__all__ = ["DiscoveryReport", "discover", "discover_for", "platform_tag", "register_plugins"]

log = logging.getLogger(__name__)

# EPs that are build details, not devices a user can pick.
_NOT_DEVICES = {"AzureExecutionProvider"}
# NPU / GPU EPs every device list accounts for, usable or not (others appear when the catalog offers them).
_EXPECTED = (QNN_EP, OPENVINO_EP, VITISAI_EP, DML_EP)


@dataclass(frozen=True)
class DiscoveryReport:
    ort_version: str
    platform: str
    available_providers: tuple[str, ...]
    devices: tuple[Device, ...]
    plugins: tuple[PluginStatus, ...] = field(default=())
    catalog: CatalogReport = field(default_factory=lambda: CatalogReport(False, "not read"))

    def usable(self, device_type: DeviceType | None = None) -> list[Device]:
        return [d for d in self.devices if d.usable and (device_type is None or d.type == device_type)]

    def find_ep(self, ep: str) -> list[Device]:
        return [d for d in self.devices if d.ep == ep]

    def downloadable(self) -> list[str]:
        """Catalog EPs that wait for a download (or preparation) the user has not agreed to yet."""
        return [p.name for p in self.catalog.providers if p.state.value != "ready"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "onnxruntime": self.ort_version,
            "platform": self.platform,
            "available_providers": list(self.available_providers),
            "windows_ml": self.catalog.as_dict(),
            "plugins": [vars(p) for p in self.plugins],
            "devices": [
                {
                    "ep": d.ep,
                    "type": d.type.value,
                    "vendor": d.vendor,
                    "vendor_id": d.vendor_id,
                    "device_id": d.device_id,
                    "source": d.source,
                    "ep_vendor": d.ep_vendor,
                    "ep_version": d.ep_version,
                    "driver_version": d.driver_version,
                    "description": d.description,
                    "usable": d.usable,
                    "reason": d.reason,
                    "plugin_library": d.plugin_library,
                    "metadata": dict(d.metadata),
                }
                for d in self.devices
            ],
        }


def platform_tag() -> str:
    return f"{sys.platform}-{platform.machine().lower()}"


def register_plugins(catalog: CatalogReport | None = None) -> tuple[PluginStatus, ...]:
    """Register the plugin EPs (Windows ML catalog first, bundled packages second), once per process."""
    return _register_plugins(winml.read_catalog() if catalog is None else catalog)


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


def _with_source(device: Device, built_in: set[str]) -> Device:
    """Fill in source, vendor, EP version and the driver check the catalog and plugins tell us about."""
    reg = registration(device.ep)
    source = source_label(reg, device.ep in built_in or reg is None)
    vendor = vendor_of(device.vendor, device.vendor_id, device.ep) if device.type != DeviceType.CPU else device.vendor
    ep_version = device.ep_version or (reg.version if reg is not None else "")
    updated = replace(
        device,
        source=source,
        vendor=vendor,
        ep_version=ep_version,
        plugin_library=reg.library if reg is not None else device.plugin_library,
    )
    problem = driver_problem(device.ep, device.type, device.driver_version) if source == "Windows ML catalog" else ""
    note = meteor_lake_note(updated)
    if note:
        updated = replace(updated, metadata=(*updated.metadata, ("note", note)))
    if problem:
        updated = replace(updated, usable=False, reason=problem)
    return updated


def discover_for(choice: DeviceChoice) -> DiscoveryReport:
    """Discovery as far as `choice` needs it: the CPU asked for by name needs neither Windows ML's catalog
    nor the plugin EPs (loading OpenVINO's libraries and reading the catalog are most of discovery)."""
    cpu = choice.ep == CPU_EP or (choice.ep is None and choice.policy == Policy.CPU_ONLY)
    return discover(plugins=not cpu)


def discover(*, plugins: bool = True) -> DiscoveryReport:
    """Everything ONNX Runtime and Windows ML can tell about this machine's devices, with reasons for
    what is missing. Never downloads; a failing EP never stops the others. `plugins=False`: only what the
    build itself has (no catalog, no plugin EPs registered, no cards for the devices they would bring)."""
    ort = runtime.ort()
    catalog = winml.read_catalog() if plugins else CatalogReport(False, "Not read: only the CPU was asked for.")
    plugins_found = _register_plugins(catalog) if plugins else ()
    providers = tuple(str(p) for p in ort.get_available_providers())
    built_in = set(providers)
    devices: list[Device] = []
    get_ep_devices = getattr(ort, "get_ep_devices", None)
    if get_ep_devices is not None:
        try:
            raw = list(get_ep_devices())
        except Exception as exc:
            log.warning("get_ep_devices failed: %s", exc)
            raw = []
        for item in raw:
            try:
                devices.append(_with_source(_from_ep_device(item), built_in))
            except Exception as exc:  # one odd device record must not hide the others
                log.warning("skipping a device ONNX Runtime reported: %s", exc)
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
                source="built in",
            )
        )
        seen_eps.add(ep)
    cpu_vendor = next((vendor_of(d.vendor, d.vendor_id, d.ep) for d in devices if d.ep == CPU_EP and d.vendor), "")
    expected = list(_EXPECTED) + [p.name for p in catalog.providers if p.name not in _EXPECTED] if plugins else []
    listed = {(d.ep, d.type) for d in devices}
    for ep in expected:
        wanted = EP_DEVICE_TYPE.get(ep, DeviceType.NPU)
        # OpenVINO may list the Intel GPU and CPU but no NPU: the NPU still gets its card and reason
        if (ep, wanted) in listed or ep == CPU_EP or (ep in seen_eps and wanted != DeviceType.NPU):
            continue
        others = sorted({d.type.value for d in devices if d.ep == ep})
        reg = registration(ep)
        devices.append(
            Device(
                ep=ep,
                type=EP_DEVICE_TYPE.get(ep, DeviceType.NPU),
                vendor=EP_VENDOR.get(ep, ""),
                usable=False,
                reason=missing_reason(ep, catalog, plugins_found, reg, cpu_vendor, others),
                description=EP_HARDWARE.get(ep, ""),
                ep_version=reg.version if reg is not None else "",
                source=reg.source if reg is not None else "",
                plugin_library=reg.library if reg is not None else "",
            )
        )
        seen_eps.add(ep)
    if CPU_EP not in seen_eps:  # always present in practice; keep the app honest if not
        devices.append(Device(CPU_EP, DeviceType.CPU, "", False, "This build reports no CPU provider."))
    devices.sort(key=lambda d: (not d.usable, *order_key(d.type, d.ep)))  # usable first, then the planner's order
    return DiscoveryReport(runtime.version(), platform_tag(), providers, tuple(devices), plugins_found, catalog)
