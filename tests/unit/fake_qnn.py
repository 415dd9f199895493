"""A fake onnxruntime on a Snapdragon laptop, as far as compiling and loading context models goes.

Its ModelCompiler writes a fake context model stamped with the "QNN SDK" that made it, and its
InferenceSession refuses a context model from another SDK with the real QNN 5000 message.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import onnx

QNN = "QNNExecutionProvider"
CPU = "CPUExecutionProvider"
STALE_5000 = (
    "[ONNXRuntimeError] : 1 : FAIL : QNN EP: Failed to create context from binary. Error code: 5000 "
    "(qnn_backend_manager.cc:812 LoadCachedQnnContextFromBuffer)"
)


class Fail(RuntimeError):
    pass


class FakeSessionOptions:
    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self.devices: list[Any] = []
        self.device_options: dict[str, str] = {}
        self.added: list[tuple[str, dict[str, str]]] = []
        self.graph_optimization_level: Any = None
        self.intra_op_num_threads = 0

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.config[key] = value

    def add_provider_for_devices(self, devices: list[Any], options: dict[str, str]) -> None:
        self.devices = list(devices)
        self.device_options = dict(options)

    def add_provider(self, name: str, options: dict[str, str]) -> None:
        self.added.append((name, options))


def _parses_as_onnx(data: bytes) -> bool:
    try:
        onnx.load_model_from_string(data)
    except Exception:
        return False
    return True


class FakeQnnOrt:
    """onnxruntime on a Snapdragon laptop, as far as compiling and loading context models goes."""

    __version__ = "1.32.0"
    GraphOptimizationLevel = SimpleNamespace(
        ORT_DISABLE_ALL=0, ORT_ENABLE_BASIC=1, ORT_ENABLE_EXTENDED=2, ORT_ENABLE_ALL=99
    )
    ExecutionMode = SimpleNamespace(ORT_SEQUENTIAL="sequential")
    OrtCompileApiFlags = SimpleNamespace(NONE=0, ERROR_IF_NO_NODES_COMPILED=1)
    SessionOptions = FakeSessionOptions

    def __init__(self, *, sdk: str = "2.51.0", plugin: str = "2.7.0", driver: str = "30.0.140.1000") -> None:
        self.sdk = sdk
        self.driver = driver
        self.qnn_plugin = SimpleNamespace(
            __version__=plugin,
            get_library_path=lambda: "onnxruntime_providers_qnn.dll",
            get_ep_name=lambda: QNN,
            get_qnn_htp_path=lambda: "QnnHtp.dll",
            get_qnn_sdk_version=lambda: self.sdk,
        )
        self.compiles: list[dict[str, Any]] = []
        self.loads: list[str] = []
        self.compile_error = ""
        self.load_error = ""  # raised when a plain (not compiled) model is loaded
        self.reject_all_contexts = False
        self.has_compiler = True
        ort = self

        class _Compiler:
            def __init__(self, so: FakeSessionOptions, source: str, **kwargs: Any) -> None:
                self.so, self.source, self.kwargs = so, source, kwargs

            def compile_to_file(self, out: str) -> None:
                ort.compiles.append({"source": self.source, "out": out, "options": self.so, **self.kwargs})
                if ort.compile_error:
                    raise Fail(ort.compile_error)
                ort._write_context(Path(self.source), Path(out))

        class _Session:
            def __init__(self, path: str, sess_options: FakeSessionOptions, providers: Any = None) -> None:
                data = Path(path).read_bytes()
                ort.loads.append(path)
                if data.startswith(b"EPCTX:"):
                    made_with = data.split(b":")[1].decode()
                    if ort.reject_all_contexts or made_with != ort.sdk:
                        raise Fail(STALE_5000)
                    if not (Path(path).parent / "model_ctx_qnn.bin").is_file():
                        raise Fail("QNN EP: Failed to load context binary model_ctx_qnn.bin: No such file")
                elif not _parses_as_onnx(data):
                    raise Fail("[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Protobuf parsing failed.")
                elif ort.load_error:
                    raise Fail(ort.load_error)
                elif sess_options.config.get("ep.context_enable") == "1":
                    config = dict(sess_options.config)
                    ort.compiles.append({"source": path, "out": config["ep.context_file_path"], "config": config})
                    ort._write_context(Path(path), Path(sess_options.config["ep.context_file_path"]))
                self.path = path
                self.options = sess_options

            def get_providers(self) -> list[str]:
                return [QNN, CPU]

            def get_provider_graph_assignment_info(self) -> list[Any]:
                nodes = [SimpleNamespace(name="ctx", op_type="EPContext")]
                return [SimpleNamespace(ep_name=QNN, get_nodes=lambda: nodes)]

        self.InferenceSession = _Session
        self._compiler_cls = _Compiler

    def __getattr__(self, name: str) -> Any:
        if name == "ModelCompiler" and self.has_compiler:
            return self._compiler_cls
        raise AttributeError(name)

    def _write_context(self, source: Path, out: Path) -> None:
        out.write_bytes(b"EPCTX:" + self.sdk.encode() + b":" + source.read_bytes()[:16])
        (out.parent / "model_ctx_qnn.bin").write_bytes(b"\x00" * 256)

    def get_available_providers(self) -> list[str]:
        return [CPU]

    def register_execution_provider_library(self, name: str, path: str) -> None:
        pass

    def get_ep_devices(self) -> list[Any]:
        npu = SimpleNamespace(
            ep_name=QNN,
            ep_vendor="Qualcomm",
            ep_metadata={"version": self.qnn_plugin.__version__},
            ep_options={},
            device=SimpleNamespace(
                type="OrtHardwareDeviceType.NPU",
                vendor="Qualcomm",
                vendor_id=0x4D4F4351,
                device_id=0,
                metadata={"DriverVersion": self.driver, "Description": "Snapdragon X Elite NPU"},
            ),
        )
        cpu = SimpleNamespace(
            ep_name=CPU,
            ep_vendor="Microsoft",
            ep_metadata={"version": "1.32.0"},
            ep_options={},
            device=SimpleNamespace(type="OrtHardwareDeviceType.CPU", vendor="Qualcomm", metadata={}),
        )
        return [cpu, npu]
