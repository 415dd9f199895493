"""A fake `onnxruntime` for the device paths this machine cannot run (QNN NPU, DirectML GPU).

It models what matters for placement: which EPs exist, which devices they list, which operators each
EP supports, how ONNX Runtime partitions nodes over the providers in precedence order, and the strict
`session.disable_cpu_ep_fallback` guard. Install it with `engines.runtime.use_fake(FakeOrt(...))`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

CPU = "CPUExecutionProvider"
QNN = "QNNExecutionProvider"
DML = "DmlExecutionProvider"


class HwType(enum.Enum):
    CPU = 0
    GPU = 1
    NPU = 2


class Policy(enum.Enum):
    DEFAULT = 0
    PREFER_CPU = 1
    PREFER_NPU = 2
    PREFER_GPU = 3
    MAX_PERFORMANCE = 4
    MAX_EFFICIENCY = 5
    MIN_OVERALL_POWER = 6


class Fail(RuntimeError):
    pass


@dataclass
class FakeHw:
    type: HwType
    vendor: str
    vendor_id: int = 0
    device_id: int = 0
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeEpDevice:
    ep_name: str
    ep_vendor: str
    device: FakeHw
    ep_metadata: dict[str, str] = field(default_factory=dict)
    ep_options: dict[str, str] = field(default_factory=dict)


class FakeSessionOptions:
    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self.devices: list[FakeEpDevice] = []
        self.device_options: dict[str, str] = {}
        self.policy: Policy | None = None
        self.graph_optimization_level: Any = None
        self.intra_op_num_threads = 0
        self.enable_mem_pattern = True
        self.execution_mode: Any = "parallel-default"

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.config[key] = value

    def add_provider_for_devices(self, devices: list[FakeEpDevice], options: dict[str, str]) -> None:
        self.devices = list(devices)
        self.device_options = dict(options)

    def set_provider_selection_policy(self, policy: Policy) -> None:
        self.policy = policy


@dataclass
class FakeNode:
    name: str
    op_type: str
    domain: str = ""


class FakeSubgraph:
    def __init__(self, ep_name: str, nodes: list[FakeNode]) -> None:
        self.ep_name = ep_name
        self._nodes = nodes

    def get_nodes(self) -> list[FakeNode]:
        return self._nodes


class FakeOrt:
    """A configurable stand-in for the onnxruntime module."""

    GraphOptimizationLevel = SimpleNamespace(
        ORT_DISABLE_ALL=0, ORT_ENABLE_BASIC=1, ORT_ENABLE_EXTENDED=2, ORT_ENABLE_ALL=99
    )
    ExecutionMode = SimpleNamespace(ORT_SEQUENTIAL="sequential", ORT_PARALLEL="parallel")
    OrtExecutionProviderDevicePolicy = Policy
    SessionOptions = FakeSessionOptions
    __version__ = "1.32.0-fake"

    def __init__(
        self,
        *,
        providers: tuple[str, ...] = (CPU,),
        ep_devices: tuple[FakeEpDevice, ...] = (),
        plugin_devices: tuple[FakeEpDevice, ...] = (),
        supported_ops: dict[str, set[str] | None] | None = None,
        graph_ops: tuple[str, ...] = ("Conv", "Relu", "Conv", "Add", "GlobalAveragePool", "Gemm"),
        qnn_plugin: Any = None,
        plugin_load_error: str = "",
        create_error: str = "",
    ) -> None:
        self._providers = providers
        self._ep_devices = list(ep_devices)
        self._plugin_devices = list(plugin_devices)  # appear once the plugin library is registered
        self.supported_ops = supported_ops or {CPU: None}  # None: supports everything
        self.graph_ops = graph_ops
        self.qnn_plugin = qnn_plugin
        self.plugin_load_error = plugin_load_error
        self.create_error = create_error
        self.registered: list[tuple[str, str]] = []
        self.register_errors: dict[str, str] = {}  # EP name -> the error its library raises on registration
        self.windowsml: Any = None  # a fake `windowsml` package (tests/unit/fake_windowsml.py)
        self.windows_build = 0
        self.plugins: dict[str, Any] = {}  # import name -> fake bundled plugin EP package
        self.sessions: list[FakeSession] = []

        ort = self

        class _Session(FakeSession):
            def __init__(self, path: str, sess_options: Any = None, providers: Any = None) -> None:
                super().__init__(ort, path, sess_options or FakeSessionOptions(), providers)

        self.InferenceSession = _Session

    def get_available_providers(self) -> list[str]:
        return list(self._providers)

    def get_ep_devices(self) -> list[FakeEpDevice]:
        return list(self._ep_devices)

    def register_execution_provider_library(self, name: str, path: str) -> None:
        if self.plugin_load_error:
            raise Fail(self.plugin_load_error)
        if name in self.register_errors:
            raise Fail(self.register_errors[name])
        if any(n == name for n, _ in self.registered):
            raise Fail(f"Execution provider library for {name} was already registered")
        self.registered.append((name, path))
        # Like ONNX Runtime: a registered library adds the devices of its own EP.
        self._ep_devices.extend(d for d in self._plugin_devices if d.ep_name == name)
        self._plugin_devices = [d for d in self._plugin_devices if d.ep_name != name]


class FakeSession:
    def __init__(self, ort: FakeOrt, path: str, options: FakeSessionOptions, providers: Any) -> None:
        self.path = path
        self.options = options
        self.provider_arg = providers
        if ort.create_error:
            raise Fail(ort.create_error)
        order = self._precedence(ort, options, providers)
        nodes = [FakeNode(f"n{i}", op) for i, op in enumerate(ort.graph_ops)]
        assignment: dict[str, list[FakeNode]] = {}
        for node in nodes:
            ep = next((e for e in order if _supports(ort, e, node.op_type)), CPU)
            assignment.setdefault(ep, []).append(node)
        if options.config.get("session.disable_cpu_ep_fallback") == "1" and assignment.get(CPU):
            raise Fail(
                "[ONNXRuntimeError] : 1 : FAIL : This session contains graph nodes that are assigned to the "
                "default CPU EP, but fallback to CPU EP has been explicitly disabled by the user."
            )
        self.assignment = assignment
        self._active = [ep for ep in order if ep in assignment or ep == CPU]
        if CPU not in self._active:
            self._active.append(CPU)
        ort.sessions.append(self)

    @staticmethod
    def _precedence(ort: FakeOrt, options: FakeSessionOptions, providers: Any) -> list[str]:
        if options.devices:
            return [d.ep_name for d in options.devices] + [CPU]
        if options.policy is not None:
            wanted = {Policy.PREFER_NPU: HwType.NPU, Policy.PREFER_GPU: HwType.GPU}.get(options.policy)
            if options.policy in (Policy.MAX_EFFICIENCY, Policy.MIN_OVERALL_POWER):
                wanted = HwType.NPU
            picked = [d.ep_name for d in ort.get_ep_devices() if d.device.type == wanted]
            return [*picked, CPU]
        names = [p[0] if isinstance(p, tuple) else p for p in (providers or [CPU])]
        # Like ONNX Runtime: a provider that is not in this build is skipped with a warning.
        return [n for n in names if n in ort.get_available_providers() or n in {d.ep_name for d in ort._ep_devices}]

    def get_providers(self) -> list[str]:
        return list(self._active)

    def get_provider_graph_assignment_info(self) -> list[FakeSubgraph]:
        return [FakeSubgraph(ep, nodes) for ep, nodes in self.assignment.items()]


def _supports(ort: FakeOrt, ep: str, op: str) -> bool:
    if ep not in ort.supported_ops:
        return False
    ops = ort.supported_ops[ep]
    return ops is None or op in ops


def fake_qnn_plugin(version: str = "2.7.0") -> Any:
    return SimpleNamespace(
        __version__=version,
        get_library_path=lambda: r"C:\app\onnxruntime_qnn\onnxruntime_providers_qnn.dll",
        get_ep_name=lambda: QNN,
        get_qnn_htp_path=lambda: r"C:\app\onnxruntime_qnn\QnnHtp.dll",
    )


def snapdragon(**overrides: Any) -> FakeOrt:
    """A Snapdragon X laptop: the CPU EP built in, QNN as a plugin that lists one Hexagon NPU."""
    npu = FakeEpDevice(
        QNN,
        "Qualcomm",
        FakeHw(
            HwType.NPU,
            "Qualcomm",
            0x4D4F4351,
            0,
            {"DriverVersion": "30.0.140.1000", "Description": "Snapdragon X Elite NPU"},
        ),
        ep_metadata={"version": "2.7.0"},
    )
    cpu = FakeEpDevice(CPU, "Microsoft", FakeHw(HwType.CPU, "Qualcomm", 0x4D4F4351), {"version": "1.32.0"})
    params: dict[str, Any] = {
        "providers": (CPU,),
        "ep_devices": (cpu,),
        "plugin_devices": (npu,),
        "supported_ops": {CPU: None, QNN: {"Conv", "Relu", "Add", "GlobalAveragePool", "Gemm"}},
        "qnn_plugin": fake_qnn_plugin(),
    }
    params.update(overrides)
    return FakeOrt(**params)


def directml_laptop(**overrides: Any) -> FakeOrt:
    """An x64 laptop with the classic DirectML build: DML in the provider list, no ep devices for it."""
    cpu = FakeEpDevice(CPU, "Microsoft", FakeHw(HwType.CPU, "Intel", 0x8086), {"version": "1.24.4"})
    params: dict[str, Any] = {
        "providers": (DML, CPU),
        "ep_devices": (cpu,),
        "supported_ops": {CPU: None, DML: None},
    }
    params.update(overrides)
    return FakeOrt(**params)


def plain_linux(**overrides: Any) -> FakeOrt:
    cpu = FakeEpDevice(CPU, "Microsoft", FakeHw(HwType.CPU, "AMD", 0x1022), {"version": "1.32.0"})
    params: dict[str, Any] = {"providers": ("AzureExecutionProvider", CPU), "ep_devices": (cpu,)}
    params.update(overrides)
    return FakeOrt(**params)


# Every kind of machine the device tests plan for: no accelerator, an NPU, a GPU, both.
MACHINES: dict[str, Callable[[], FakeOrt]] = {
    "cpu only": plain_linux,
    "snapdragon (npu)": snapdragon,
    "directml (gpu)": directml_laptop,
    "npu and gpu": lambda: snapdragon(providers=(DML, CPU), supported_ops={CPU: None, QNN: None, DML: None}),
}
