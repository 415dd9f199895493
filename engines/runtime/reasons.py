"""Why an NPU or GPU is not usable, in plain words: per EP, per platform, per source (Windows ML
catalog / bundled plugin), and the drivers each EP's vendor documents as supported."""

from __future__ import annotations

import platform
import sys

from engines.runtime.catalog import CatalogReport, ReadyState
from engines.runtime.registration import (
    DML_EP,
    OPENVINO_EP,
    QNN_EP,
    VITISAI_EP,
    PluginStatus,
    Registration,
)
from engines.types import Device, DeviceType, EpSource, short_ep_name

# vendor_id -> vendor (PCI / ACPI ids as ONNX Runtime reports them)
VENDOR_IDS = {
    0x4D4F4351: "Qualcomm", 0x5143: "Qualcomm", 0x8086: "Intel", 0x1002: "AMD", 0x1022: "AMD", 0x10DE: "NVIDIA"
}
EP_VENDOR = {
    QNN_EP: "Qualcomm",
    OPENVINO_EP: "Intel",
    VITISAI_EP: "AMD",
    "NvTensorRTRTXExecutionProvider": "NVIDIA",
    "MIGraphXExecutionProvider": "AMD",
}
EP_HARDWARE = {
    QNN_EP: "Qualcomm Hexagon NPU",
    OPENVINO_EP: "Intel NPU",
    VITISAI_EP: "AMD Ryzen AI NPU",
    DML_EP: "DirectX 12 GPU",
    "NvTensorRTRTXExecutionProvider": "NVIDIA RTX GPU",
    "MIGraphXExecutionProvider": "AMD Radeon GPU",
}
# NPU driver range each catalog EP's vendor documents (inclusive; None = no bound).
DRIVER_RANGES: dict[str, tuple[str, str | None]] = {
    QNN_EP: ("30.0.140.0", None),
    OPENVINO_EP: ("32.0.100.4239", None),
    VITISAI_EP: ("32.0.203.280", "32.0.203.297"),
}
# Intel NPU PCI device ids of Meteor Lake (Core Ultra Series 1): the OpenVINO catalog EP does not list it.
METEOR_LAKE_NPU_IDS = frozenset({0x7D1D})


def is_windows() -> bool:
    return sys.platform == "win32"


def is_windows_arm64() -> bool:
    return is_windows() and platform.machine().upper() in {"ARM64", "AARCH64"}


def vendor_of(vendor: str, vendor_id: int, ep: str) -> str:
    """A readable vendor: ONNX Runtime's text, else from the vendor id, else the EP's maker."""
    if vendor and vendor.strip() and not vendor.lower().startswith("unknown"):
        for known in ("Qualcomm", "Intel", "AMD", "NVIDIA"):
            if known.lower() in vendor.lower():
                return known
        return vendor.strip()
    return VENDOR_IDS.get(vendor_id, EP_VENDOR.get(ep, ""))


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.replace(",", ".").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def driver_problem(ep: str, device_type: DeviceType, driver: str) -> str:
    """A plain-words reason when the NPU driver is outside the range the EP supports ("" = fine / unknown)."""
    if device_type != DeviceType.NPU or not driver or ep not in DRIVER_RANGES:
        return ""
    low, high = DRIVER_RANGES[ep]
    have = _version_tuple(driver)
    if not have:
        return ""
    name, vendor = short_ep_name(ep), EP_VENDOR.get(ep, "")
    if have < _version_tuple(low):
        return (
            f"The {vendor} NPU driver {driver} is older than the {low} that {name} needs. "
            f"Update it (Windows Update > Advanced options > Optional updates, or {vendor}'s driver page)."
        )
    if high is not None and have > _version_tuple(high):
        return (
            f"The {vendor} NPU driver {driver} is newer than the {high} that this {name} supports (its makers "
            f"publish a maximum too). Wait for an updated {name} from Windows Update, or install the driver "
            f"{high} from {vendor}'s site."
        )
    return ""


def source_label(reg: Registration | None, built_in: bool) -> str:
    if reg is not None:
        return reg.source
    return EpSource.BUILT_IN.value if built_in else ""


def missing_reason(
    ep: str,
    catalog: CatalogReport,
    plugins: tuple[PluginStatus, ...],
    registered: Registration | None,
    cpu_vendor: str = "",
    other_types: list[str] | None = None,
) -> str:
    """Why `ep` lists no usable device here."""
    name = short_ep_name(ep)
    hardware = EP_HARDWARE.get(ep, f"{name} device")
    mine = [p for p in plugins if p.ep == ep]
    if registered is not None:
        where = _where(name, registered.version, registered.source)
        hint = _driver_hint(ep, cpu_vendor)
        if other_types:
            vendor = EP_VENDOR.get(ep, "")
            found = " and ".join(f"the {vendor} {kind}".replace("  ", " ") for kind in other_types)
            return f"{where} found {found} but no {hardware}. {hint}"
        return f"{where} is registered but found no {hardware}. {hint}"
    unloaded = [p for p in mine if p.no_device]
    if unloaded:
        where = _where(name, unloaded[0].version, unloaded[0].source)
        return f"{where} found no device on this machine, so it is not kept loaded. {_driver_hint(ep, cpu_vendor)}"
    errors = [p for p in mine if p.error]
    if errors:
        return "; ".join(f"{p.package}: {p.error}" for p in errors) + "."
    offered = catalog.find(ep)
    if offered is not None and offered.state == ReadyState.NOT_PRESENT:
        return (
            f"{name} {offered.version} is offered by Windows ML but not downloaded yet. Download it from "
            "Windows Update (Devices > Download, or `npu-studio devices --download-eps`); it is never "
            "downloaded without asking."
        )
    if offered is not None and offered.state == ReadyState.NOT_READY:
        return (
            f"{name} {offered.version} is on this PC but Windows ML has not prepared it yet. Prepare it "
            "(Devices > Download, or `npu-studio devices --download-eps`)."
        )
    if not is_windows():
        return _off_windows(ep, mine)
    return _on_windows(ep, catalog, mine)


def _where(name: str, version: str, source: str) -> str:
    """"OpenVINO 1.8.1 (bundled plugin)": an EP, its version and where it came from."""
    return f"{name} {version} ({source})".replace("  ", " ")


def _driver_hint(ep: str, cpu_vendor: str) -> str:
    """What to check when `ep` is loaded but finds no device (or offers none)."""
    vendor = EP_VENDOR.get(ep, "")
    if cpu_vendor and vendor and cpu_vendor != vendor and ep in (OPENVINO_EP, VITISAI_EP):
        return f"This machine has no {vendor} NPU or GPU (its CPU is {cpu_vendor})."
    return {
        QNN_EP: "Check the Snapdragon NPU driver (Device Manager > Neural processors).",
        OPENVINO_EP: "Check the Intel NPU driver (Device Manager > Neural processors).",
        VITISAI_EP: "Check the AMD NPU driver (Device Manager > Neural processors).",
    }.get(ep, "Check the device driver.")


def _off_windows(ep: str, mine: list[PluginStatus]) -> str:
    here = f"this machine is {platform.system()} {platform.machine()}"
    if ep == QNN_EP:
        return f"The Qualcomm NPU (QNN) needs Windows on ARM64 (Snapdragon X) with onnxruntime-qnn; {here}."
    if ep == OPENVINO_EP:
        if any(p.installed for p in mine):
            return "onnxruntime-ep-openvino is installed but was not registered."
        return f"The OpenVINO plugin EP (onnxruntime-ep-openvino) is not installed; {here}."
    if ep == VITISAI_EP:
        return f"The AMD Ryzen AI NPU (VitisAI) is reached through Windows ML on Windows 11; {here}."
    if ep == DML_EP:
        return f"DirectML (GPU) needs Windows with DirectX 12; {here}."
    return f"{short_ep_name(ep)} is not available; {here}."


def _on_windows(ep: str, catalog: CatalogReport, mine: list[PluginStatus]) -> str:
    name = short_ep_name(ep)
    catalog_text = catalog.reason or f"Windows ML's catalog does not offer {name} for this PC."
    bundled = next((p for p in mine if p.source == EpSource.BUNDLED.value), None)
    if ep == DML_EP:
        return (
            "This build has no DirectML provider. Reinstall NPU Studio (its ONNX Runtime is the Windows ML "
            "build, which carries DirectML), and check that the GPU driver supports DirectX 12."
        )
    if ep == QNN_EP:
        if not is_windows_arm64():
            return "The Qualcomm NPU (QNN) exists only on Windows on ARM64 (Snapdragon X); this PC is x64."
        tail = "" if bundled is None or bundled.installed else " The bundled onnxruntime-qnn is not installed either."
        return f"{catalog_text}{tail} Check the Snapdragon NPU driver (Device Manager > Neural processors)."
    if ep == OPENVINO_EP:
        if is_windows_arm64():
            return "Intel NPUs exist only in x64 PCs (Core Ultra); this PC is ARM64."
        tail = "" if bundled is None or bundled.installed else " The bundled onnxruntime-ep-openvino is not installed."
        return (
            f"{catalog_text}{tail} The OpenVINO catalog EP serves Intel Core Ultra 200 (Arrow Lake) and newer NPUs "
            "with driver 32.0.100.4239 or newer; Meteor Lake (Core Ultra Series 1) NPUs are served only by the "
            "bundled plugin."
        )
    if ep == VITISAI_EP:
        if is_windows_arm64():
            return "AMD Ryzen AI NPUs exist only in x64 PCs; this PC is ARM64."
        return (
            f"{catalog_text} VitisAI comes only from Windows ML (there is no VitisAI package on PyPI): it needs a "
            "Ryzen AI NPU with an NPU driver between 32.0.203.280 and 32.0.203.297."
        )
    return catalog_text


def meteor_lake_note(device: Device) -> str:
    if device.ep == OPENVINO_EP and device.type == DeviceType.NPU and device.device_id in METEOR_LAKE_NPU_IDS:
        return "Meteor Lake NPU: Windows ML's OpenVINO EP does not support it; the bundled OpenVINO plugin does."
    return ""
