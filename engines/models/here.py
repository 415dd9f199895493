"""Whether this machine can run a model found by a scan, in plain words ("needs the Qualcomm NPU: not
on this machine"). The answer comes from the one planner (engines/runtime/planning.py) over the
devices this machine really has, exactly as opening the model would plan it: nothing is ranked here."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engines.models.found import FoundModel, with_verdict
from engines.runtime.planning import DeviceSet, plan_device
from engines.runtime.reasons import EP_VENDOR
from engines.types import CPU_EP, DeviceChoice, short_ep_name

RUNS, NEEDS, UNUSABLE = "runs", "needs", "unusable"


@dataclass(frozen=True)
class MachineDevices:
    chat: DeviceSet  # what onnxruntime-genai can use here
    vision: DeviceSet  # what ONNX Runtime can use here


def machine_devices() -> MachineDevices:
    """The devices of this machine (one discovery, minus those that failed in this run)."""
    from engines.chat.folder import GENAI_PROVIDER_NAMES
    from engines.runtime.devices import discover
    from engines.runtime.fallback import HEALTH

    devices = HEALTH.apply(discover()).devices
    return MachineDevices(DeviceSet.from_devices(devices, only=GENAI_PROVIDER_NAMES), DeviceSet.from_devices(devices))


def hardware(ep: str, device: str) -> str:
    """ "the Qualcomm NPU", "the Intel GPU", "a DirectML GPU"."""
    vendor = EP_VENDOR.get(ep) or ("NVIDIA" if ep == "CUDAExecutionProvider" else "")
    if vendor:
        return f"the {vendor} {device}"
    return f"a {short_ep_name(ep)} {device}"


def judge(found: FoundModel, devices: MachineDevices) -> FoundModel:
    """`found` with its verdict: runs here (and where), needs a device this machine lacks, or cannot be
    used by NPU Studio (and why)."""
    if found.problem:
        return with_verdict(found, UNUSABLE, f"NPU Studio cannot use it: {found.problem}")
    target = found.target
    if not target.ep:  # a classifier: NPU Studio places it itself, as `--device auto` does
        plan = plan_device(DeviceChoice(), devices.vision)
        return with_verdict(found, RUNS, f"runs here (automatic: the {plan.device_type.value})")
    if target.ep == CPU_EP:
        return with_verdict(found, RUNS, "runs here on the CPU")
    plan = plan_device(DeviceChoice(ep=target.ep), devices.chat, runtime="chat")
    # One EP can drive several devices (OpenVINO: NPU, GPU, CPU): the one the config names must be here.
    on_device = any(ep == target.ep and kind.value == target.device for ep, kind in devices.chat.usable)
    if not plan.fell_back and on_device:
        return with_verdict(found, RUNS, f"runs here on {hardware(target.ep, target.device)} ({target.label})")
    where = hardware(target.ep, target.device)
    if found.precompiled:
        instead = "its precompiled nodes run on that device only"
    else:
        instead = "NPU Studio would run it on the CPU instead, more slowly"
    return with_verdict(found, NEEDS, f"needs {where}: not on this machine ({instead})")


def mark_added(models: Iterable[FoundModel], entries: Iterable[Any]) -> list[FoundModel]:
    """`models`, each with the name it has in the library when a library entry refers to its folder."""
    added: dict[str, str] = {}
    for entry in entries:
        reference = getattr(entry, "reference", "")
        if reference:
            added[os.path.normcase(os.path.realpath(reference))] = entry.name
    return [replace(m, in_library=added.get(os.path.normcase(os.path.realpath(Path(m.folder))), "")) for m in models]


def npu_models(models: Iterable[FoundModel], ep: str) -> list[FoundModel]:
    """The chat models found whose config targets the NPU through `ep` (a catalog's per-vendor section)."""
    return [m for m in models if m.kind == "genai-llm" and m.target.ep == ep and m.target.device == "NPU"]
