"""One planner, one meaning: every policy on every kind of machine plans the same device for an ONNX
Runtime session and for an onnxruntime-genai chat model (both fed by the same device discovery)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engines.chat.folder import ModelFolder
from engines.chat.model import chat_devices, plan_providers
from engines.errors import DeviceUnavailableError
from engines.runtime.devices import discover
from engines.runtime.fallback import DeviceHealth, alternatives
from engines.runtime.planning import MEANING, ORDER, RANKING, best_first, predict_device
from engines.runtime.sessions import create_session
from engines.types import Device, DeviceChoice, DeviceType, Policy
from tests.unit.fake_ort import CPU, DML, MACHINES, QNN
from tests.unit.tiny_models import tiny_onnx

POLICIES = ("auto", "npu", "gpu", "cpu", "efficiency", "performance")
# machine -> the EP each policy plans; "CPU!" is the CPU as a fallback (said, and an error when strict).
TABLE: dict[str, tuple[str, ...]] = {
    "cpu only": ("CPU", "CPU!", "CPU!", "CPU", "CPU", "CPU"),
    "snapdragon (npu)": ("QNN", "QNN", "CPU!", "CPU", "QNN", "QNN"),
    "directml (gpu)": ("DML", "CPU!", "DML", "CPU", "CPU", "DML"),
    "npu and gpu": ("QNN", "QNN", "DML", "CPU", "QNN", "DML"),
}
EPS = {"CPU": CPU, "QNN": QNN, "DML": DML}
CASES = [(machine, policy, TABLE[machine][i]) for machine in MACHINES for i, policy in enumerate(POLICIES)]


def _chat_folder() -> ModelFolder:
    return ModelFolder(Path("/models/chat"), "llama", 256, 256, ("model.onnx",), ())


@pytest.mark.parametrize(("machine", "policy", "expected"), CASES, ids=[f"{m}-{p}" for m, p, _ in CASES])
def test_every_policy_means_the_same_device_for_onnxruntime_and_genai(
    machine: str, policy: str, expected: str, fake_runtime: Callable[[Any], Any], tmp_path: Path
) -> None:
    fake_runtime(MACHINES[machine]())
    model = tiny_onnx(tmp_path / "model.onnx")
    ep, fell_back = EPS[expected.rstrip("!")], expected.endswith("!")
    choice = DeviceChoice.parse(policy)

    session = create_session(model, choice).placement
    chat = plan_providers(_chat_folder(), choice, chat_devices())
    assert (session.primary_ep, session.fell_back) == (ep, fell_back), "ONNX Runtime session"
    assert (chat.ep, chat.fell_back) == (ep, fell_back), "onnxruntime-genai chat model"

    strict = DeviceChoice.parse(policy, strict=True)
    devices = discover().devices
    forecast, strict_forecast = predict_device(choice, devices), predict_device(strict, devices)
    assert forecast is not None and strict_forecast is not None
    assert (forecast.falls_back, forecast.refused) == (fell_back, False), "the views' forecast"
    assert (strict_forecast.falls_back, strict_forecast.refused) == (fell_back, fell_back), "strict forecast"
    if fell_back:
        with pytest.raises(DeviceUnavailableError):
            create_session(model, strict)
        with pytest.raises(DeviceUnavailableError):
            plan_providers(_chat_folder(), strict, chat_devices())
    else:
        assert create_session(model, strict).placement.primary_ep == ep  # the fakes' EPs take every node
        assert plan_providers(_chat_folder(), strict, chat_devices()).ep == ep


def test_every_policy_has_an_order_and_words_for_the_picker() -> None:
    assert set(ORDER) == set(Policy) == set(MEANING)
    assert all(MEANING[p].endswith(".") for p in Policy)


def test_no_forecast_before_discovery() -> None:
    assert predict_device(DeviceChoice.parse("npu"), []) is None


def test_a_forecast_says_why_in_discoverys_words() -> None:
    cpu = Device("CPUExecutionProvider", DeviceType.CPU, "", True)
    npu = Device("QNNExecutionProvider", DeviceType.NPU, "Qualcomm", False, reason="Needs Windows on Arm.")
    forecast = predict_device(DeviceChoice.parse("npu"), [cpu, npu])
    assert forecast is not None and forecast.asked == DeviceType.NPU and forecast.missing == "Needs Windows on Arm."
    assert predict_device(DeviceChoice.parse("cpu"), [cpu, npu]) == predict_device(DeviceChoice.parse("cpu"), [cpu])
    on_cpu = predict_device(DeviceChoice.parse("auto"), [cpu, npu])
    assert on_cpu is not None and not on_cpu.falls_back and on_cpu.missing == ""


def test_discovery_and_fallback_offers_follow_the_one_ranking(fake_runtime: Callable[[Any], Any]) -> None:
    fake_runtime(MACHINES["npu and gpu"]())
    report = discover()
    usable = [d.type for d in report.usable()]
    assert usable == sorted(usable, key=RANKING.index) and set(usable) == set(RANKING)
    offered = alternatives(report, DeviceHealth(), exclude=set())
    assert [c.ep or "CPU" for c in offered] == [QNN, DML, "CPU"]
    shuffled = [d for d in reversed(report.devices)]
    assert [d.type for d in best_first(shuffled)] == sorted((d.type for d in shuffled), key=RANKING.index)
