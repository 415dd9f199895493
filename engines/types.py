"""Plain data that crosses boundaries (engines -> app -> ui). No onnxruntime import here, on purpose:
the UI imports these types without pulling a runtime in."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class DeviceType(StrEnum):
    NPU = "NPU"
    GPU = "GPU"
    CPU = "CPU"


class Policy(StrEnum):
    """How to choose a device. The value is what the user types (`--device npu`)."""

    AUTO = "auto"
    PREFER_NPU = "npu"
    PREFER_GPU = "gpu"
    CPU_ONLY = "cpu"
    MAX_EFFICIENCY = "efficiency"
    MAX_PERFORMANCE = "performance"

    @property
    def label(self) -> str:
        return _POLICY_LABELS[self]

    @property
    def wanted_type(self) -> DeviceType | None:
        return {
            Policy.PREFER_NPU: DeviceType.NPU,
            Policy.PREFER_GPU: DeviceType.GPU,
            Policy.CPU_ONLY: DeviceType.CPU,
        }.get(self)


_POLICY_LABELS = {
    Policy.AUTO: "Automatic",
    Policy.PREFER_NPU: "NPU",
    Policy.PREFER_GPU: "GPU",
    Policy.CPU_ONLY: "CPU only",
    Policy.MAX_EFFICIENCY: "Best efficiency",
    Policy.MAX_PERFORMANCE: "Best performance",
}

# Short names users type, mapped to the execution provider they mean.
EP_ALIASES: Mapping[str, str] = {
    "qnn": "QNNExecutionProvider",
    "dml": "DmlExecutionProvider",
    "directml": "DmlExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "vitisai": "VitisAIExecutionProvider",
    "nvtensorrtrtx": "NvTensorRTRTXExecutionProvider",
    "trtrtx": "NvTensorRTRTXExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "cpu-ep": "CPUExecutionProvider",
}

# The device type each well-known EP drives.
EP_DEVICE_TYPE: Mapping[str, DeviceType] = {
    "QNNExecutionProvider": DeviceType.NPU,
    "VitisAIExecutionProvider": DeviceType.NPU,
    "OpenVINOExecutionProvider": DeviceType.NPU,
    "DmlExecutionProvider": DeviceType.GPU,
    "CUDAExecutionProvider": DeviceType.GPU,
    "WebGpuExecutionProvider": DeviceType.GPU,
    "NvTensorRTRTXExecutionProvider": DeviceType.GPU,
    "MIGraphXExecutionProvider": DeviceType.GPU,
    "CPUExecutionProvider": DeviceType.CPU,
}

CPU_EP = "CPUExecutionProvider"

# The photo files NPU Studio picks from a folder (the CLI, the Classify view, calibration, the doctor).
IMAGE_SUFFIXES: frozenset[str] = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"})


def is_image_file(name: str | object) -> bool:
    return str(name).lower().endswith(tuple(IMAGE_SUFFIXES))


class EpSource(StrEnum):
    """Where an execution provider came from (shown on each device card)."""

    BUILT_IN = "built in"  # compiled into the ONNX Runtime build (CPU, DirectML in the Windows ML build)
    BUNDLED = "bundled plugin"  # a plugin EP package shipped with the app (onnxruntime-qnn, -ep-openvino)
    CATALOG = "Windows ML catalog"  # delivered by Windows Update through Windows ML's EP catalog


def short_ep_name(ep: str) -> str:
    """`QNNExecutionProvider` -> `QNN`, `DmlExecutionProvider` -> `DirectML`."""
    short = ep.removesuffix("ExecutionProvider") or ep
    return {"Dml": "DirectML", "WebGpu": "WebGPU", "NvTensorRTRTX": "TensorRT RTX"}.get(short, short)


@dataclass(frozen=True)
class DeviceChoice:
    """What the user asked for: a policy, or one explicit EP with options; strict or not.

    strict: the requested device must take the whole graph; anything else is an error.
    Not strict: a fallback (partly or wholly to the CPU) is allowed but reported.
    """

    policy: Policy = Policy.AUTO
    ep: str | None = None
    ep_options: tuple[tuple[str, str], ...] = ()
    strict: bool = False

    @classmethod
    def parse(cls, text: str, strict: bool = False, ep_options: Mapping[str, str] | None = None) -> DeviceChoice:
        """`auto|npu|gpu|cpu|efficiency|performance`, a short EP alias (`qnn`, `dml`) or a full EP name."""
        from engines.errors import DeviceUnavailableError

        key = text.strip()
        options = tuple(sorted((ep_options or {}).items()))
        try:
            return cls(policy=Policy(key.lower()), strict=strict, ep_options=options)
        except ValueError:
            pass
        ep = EP_ALIASES.get(key.lower(), key)
        if not ep.endswith("ExecutionProvider"):
            choices = ", ".join(p.value for p in Policy)
            raise DeviceUnavailableError(
                f"Unknown device '{text}'.",
                f"Use one of {choices}, a short EP name (qnn, dml) or a full EP name such as QNNExecutionProvider.",
            )
        return cls(policy=Policy.AUTO, ep=ep, ep_options=options, strict=strict)

    @property
    def wanted_type(self) -> DeviceType | None:
        if self.ep is not None:
            return EP_DEVICE_TYPE.get(self.ep)
        return self.policy.wanted_type

    @property
    def options(self) -> dict[str, str]:
        return dict(self.ep_options)

    def describe(self) -> str:
        what = short_ep_name(self.ep) if self.ep else self.policy.label
        return f"{what} (strict)" if self.strict else what


@dataclass(frozen=True)
class Device:
    """One device as ONNX Runtime sees it, through one execution provider."""

    ep: str
    type: DeviceType
    vendor: str
    usable: bool
    reason: str = ""  # why not usable, in plain words ("" when usable)
    vendor_id: int = 0
    device_id: int = 0
    ep_vendor: str = ""
    ep_version: str = ""
    driver_version: str = ""
    description: str = ""
    metadata: tuple[tuple[str, str], ...] = ()
    plugin_library: str = ""  # path of a plugin EP library, when the EP came from one
    source: str = ""  # EpSource value: built in / bundled plugin / Windows ML catalog

    @property
    def short_ep(self) -> str:
        return short_ep_name(self.ep)

    def title(self) -> str:
        name = self.description or f"{self.vendor} {self.type.value}".strip()
        return f"{name} ({self.short_ep})"


@dataclass(frozen=True)
class Placement:
    """Where a session really runs, verified after creation."""

    requested: str  # DeviceChoice.describe()
    requested_eps: tuple[str, ...]  # EPs ONNX Runtime was asked for (after any fallback), in precedence order
    active_eps: tuple[str, ...]  # session.get_providers()
    nodes_per_ep: tuple[tuple[str, int], ...] = ()  # from the graph assignment info
    fell_back: bool = False
    reason: str = ""  # plain words when it degraded
    wanted_type: DeviceType | None = None
    policy: str = ""

    @property
    def total_nodes(self) -> int:
        return sum(n for _, n in self.nodes_per_ep)

    @property
    def primary_ep(self) -> str:
        """The EP running the most nodes (or the first active one)."""
        if self.nodes_per_ep:
            return max(self.nodes_per_ep, key=lambda item: item[1])[0]
        return self.active_eps[0] if self.active_eps else ""

    def ran_on(self) -> str:
        """Where it ran, fallback or not: "CPU — all 94 nodes", "Split — QNN 90, CPU 4 nodes"."""
        ep = short_ep_name(self.primary_ep)
        if len(self.nodes_per_ep) > 1:
            parts = ", ".join(f"{short_ep_name(e)} {n}" for e, n in self.nodes_per_ep)
            return f"Split — {parts} nodes"
        if self.total_nodes:
            return f"{ep} — all {self.total_nodes} nodes"
        return ep

    def badge(self) -> str:
        """Short plain-language summary for a badge: "CPU — all 94 nodes" or the fallback and why."""
        if self.fell_back:
            where = short_ep_name(self.primary_ep) if self.primary_ep else "another device"
            return f"Fell back to {where}: {self.reason}" if self.reason else f"Fell back to {where}"
        return self.ran_on()

    def as_dict(self) -> dict[str, object]:
        return {
            "requested": self.requested,
            "asked_onnxruntime_for": list(self.requested_eps),
            "active_eps": list(self.active_eps),
            "nodes_per_ep": dict(self.nodes_per_ep),
            "fell_back": self.fell_back,
            "reason": self.reason,
            "ran_on": self.ran_on(),
            "summary": self.badge(),
        }


@dataclass(frozen=True)
class ClassScore:
    index: int
    label: str
    probability: float


@dataclass(frozen=True)
class Classification:
    path: str
    top: tuple[ClassScore, ...]
    latency_ms: float  # inference only
    preprocess_ms: float
    placement: Placement | None = None
    error: str = ""  # set when this image failed (batch runs go on)

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "top": [{"index": s.index, "label": s.label, "probability": s.probability} for s in self.top],
            "latency_ms": self.latency_ms,
            "preprocess_ms": self.preprocess_ms,
            "error": self.error,
        }


class CancelToken:
    """Cooperative, thread-safe cancel flag checked between steps (tokens, images)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    def reset(self) -> None:
        self._event.clear()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def physical_cores() -> int:
    """Physical cores, capped by the CPUs this process may run on (its affinity): what ONNX Runtime
    uses when its thread count is left to it (a second hyper-thread per core only contends for the same
    units)."""
    allowed = cpu_count()
    physical = _linux_physical_cores()
    if not physical:
        try:
            import psutil

            physical = psutil.cpu_count(logical=False) or allowed
        except ImportError:  # psutil is a dependency; without it, every allowed CPU
            physical = allowed
    return max(1, min(allowed, physical))


def _linux_physical_cores() -> int:
    """Linux: the distinct sibling sets of the CPUs, as psutil counts them (0: unknown here), read without
    importing psutil (the chat CLI asks this before its first token)."""
    import glob

    for name in ("core_cpus_list", "thread_siblings_list"):
        sets = set()
        for path in glob.glob(f"/sys/devices/system/cpu/cpu[0-9]*/topology/{name}"):
            try:
                with open(path, encoding="ascii") as fh:
                    sets.add(fh.read().strip())
            except OSError:
                continue
        if sets:
            return len(sets)
    return 0


def check_thread_count(threads: object) -> None:
    """0 (the runtime's default) up to one thread per CPU: more only make every run slower (1000
    threads took 40 s for one photo), so they are refused rather than passed on."""
    limit = cpu_count()
    if not isinstance(threads, int) or isinstance(threads, bool) or not 0 <= threads <= limit:
        from engines.errors import StudioError

        raise StudioError(
            f"Invalid thread count {threads!r}: use 1 to {limit} (one per CPU of this machine).",
            "Pass --threads 0 (the default) to let ONNX Runtime choose.",
        )
