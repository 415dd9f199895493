"""The one meaning of a device choice, for ONNX Runtime sessions and onnxruntime-genai models alike.

A DeviceChoice (a policy such as `auto` or `npu`, or one explicit EP) and the set of devices a runtime
can use become one EP to ask for, plus the reason when that is not what the choice meant. Sessions
(engines/runtime/sessions.py) and chat models (engines/chat/model.py) both plan through `plan_device`,
so the shared device picker means the same thing on the Classify and the Chat view:

==============  ============================================================================
auto            the NPU, else the GPU, else the CPU (the first usable device in that order)
npu / gpu       that device; without one, the CPU with the reason said (strict: an error)
cpu             the CPU
efficiency      the NPU, else the CPU (never the GPU: it draws the most power)
performance     the GPU, else the NPU, else the CPU
==============  ============================================================================

It is also the one place that ranks devices: device types NPU > GPU > CPU (`RANKING`), and within a type
the EPs in `EP_PREFERENCE` (`order_key`). Discovery sorts its device list by it, the chat runtime's device
set follows it, and a failed device's alternatives are offered in its order. And it is the one place that
predicts a fallback before anything loads (`predict_device`: the views' chip, banner, picker and captions).

Pure Python over plain data: no onnxruntime import here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from engines.errors import DeviceUnavailableError
from engines.types import CPU_EP, EP_DEVICE_TYPE, Device, DeviceChoice, DeviceType, Policy, short_ep_name

NPU, GPU, CPU = DeviceType.NPU, DeviceType.GPU, DeviceType.CPU

# The one ranking of device types, best first.
RANKING: tuple[DeviceType, ...] = (NPU, GPU, CPU)

# Within one device type, the EPs to use first when several can drive it (an EP not named here comes
# after these, by name): the vendor's own NPU EP, then the portable ones; DirectML before the vendor GPU EPs.
EP_PREFERENCE: tuple[str, ...] = (
    "QNNExecutionProvider",
    "OpenVINOExecutionProvider",
    "VitisAIExecutionProvider",
    "DmlExecutionProvider",
    "CUDAExecutionProvider",
    "NvTensorRTRTXExecutionProvider",
    "WebGpuExecutionProvider",
    "MIGraphXExecutionProvider",
    CPU_EP,
)

# Device types each policy accepts, best first. A policy that ends with the CPU never "falls back".
ORDER: Mapping[Policy, tuple[DeviceType, ...]] = {
    Policy.AUTO: RANKING,
    Policy.PREFER_NPU: (NPU,),
    Policy.PREFER_GPU: (GPU,),
    Policy.CPU_ONLY: (CPU,),
    Policy.MAX_EFFICIENCY: (NPU, CPU),
    Policy.MAX_PERFORMANCE: (GPU, NPU, CPU),
}

# What each choice means, in the words the README and the device picker's tooltip use.
MEANING: Mapping[Policy, str] = {
    Policy.AUTO: "The NPU if there is one, else the GPU, else the CPU.",
    Policy.PREFER_NPU: "The NPU; without one the CPU runs it and says why (strict: an error).",
    Policy.PREFER_GPU: "The GPU; without one the CPU runs it and says why (strict: an error).",
    Policy.CPU_ONLY: "The CPU only.",
    Policy.MAX_EFFICIENCY: "The NPU, else the CPU (never the GPU, which draws the most power).",
    Policy.MAX_PERFORMANCE: "The GPU, else the NPU, else the CPU.",
}

_STRICT_HINT = "Turn strict mode off to run on the CPU instead, or pick another device."


class Ranked(Protocol):
    """A device record: its type and the EP that drives it (a Device)."""

    @property
    def type(self) -> DeviceType: ...

    @property
    def ep(self) -> str: ...


D = TypeVar("D", bound=Ranked)


def rank(device_type: DeviceType) -> int:
    """0 for the best device type (the NPU), then the GPU, then the CPU."""
    return RANKING.index(device_type)


def order_key(device_type: DeviceType, ep: str) -> tuple[int, int, str]:
    """Sorts devices best first: by device type, then by EP within the type (`EP_PREFERENCE`)."""
    preferred = EP_PREFERENCE.index(ep) if ep in EP_PREFERENCE else len(EP_PREFERENCE)
    return rank(device_type), preferred, ep


def best_first(devices: Iterable[D]) -> list[D]:
    """`devices` in the planner's order: NPU, GPU, CPU, and within a type by `EP_PREFERENCE`."""
    return sorted(devices, key=lambda d: order_key(d.type, d.ep))


@dataclass(frozen=True)
class DeviceSet:
    """The devices one runtime can use now, by EP (best first within a type), and why others cannot."""

    usable: tuple[tuple[str, DeviceType], ...]
    reasons: Mapping[str, str] = field(default_factory=dict)  # key: an EP or a DeviceType value

    @classmethod
    def of(cls, eps: Iterable[str], reasons: Mapping[str, str] | None = None) -> DeviceSet:
        """A set from EP names (types from the well-known EP table; the CPU is always there)."""
        usable = [(ep, EP_DEVICE_TYPE.get(ep, CPU)) for ep in dict.fromkeys(eps)]
        if CPU_EP not in {ep for ep, _ in usable}:
            usable.append((CPU_EP, CPU))
        usable.sort(key=lambda item: order_key(item[1], item[0]))
        return cls(tuple(usable), dict(reasons or {}))

    @classmethod
    def from_devices(cls, devices: Iterable[Device], only: Iterable[str] | None = None) -> DeviceSet:
        """The usable ones among discovered devices (optionally only these EPs), with the reasons of the
        others (the first reason per EP and per device type)."""
        allowed = None if only is None else set(only) | {CPU_EP}
        usable: list[tuple[str, DeviceType]] = []
        reasons: dict[str, str] = {}
        for d in devices:
            if allowed is not None and d.ep not in allowed:
                continue
            if d.usable:
                if (d.ep, d.type) not in usable:
                    usable.append((d.ep, d.type))
            elif d.reason:
                reasons.setdefault(d.ep, d.reason)
                reasons.setdefault(d.type.value, d.reason)
        usable.sort(key=lambda item: order_key(item[1], item[0]))
        return cls(tuple(usable), reasons)

    def has(self, ep: str) -> bool:
        return any(e == ep for e, _ in self.usable)

    def first(self, device_type: DeviceType) -> str:
        return next((ep for ep, t in self.usable if t == device_type), "")

    def reason(self, key: str) -> str:
        return self.reasons.get(key, "")


@dataclass(frozen=True)
class DevicePlan:
    """The EP to ask the runtime for, and why when it is not what the choice meant."""

    ep: str  # CPU_EP for the CPU
    requested: str  # DeviceChoice.describe()
    asked_ep: str = ""  # the EP the choice meant, when the plan fell back from it
    fell_back: bool = False
    reason: str = ""
    kind: DeviceType | None = None  # the device type a policy planned (one EP may drive several: OpenVINO)

    @property
    def device_type(self) -> DeviceType:
        return self.kind or EP_DEVICE_TYPE.get(self.ep, CPU)


def plan_device(choice: DeviceChoice, devices: DeviceSet, *, runtime: str = "") -> DevicePlan:
    """Where `choice` runs with `devices`. Strict: DeviceUnavailableError when the device it means is
    not there; otherwise a CPU plan that says why. `runtime` names the runtime in messages ("for chat")."""
    requested = choice.describe()
    where = f" for {runtime}" if runtime else ""
    if choice.ep is not None:
        if choice.ep == CPU_EP or devices.has(choice.ep):
            return DevicePlan(choice.ep, requested)
        name = short_ep_name(choice.ep)
        why = devices.reason(choice.ep) or devices.reason(EP_DEVICE_TYPE.get(choice.ep, CPU).value)
        reason = f"{name} is not available{where}: {why or 'this machine or build does not have it.'}"
        return _cpu_instead(choice, requested, choice.ep, reason)
    order = ORDER[choice.policy]
    for device_type in order:
        ep = CPU_EP if device_type == CPU else devices.first(device_type)
        if ep:
            return DevicePlan(ep, requested, kind=device_type)
    what = " or ".join(t.value for t in order)
    why = " ".join(r for r in (devices.reason(t.value) for t in order) if r)
    reason = f"No usable {what}{where} on this machine: {why or 'none was found.'}"
    return _cpu_instead(choice, requested, "", reason)


def _cpu_instead(choice: DeviceChoice, requested: str, asked_ep: str, reason: str) -> DevicePlan:
    if choice.strict:
        raise DeviceUnavailableError(reason, _STRICT_HINT)
    return DevicePlan(CPU_EP, requested, asked_ep=asked_ep, fell_back=True, reason=reason)


@dataclass(frozen=True)
class DeviceForecast:
    """Where a choice will run on the discovered devices, said before anything loads."""

    plan: DevicePlan | None  # None: strict, and the device the choice means is not there
    asked: DeviceType | None  # the device type the choice names (None: a policy over several, or an unknown EP)
    missing: str = ""  # why that device is not there, in discovery's own words ("" when unknown or present)

    @property
    def falls_back(self) -> bool:
        """The choice names a device that is missing: the CPU runs instead (or, strict, nothing does)."""
        return self.plan is None or self.plan.fell_back

    @property
    def refused(self) -> bool:
        """Strict, and the device is missing: loading fails."""
        return self.plan is None


def predict_device(choice: DeviceChoice, devices: Iterable[Device]) -> DeviceForecast | None:
    """What `plan_device` will do with `choice` on these discovered devices (None before discovery)."""
    found = tuple(devices)
    if not found:
        return None
    usable = DeviceSet.from_devices(found)
    asked = choice.wanted_type
    missing = usable.reason(choice.ep or "") or (usable.reason(asked.value) if asked is not None else "")
    try:
        plan = plan_device(choice, usable)
    except DeviceUnavailableError:
        return DeviceForecast(None, asked, missing)
    return DeviceForecast(plan, asked, missing if plan.fell_back else "")
