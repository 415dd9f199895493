"""What the views say before anything loads is what then happens: the device chip and banner, the picker's
"not found", the loading status and the Devices view's sentence all come from the planner's forecast, and
the forecast matches where an ONNX Runtime session and an onnxruntime-genai chat model really go, for every
choice on every fake machine (tests/unit/fake_ort.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engines.chat.folder import ModelFolder
from engines.chat.model import chat_devices, plan_providers
from engines.errors import DeviceUnavailableError
from engines.loading import loading_text
from engines.runtime.devices import discover
from engines.runtime.sessions import create_session
from engines.types import CPU_EP, EP_DEVICE_TYPE, DeviceChoice, DeviceType, Policy
from tests.unit.fake_ort import MACHINES
from tests.unit.tiny_models import tiny_onnx
from ui.common.device_picker import DeviceChoiceModel, DevicePicker
from ui.common.device_state import derive
from ui.devices.view import capability_sentence

CHOICES = (*(p.value for p in Policy), "qnn", "dml", CPU_EP)
CASES = [(machine, text, strict) for machine in MACHINES for text in CHOICES for strict in (False, True)]


def _outcome(open_it: Callable[[], tuple[str, bool]]) -> str:
    """ "refused", "fallback:<EP>" or "runs:<EP>": where a real open went."""
    try:
        ep, fell_back = open_it()
    except DeviceUnavailableError:
        return "refused"
    return f"{'fallback' if fell_back else 'runs'}:{ep}"


@pytest.mark.parametrize(
    ("machine", "text", "strict"), CASES, ids=[f"{m}-{t}-{'strict' if s else 'lenient'}" for m, t, s in CASES]
)
def test_the_views_forecast_is_where_the_model_then_runs(
    machine: str, text: str, strict: bool, fake_runtime: Callable[[Any], Any], tmp_path: Path
) -> None:
    fake_runtime(MACHINES[machine]())
    devices = discover().devices
    choice = DeviceChoice.parse(text, strict=strict)
    model = tiny_onnx(tmp_path / "model.onnx")
    folder = ModelFolder(Path("/models/chat"), "llama", 256, 256, ("model.onnx",), ())

    def session() -> tuple[str, bool]:
        placement = create_session(model, choice).placement
        return placement.primary_ep, placement.fell_back

    def chat() -> tuple[str, bool]:
        plan = plan_providers(folder, choice, chat_devices())
        return plan.ep, plan.fell_back

    real = _outcome(session)
    assert _outcome(chat) == real, "ONNX Runtime and onnxruntime-genai go to the same device"

    state = derive(choice, "model", devices=devices)
    expected_kind = {"refused": "error", "fallback": "warn"}.get(real.split(":")[0], "neutral")
    assert state.chip_kind == expected_kind, state.chip_text
    assert (state.banner is not None) == (real == "refused"), "a banner only where strict will refuse"
    wanted = choice.wanted_type
    if not real.startswith("runs") and wanted is not None:
        assert wanted.value in state.chip_text, "the chip names the device that is missing"

    status = loading_text("model", choice, lambda: devices)
    if wanted is None or wanted == DeviceType.CPU:
        assert status == f"Loading model ({choice.describe()})…"
    elif real == "refused":
        assert f"strict: there is no {wanted.value}" in status
    elif real.startswith("fallback"):
        assert status.startswith("Loading model on the CPU")
    else:
        assert "on the CPU" not in status
        assert ("compiles" in status) == (EP_DEVICE_TYPE.get(real.removeprefix("runs:")) == DeviceType.NPU)


@pytest.mark.parametrize("machine", list(MACHINES))
def test_the_picker_and_the_devices_view_say_what_the_planner_does(
    machine: str, fake_runtime: Callable[[Any], Any], tmp_path: Path, qtbot: Any
) -> None:
    fake_runtime(MACHINES[machine]())
    devices = discover().devices
    model = tiny_onnx(tmp_path / "model.onnx")
    choices = DeviceChoiceModel()
    choices.set_devices(devices)
    picker = DevicePicker(choices)
    qtbot.addWidget(picker)
    labels = {picker.combo.itemData(i): picker.combo.itemText(i) for i in range(picker.combo.count())}
    for policy in Policy:
        fell_back = create_session(model, DeviceChoice(policy=policy)).placement.fell_back
        assert labels[policy.value].endswith("not found") == fell_back, labels[policy.value]
    explicit = [ep for ep in labels if ep not in {p.value for p in Policy}]
    usable = [d.ep for d in devices if d.usable and d.ep != CPU_EP]
    assert explicit == list(dict.fromkeys(usable)), "explicit devices in discovery's (the planner's) order"

    auto = create_session(model, DeviceChoice()).placement.primary_ep
    sentence = capability_sentence(devices)
    runs_on = EP_DEVICE_TYPE.get(auto, DeviceType.CPU)
    opening = {DeviceType.NPU: "This machine has an NPU", DeviceType.GPU: "No NPU here, but the GPU"}
    assert sentence.startswith(opening.get(runs_on, "No NPU or GPU")), sentence
