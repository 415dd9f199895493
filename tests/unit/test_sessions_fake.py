"""Placement and strict/fallback logic on fake Snapdragon, DirectML and plain machines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engines.errors import DeviceUnavailableError, PlacementError, SessionCreationError
from engines.runtime import devices
from engines.runtime.sessions import SessionSettings, create_session
from engines.types import DeviceChoice, DeviceType
from tests.unit.fake_ort import CPU, DML, QNN, FakeOrt, directml_laptop, plain_linux, snapdragon
from tests.unit.tiny_models import tiny_onnx

Install = Callable[[FakeOrt], FakeOrt]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return tiny_onnx(tmp_path / "model.onnx")


@pytest.fixture
def use(fake_runtime: Install) -> Install:
    return fake_runtime


def test_snapdragon_discovery_registers_the_qnn_plugin_and_lists_the_npu(use: Install) -> None:
    fake = use(snapdragon())
    report = devices.discover()
    assert fake.registered == [(QNN, r"C:\app\onnxruntime_qnn\onnxruntime_providers_qnn.dll")]
    npu = report.usable(DeviceType.NPU)
    assert [d.ep for d in npu] == [QNN]
    assert npu[0].driver_version == "30.0.140.1000"
    assert npu[0].description == "Snapdragon X Elite NPU"
    assert QNN not in report.available_providers  # a plugin EP is not in get_available_providers()
    devices.discover()
    assert len(fake.registered) == 1, "the plugin library is registered once per process"


def test_a_broken_qnn_plugin_makes_the_npu_unusable_with_the_reason(use: Install) -> None:
    use(snapdragon(plugin_load_error="Failed to load library QnnHtp.dll with error: 126"))
    report = devices.discover()
    npu = report.find_ep(QNN)[0]
    assert not npu.usable
    assert "could not be loaded" in npu.reason and "126" in npu.reason


def test_npu_on_snapdragon_runs_every_node_on_qnn_with_qnn_options(use: Install, model: Path) -> None:
    fake = use(snapdragon())
    verified = create_session(model, DeviceChoice.parse("npu", strict=True))
    options = fake.sessions[-1].options
    assert verified.plan.mode == "devices"
    assert [d.ep_name for d in options.devices] == [QNN]
    assert options.device_options["backend_path"].endswith("QnnHtp.dll")
    assert options.device_options["htp_performance_mode"] == "burst"
    assert options.device_options["enable_htp_fp16_precision"] == "1"  # a float model asks for fp16
    assert options.config["session.disable_cpu_ep_fallback"] == "1"
    assert verified.placement.nodes_per_ep == ((QNN, 6),)
    assert not verified.placement.fell_back
    assert verified.placement.badge() == "QNN — all 6 nodes"


def test_quantized_models_do_not_ask_qnn_for_fp16(use: Install, model: Path) -> None:
    fake = use(snapdragon())
    create_session(model, DeviceChoice.parse("qnn"), SessionSettings(quantized_model=True))
    assert "enable_htp_fp16_precision" not in fake.sessions[-1].options.device_options


def test_user_options_override_defaults(use: Install, model: Path) -> None:
    fake = use(snapdragon())
    create_session(model, DeviceChoice.parse("qnn", ep_options={"htp_performance_mode": "power_saver"}))
    assert fake.sessions[-1].options.device_options["htp_performance_mode"] == "power_saver"


def test_partial_npu_support_is_reported_with_the_operators_left_on_cpu(use: Install, model: Path) -> None:
    use(snapdragon(graph_ops=("Conv", "Relu", "NonMaxSuppression", "Gemm")))
    verified = create_session(model, DeviceChoice.parse("npu"))
    placement = verified.placement
    assert placement.fell_back
    assert dict(placement.nodes_per_ep) == {QNN: 3, CPU: 1}
    assert "QNN ran 3 of 4 nodes" in placement.reason
    assert "NonMaxSuppression" in placement.reason
    assert placement.ran_on() == "Split — QNN 3, CPU 1 nodes"


def test_strict_npu_refuses_a_partial_placement(use: Install, model: Path) -> None:
    use(snapdragon(graph_ops=("Conv", "NonMaxSuppression")))
    with pytest.raises(PlacementError) as caught:
        create_session(model, DeviceChoice.parse("npu", strict=True))
    assert "Strict mode" in caught.value.message
    assert "strict mode off" in caught.value.hint


def test_npu_on_a_machine_without_one_falls_back_to_cpu_and_says_why(use: Install, model: Path) -> None:
    fake = use(plain_linux())
    verified = create_session(model, DeviceChoice.parse("npu"))
    assert verified.placement.fell_back
    assert verified.placement.active_eps == (CPU,)
    assert "No usable NPU" in verified.placement.reason
    assert fake.sessions[-1].provider_arg == [CPU]


def test_strict_npu_on_a_machine_without_one_fails_before_creating_a_session(use: Install, model: Path) -> None:
    fake = use(plain_linux())
    with pytest.raises(DeviceUnavailableError) as caught:
        create_session(model, DeviceChoice.parse("npu", strict=True))
    assert "No usable NPU" in caught.value.message
    assert fake.sessions == []


def test_directml_uses_the_provider_list_with_dml_settings(use: Install, model: Path) -> None:
    fake = use(directml_laptop())
    verified = create_session(model, DeviceChoice.parse("gpu"))
    session = fake.sessions[-1]
    assert session.provider_arg == [(DML, {"device_id": "0"}), CPU]
    assert session.options.enable_mem_pattern is False
    assert session.options.execution_mode == "sequential"
    assert verified.placement.badge() == "DirectML — all 6 nodes"


def test_strict_directml_leaves_the_cpu_out_of_the_provider_list(use: Install, model: Path) -> None:
    fake = use(directml_laptop())
    create_session(model, DeviceChoice.parse("dml", strict=True))
    session = fake.sessions[-1]
    assert session.provider_arg == [(DML, {"device_id": "0"})]
    assert session.options.config["session.disable_cpu_ep_fallback"] == "1"


def test_auto_prefers_npu_then_gpu_then_cpu(use: Install, model: Path) -> None:
    use(snapdragon())
    assert create_session(model, DeviceChoice.parse("auto")).placement.primary_ep == QNN
    use(directml_laptop())
    assert create_session(model, DeviceChoice.parse("auto")).placement.primary_ep == DML
    use(plain_linux())
    auto = create_session(model, DeviceChoice.parse("auto")).placement
    assert auto.primary_ep == CPU and not auto.fell_back


def test_efficiency_means_the_npu_else_the_cpu_never_the_gpu(use: Install, model: Path) -> None:
    use(snapdragon())
    verified = create_session(model, DeviceChoice.parse("efficiency"))
    assert verified.plan.mode == "devices" and verified.placement.primary_ep == QNN
    use(directml_laptop())
    on_gpu_laptop = create_session(model, DeviceChoice.parse("efficiency")).placement
    assert on_gpu_laptop.primary_ep == CPU and not on_gpu_laptop.fell_back


def test_a_silent_fallback_inside_onnxruntime_is_caught(use: Install, model: Path) -> None:
    # The build lists DirectML, but the EP takes no node (a driver that accepts nothing): ORT runs all on CPU.
    use(directml_laptop(supported_ops={CPU: None, DML: set()}))
    verified = create_session(model, DeviceChoice.parse("gpu"))
    assert verified.placement.fell_back
    assert "ran every node on CPU" in verified.placement.reason
    use(directml_laptop(supported_ops={CPU: None, DML: set()}))
    with pytest.raises(PlacementError):
        create_session(model, DeviceChoice.parse("gpu", strict=True))


def test_native_failures_are_explained(use: Install, model: Path) -> None:
    use(snapdragon(create_error="QNN error 1002: QNN_COMMON_ERROR_MEM_ALLOC"))
    with pytest.raises(DeviceUnavailableError) as caught:
        create_session(model, DeviceChoice.parse("npu"))
    assert "could not allocate memory" in caught.value.message
    use(snapdragon(create_error="something nobody has seen before"))
    with pytest.raises(SessionCreationError) as unknown:
        create_session(model, DeviceChoice.parse("npu"))
    assert "something nobody has seen before" in unknown.value.message


def test_unknown_device_names_are_rejected_with_the_choices() -> None:
    with pytest.raises(DeviceUnavailableError) as caught:
        DeviceChoice.parse("tpu")
    assert "Unknown device 'tpu'" in caught.value.message
    assert "npu" in caught.value.hint
    assert DeviceChoice.parse("QNN").ep == QNN
    assert DeviceChoice.parse("DmlExecutionProvider").ep == DML
