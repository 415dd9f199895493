"""One device truth in Classify: chip, device banner, status and result panel are derived from the
current choice and the last real outcome, so a toggle or a device change never leaves stale words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engines.errors import DeviceUnavailableError
from engines.types import CPU_EP, Classification, ClassScore, Device, DeviceChoice, DeviceType, Placement
from tests.ui.conftest import SAMPLES
from tests.ui.fakes import FakeChatModel, FakeClassifier, loader_for
from ui.classify_view import ClassifyView
from ui.device_picker import DeviceChoiceModel

CPU = Device(CPU_EP, DeviceType.CPU, "AMD", True)
NO_NPU = Device(
    "QNNExecutionProvider", DeviceType.NPU, "Qualcomm", False, reason="No usable NPU: needs Windows on Arm."
)
ON_CPU = Placement("Automatic", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),))
STRICT_FAILED = DeviceUnavailableError(
    "No usable NPU: the QNN execution provider needs Windows or a Snapdragon machine.",
    "Turn strict mode off to run on the CPU, or pick another device.",
)
TIMEOUT = 60_000


def _view(qtbot: Any) -> tuple[ClassifyView, DeviceChoiceModel]:
    model = DeviceChoiceModel()
    model.set_devices([CPU, NO_NPU])
    view = ClassifyView(model)
    view.set_model("efficientnet-lite0")
    qtbot.addWidget(view)
    return view, model


def _result(path: str, label: str = "tabby", placement: Placement = ON_CPU) -> Classification:
    return Classification(path, (ClassScore(0, label, 0.9), ClassScore(1, "lynx", 0.05)), 4.0, 2.0, placement)


def test_strict_toggle_and_device_change_leave_no_stale_words(qtbot: Any) -> None:
    view, model = _view(qtbot)
    model.set_text("npu")
    assert view.device_chip.text() == "Asked NPU → will run on CPU" and view.device_chip.kind == "warn"
    assert view.banners.messages() == []
    model.set_strict(True)
    assert view.device_chip.kind == "error" and "Strict NPU" in view.device_chip.text()
    assert view.banners.messages() == ["Strict mode needs the NPU, and this machine has none."]
    # the real strict failure of a run replaces the prediction, and the result panel says it failed
    view.classify_paths([str(SAMPLES / "camera.png")])
    view.show_error(STRICT_FAILED)
    assert view.banners.messages() == [STRICT_FAILED.message]
    assert view.result_title.text() == "Could not classify"
    # Strict off: the strict banner goes, the failed result goes, nothing says "Could not classify"
    model.set_strict(False)
    assert view.banners.messages() == []
    assert view.result_title.text() != "Could not classify"
    assert "Fell back" not in view.device_chip.text() and view.device_chip.kind == "warn"
    model.set_text("auto")
    assert view.banners.messages() == [] and view.device_chip.kind == "neutral"
    assert view.device_chip.text() == "Automatic · loads with the first photo"
    # a real load under Automatic: the chip shows where it really runs
    view.show_loaded("EfficientNet-Lite0", ON_CPU)
    assert view.device_chip.text() == "CPU · 94/94 nodes" and view.device_chip.kind == "ok"
    model.set_text("npu")  # that placement was for Automatic: it no longer counts
    assert "94/94" not in view.device_chip.text()


def test_a_failed_photo_leaves_nothing_of_the_previous_one(qtbot: Any) -> None:
    view, model = _view(qtbot)
    view.classify_paths([str(SAMPLES / "chelsea.png")])
    view.show_result(_result(str(SAMPLES / "chelsea.png")))
    view.show_finished({"count": 1, "errors": 0, "seconds": 0.01})
    assert view.bars.scores() and view.placement_chip.isVisibleTo(view)
    model.set_strict(True)
    view.classify_paths([str(SAMPLES / "camera.png")])
    view.show_error(STRICT_FAILED)
    assert view.result_title.text() == "Could not classify"
    assert view.result_file.text() == "camera.png"
    assert view.bars.scores() == []
    assert not view.placement_chip.isVisibleTo(view)


def test_a_success_from_another_choice_is_labelled(qtbot: Any) -> None:
    view, model = _view(qtbot)
    view.classify_paths([str(SAMPLES / "chelsea.png")])
    view.show_result(_result(str(SAMPLES / "chelsea.png")))
    view.show_finished({"count": 1, "errors": 0, "seconds": 0.01})
    assert view.hint.isHidden()
    model.set_text("cpu")
    assert not view.hint.isHidden() and "Classified with Automatic" in view.hint.text()
    model.set_text("auto")
    assert view.hint.isHidden()


def test_low_confidence_is_said(qtbot: Any) -> None:
    view, _ = _view(qtbot)
    horse = str(SAMPLES / "horse.png")
    view.classify_paths([horse])
    view.show_result(Classification(horse, (ClassScore(0, "Mexican hairless", 0.24),), 4.0, 2.0, ON_CPU))
    view.show_finished(None)
    assert not view.hint.isHidden() and view.hint.text().startswith("Low confidence")


def test_status_bar_is_never_ready_while_work_runs(make_studio: Any, qtbot: Any, tmp_path: Path) -> None:
    classifier = FakeClassifier(delay=0.02)
    chat = FakeChatModel(pieces=["word "] * 200, delay=0.005)
    studio = make_studio(classifier_factory=lambda folder, choice: classifier, chat_loader=loader_for(chat))
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(30):
        (folder / f"p{i}.png").write_bytes((SAMPLES / "chelsea.png").read_bytes())
    view, window = studio.classify_view, studio.window
    view.classify_paths([str(folder)])
    qtbot.waitUntil(lambda: view.progress.value() >= 3, timeout=TIMEOUT)
    assert window.status_label.text() != "Ready" and window.status_label.text().startswith("Classifying")
    qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT)
    assert window.status_label.text() == "Ready"
    # the chat's answer (asked of the chat host, as the chat view does)
    studio.chat.load("fake-model", studio.choice_model.choice())
    qtbot.waitUntil(lambda: window.status_label.text() == "Ready", timeout=TIMEOUT)
    studio.chat.generate("send", 1, "Tell me a story", [], "", {})
    qtbot.waitUntil(lambda: window.status_label.text() == "Writing an answer…", timeout=TIMEOUT)
    qtbot.waitUntil(lambda: window.status_label.text() == "Ready", timeout=TIMEOUT)


def test_loading_never_promises_an_npu_compile_without_an_npu() -> None:
    from app.chat_process import loading_text

    npu = DeviceChoice.parse("npu")
    assert "compiles" not in loading_text("efficientnet-lite0", npu, has_npu=lambda: False)
    assert "no NPU" in loading_text("efficientnet-lite0", npu, has_npu=lambda: False)
    assert "compiles" in loading_text("efficientnet-lite0", npu, has_npu=lambda: True)
