"""`npu-studio doctor`: the probe model, the checks per device (real CPU here, fake NPU and GPU at the
onnxruntime boundary), the report, and the diagnostics zip."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from engines import doctor_report
from engines.doctor import PROBE_MODEL, probe_input, probe_reference, run_doctor
from engines.doctor_report import DoctorReport, Step, write_outputs
from engines.runtime import devices, registration
from engines.types import DeviceChoice

QNN = "QNNExecutionProvider"
DML = "DmlExecutionProvider"
CPU = "CPUExecutionProvider"
DML_REMOVED = "Exception(3) tid(3a1c) 887A0005 The GPU device instance has been suspended."


def test_the_embedded_probe_model_is_the_documented_one_and_numpy_agrees_with_it() -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = ((np.arange(8 * 3 * 3 * 3) * 7 % 11) - 5).astype(np.float32).reshape(8, 3, 3, 3) / 10
    b = (np.arange(8) - 4).astype(np.float32) / 20
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("GlobalAveragePool", ["r"], ["p"]),
            helper.make_node("Flatten", ["p"], ["y"]),
        ],
        "doctor-probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="npu-studio")
    model.ir_version = 8
    onnx.checker.check_model(onnx.load_from_string(PROBE_MODEL))
    assert onnx.load_from_string(PROBE_MODEL) == model

    session = ort.InferenceSession(PROBE_MODEL, providers=[CPU])
    x = probe_input()
    out = session.run(None, {"x": x})[0]
    assert out.shape == (1, 8)
    np.testing.assert_allclose(out, probe_reference(x), atol=1e-5)
    assert np.ptp(out) > 0.05, "the probe's outputs differ from each other, so a wrong answer shows"


def test_on_this_machine_the_cpu_passes_and_the_npu_and_gpu_are_reported_unavailable(tmp_path: Path) -> None:
    registration.reset_registrations()
    chat_calls: list[DeviceChoice] = []

    def chat(folder: Path, choice: DeviceChoice, tokens: int) -> Step:
        chat_calls.append(choice)
        return Step("chat", CPU, "ok", f"{tokens} tokens")

    report = run_doctor(classifier=None, chat_model=tmp_path, chat=chat, cache_dir=tmp_path / "compiled")

    by_check = {(s.check, s.device): s for s in report.steps}
    strict = by_check[("strict session", CPU)]
    assert strict.status == "ok" and "output matches" in strict.summary
    assert strict.details["max_abs_diff"] < 1e-4
    assert by_check[("classifier", CPU)].status == "skipped"
    assert by_check[("chat", CPU)].summary == "8 tokens" and len(chat_calls) == 1
    npu = by_check[("device", QNN)]
    gpu = by_check[("device", DML)]
    assert npu.status == gpu.status == "unavailable"
    assert "Windows on ARM64" in npu.summary and "DirectX 12" in gpu.summary
    text = report.text()
    assert "✘ NPU" in text and "✘ GPU" in text and "unavailable:" in text
    assert "ONNX Runtime 1.32.0" in text and "Compiled-model cache: 0 entries" in text
    assert report.versions["packages"]["onnxruntime"] == "1.32.0"
    # QNN, OpenVINO (registered from the bundled plugin here, but no Intel device), VitisAI, DirectML
    assert report.counts() == {"ok": 2, "skipped": 1, "unavailable": 4}
    assert "registered but found no Intel NPU" in by_check[("device", "OpenVINOExecutionProvider")].summary


def test_outputs_and_zip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_report, "LOG_TAIL_BYTES", 100)
    log = tmp_path / "npu-studio.log"
    log.write_text("old line\n" * 100 + "the last line\n")
    settings = tmp_path / "settings.json"
    settings.write_text('{"device": "npu"}')
    report = DoctorReport(
        "2026-11-29 12:00:00",
        {"python": "3.11", "platform": "Windows-11", "machine": "ARM64", "onnxruntime": "1.32.0", "packages": {}},
        devices.DiscoveryReport("1.32.0", "win32-arm64", (CPU,), ()),
        [Step("strict session", QNN, "failed", "QNN error 5000: ...", 1.0, {"code": "QNN 5000"})],
    )
    text_path, json_path, zip_path = write_outputs(
        report, tmp_path / "out" / "nested", {"logs/npu-studio.log": log, "settings.json": settings,
                                               "missing.txt": tmp_path / "nope"}
    )
    assert text_path.read_text().startswith("NPU Studio doctor — 2026-11-29 12:00:00")
    assert json.loads(json_path.read_text())["steps"][0]["details"]["code"] == "QNN 5000"
    with zipfile.ZipFile(zip_path) as bundle:
        names = set(bundle.namelist())
        assert names == {"report.txt", "report.json", "versions.json", "devices.json", "logs/npu-studio.log",
                         "settings.json"}
        tail = bundle.read("logs/npu-studio.log")
        assert len(tail) == 100 and tail.endswith(b"the last line\n"), "only the end of a big log"
        assert json.loads(bundle.read("settings.json")) == {"device": "npu"}
    assert not list((tmp_path / "out" / "nested").glob("*.tmp"))


def test_an_unwritable_output_folder_is_a_readable_error(tmp_path: Path) -> None:
    from engines.errors import StudioError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    report = DoctorReport("now", {"python": "", "platform": "", "machine": "", "onnxruntime": "", "packages": {}},
                          devices.DiscoveryReport("1", "p", (), ()), [])
    with pytest.raises(StudioError, match="could not be written"):
        write_outputs(report, blocker / "out")


# -- a fake Snapdragon + DirectML machine at the onnxruntime boundary ------------------------------------


class FakeSessionOptions:
    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self.devices: list[Any] = []
        self.graph_optimization_level: Any = None
        self.enable_mem_pattern = True
        self.execution_mode: Any = None

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.config[key] = value

    def add_provider_for_devices(self, devices: list[Any], options: dict[str, str]) -> None:
        self.devices = list(devices)

    def add_provider(self, name: str, options: dict[str, str]) -> None:
        pass


class FakeMachine:
    """QNN NPU (plugin) that runs the probe right, DirectML whose device is removed, and the CPU."""

    __version__ = "1.32.0"
    GraphOptimizationLevel = SimpleNamespace(ORT_DISABLE_ALL=0, ORT_ENABLE_BASIC=1, ORT_ENABLE_EXTENDED=2,
                                             ORT_ENABLE_ALL=99)
    ExecutionMode = SimpleNamespace(ORT_SEQUENTIAL="sequential")
    OrtCompileApiFlags = SimpleNamespace(ERROR_IF_NO_NODES_COMPILED=1)
    SessionOptions = FakeSessionOptions

    def __init__(self, npu_answer_offset: float = 0.0) -> None:
        self.qnn_plugin = SimpleNamespace(
            __version__="2.7.0",
            get_library_path=lambda: "onnxruntime_providers_qnn.dll",
            get_ep_name=lambda: QNN,
            get_qnn_htp_path=lambda: "QnnHtp.dll",
            get_qnn_sdk_version=lambda: "2.51.0",
        )
        self.compiled: list[str] = []
        machine = self

        class Compiler:
            def __init__(self, so: FakeSessionOptions, source: str, **kwargs: Any) -> None:
                self.source = source

            def compile_to_file(self, out: str) -> None:
                machine.compiled.append(self.source)
                Path(out).write_bytes(b"EPCTX" + Path(self.source).read_bytes())

        class Session:
            def __init__(self, path: str, sess_options: FakeSessionOptions, providers: Any = None) -> None:
                eps = [d.ep_name for d in sess_options.devices] or [
                    p[0] if isinstance(p, tuple) else p for p in (providers or [CPU])
                ]
                self.ep = eps[0]
                if self.ep == DML:
                    raise RuntimeError(DML_REMOVED)
                self.offset = npu_answer_offset if self.ep == QNN else 0.0

            def get_providers(self) -> list[str]:
                return [self.ep] if self.ep == CPU else [self.ep, CPU]

            def get_provider_graph_assignment_info(self) -> list[Any]:
                nodes = [SimpleNamespace(name=f"n{i}", op_type="Conv") for i in range(4)]
                return [SimpleNamespace(ep_name=self.ep, get_nodes=lambda: nodes)]

            def run(self, outputs: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
                return [probe_reference(feeds["x"]) + self.offset]

        self.ModelCompiler = Compiler
        self.InferenceSession = Session

    def get_available_providers(self) -> list[str]:
        return [DML, CPU]

    def register_execution_provider_library(self, name: str, path: str) -> None:
        pass

    def get_build_info(self) -> str:
        return "ORT Build Info: fake"

    def get_ep_devices(self) -> list[Any]:
        def device(ep: str, kind: str, meta: dict[str, str]) -> Any:
            hw = SimpleNamespace(type=f"OrtHardwareDeviceType.{kind}", vendor="Qualcomm", metadata=meta)
            return SimpleNamespace(ep_name=ep, ep_vendor="", ep_metadata={"version": "2.7.0"}, ep_options={},
                                   device=hw)

        return [
            device(QNN, "NPU", {"DriverVersion": "30.0.140.1000", "Description": "Snapdragon X Elite NPU"}),
            device(CPU, "CPU", {}),
        ]


@pytest.fixture
def machine(fake_runtime: Any) -> Any:
    return fake_runtime


def test_on_a_snapdragon_the_npu_probe_compiles_once_and_a_removed_gpu_is_a_readable_failure(
    machine: Any, tmp_path: Path
) -> None:
    fake = machine(FakeMachine())
    report = run_doctor(classifier=None, chat_model=None, cache_dir=tmp_path / "compiled")

    by_check = {(s.check, s.device): s for s in report.steps}
    npu = by_check[("strict session", QNN)]
    assert npu.status == "ok", npu.summary
    assert npu.details["compiled_cache"]["status"] == "miss" and len(fake.compiled) == 1
    assert "QNN — all 4 nodes" in npu.summary
    gpu = by_check[("strict session", DML)]
    assert gpu.status == "failed"
    assert gpu.summary.startswith("DirectML error 0x887A0005: the GPU was removed or reset")
    assert gpu.details["code"] == "0x887A0005" and "887A0005" in gpu.details["native"]
    assert by_check[("strict session", CPU)].status == "ok"
    assert by_check[("chat", QNN)].status == "skipped"
    assert report.versions["qnn_sdk"] == "2.51.0"
    assert report.versions["drivers"] == {f"NPU {QNN}": "30.0.140.1000"}
    assert "QNN SDK (from onnxruntime-qnn): 2.51.0" in report.text()

    again = run_doctor(classifier=None, chat_model=None, cache_dir=tmp_path / "compiled")
    npu_again = next(s for s in again.steps if s.check == "strict session" and s.device == QNN)
    assert npu_again.details["compiled_cache"]["status"] == "hit" and len(fake.compiled) == 1
    assert "Compiled-model cache: 1 entries" in again.text()


def test_a_device_that_gives_wrong_answers_fails_the_probe(machine: Any, tmp_path: Path) -> None:
    machine(FakeMachine(npu_answer_offset=0.5))
    report = run_doctor(classifier=None, chat_model=None)
    npu = next(s for s in report.steps if s.check == "strict session" and s.device == QNN)
    assert npu.status == "failed" and "output is wrong" in npu.summary


def test_a_crashing_chat_probe_does_not_stop_the_doctor(tmp_path: Path) -> None:
    registration.reset_registrations()

    def chat(folder: Path, choice: DeviceChoice, tokens: int) -> Step:
        raise RuntimeError("QNN execution provider is not supported in this build.")

    report = run_doctor(classifier=None, chat_model=tmp_path, chat=chat)
    step = next(s for s in report.steps if s.check == "chat")
    assert step.status == "failed" and "not supported by the ONNX Runtime build" in step.summary


def test_the_cli_writes_report_json_and_zip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from app import paths
    from app.cli import run

    monkeypatch.setenv("NPU_STUDIO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NPU_STUDIO_BUNDLED_MODELS", str(tmp_path / "no-models"))
    (paths.log_dir() / "npu-studio.log").write_text("a log line\n")
    (paths.config_dir() / "settings.json").write_text("{}")
    registration.reset_registrations()

    assert run(["doctor", "--out", str(tmp_path / "report"), "--json"]) == 0

    data = json.loads(capsys.readouterr().out)
    statuses = {(s["check"], s["device"]): s["status"] for s in data["steps"]}
    assert statuses[("strict session", CPU)] == "ok"
    assert statuses[("classifier", CPU)] == "skipped" and statuses[("chat", CPU)] == "skipped"
    assert statuses[("device", QNN)] == statuses[("device", DML)] == "unavailable"
    with zipfile.ZipFile(data["files"]["zip"]) as bundle:
        assert {"logs/npu-studio.log", "settings.json", "report.txt"} <= set(bundle.namelist())
    assert Path(data["files"]["text"]).read_text().startswith("NPU Studio doctor")


def test_an_untrusted_classifier_folder_is_refused_before_any_native_load(fake_runtime: Any, tmp_path: Path) -> None:
    from tests.unit.fake_ort import plain_linux
    from tests.unit.test_model_safety import _external_model
    from tests.unit.tiny_models import colour_classifier

    fake = fake_runtime(plain_linux())
    folder = colour_classifier(tmp_path / "models" / "untrusted")
    _external_model(folder, "../outside.bin")  # its weights point out of the folder
    (tmp_path / "models" / "outside.bin").write_bytes(b"\0" * 4096)
    report = run_doctor(classifier=folder, chat_model=None, chat=None)
    [step] = [s for s in report.steps if s.check == "classifier"]
    assert step.status == "failed" and "outside the model's folder" in step.summary
    assert fake.sessions, "the probe model did reach ONNX Runtime"
    assert not [s for s in fake.sessions if Path(s.path).parent == folder], "the untrusted model never did"
