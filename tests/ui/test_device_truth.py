"""One device truth in Classify: chip, device banner, status and result panel are derived from the
current choice and the last real outcome, so a toggle or a device change never leaves stale words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engines.errors import DeviceUnavailableError
from engines.types import CPU_EP, Classification, ClassScore, Device, DeviceChoice, DeviceType, Placement
from tests.ui.conftest import SAMPLES
from tests.ui.fakes import FakeChatModel, FakeClassifier, loader_for, opener_for, shown_scores
from ui.classify.view import ClassifyView
from ui.common.device_picker import DeviceChoiceModel

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
    chip = view.device_line.chip
    model.set_text("npu")
    assert chip.text() == "Asked NPU → will run on CPU" and chip.kind == "warn"
    assert view.device_line.caption.text() == "Next run:"
    assert view.banners.messages() == []
    model.set_strict(True)
    assert chip.kind == "error" and "Strict NPU" in chip.text()
    assert view.banners.messages() == ["Strict mode needs the NPU, and this machine has none."]
    # the real strict failure of a run replaces the prediction, and the result panel says it failed
    view.classify_paths([str(SAMPLES / "camera.png")])
    view.show_error(STRICT_FAILED)
    assert view.banners.messages() == [STRICT_FAILED.message]
    assert view.result_panel.title.text() == "Could not classify"
    # Strict off: the strict banner goes, and the photo that failed is classified again, by itself
    with qtbot.waitSignal(view.classify_requested, timeout=2000) as again:
        model.set_strict(False)
    assert again.args[0] == [str(SAMPLES / "camera.png")] and view.busy
    assert view.banners.messages() == []
    assert "Fell back" not in chip.text()
    view.show_result(_result(str(SAMPLES / "camera.png"), "tripod"))
    view.show_finished(None)
    assert view.result_panel.title.text() == "tripod"
    assert view.result_panel.chip.text() == "CPU · 94/94 nodes"


def test_the_device_line_speaks_of_the_next_run(qtbot: Any) -> None:
    view, model = _view(qtbot)
    chip = view.device_line.chip
    model.set_text("auto")
    assert view.banners.messages() == [] and chip.kind == "neutral"
    assert chip.text() == "Automatic · loads with the first photo"
    view.show_loaded("EfficientNet-Lite0", ON_CPU)  # a real load under Automatic: where it will really run
    assert chip.text() == "CPU · 94/94 nodes" and chip.kind == "ok"
    model.set_text("npu")  # that placement was for Automatic: it no longer counts
    assert "94/94" not in chip.text()
    fell_back = Placement("NPU", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),), fell_back=True, wanted_type=DeviceType.NPU)
    view.show_loaded("EfficientNet-Lite0", fell_back)
    assert chip.text() == "Asked NPU → will run on CPU · 94/94 nodes"  # a prediction's tense, never "Ran on"


def test_a_failed_photo_leaves_nothing_of_the_previous_one(qtbot: Any) -> None:
    view, model = _view(qtbot)
    view.classify_paths([str(SAMPLES / "chelsea.png")])
    view.show_result(_result(str(SAMPLES / "chelsea.png")))
    view.show_finished({"count": 1, "errors": 0, "seconds": 0.01})
    assert shown_scores(view.result_panel.bars) and view.result_panel.chip.isVisibleTo(view)
    model.set_strict(True)
    view.classify_paths([str(SAMPLES / "camera.png")])
    view.show_error(STRICT_FAILED)
    assert view.result_panel.title.text() == "Could not classify"
    assert view.result_panel.file.text() == "camera.png"
    assert shown_scores(view.result_panel.bars) == []
    assert not view.result_panel.chip.isVisibleTo(view)


def test_one_photo_from_another_choice_or_model_is_classified_again(qtbot: Any) -> None:
    view, model = _view(qtbot)
    photo = str(SAMPLES / "chelsea.png")
    view.classify_paths([photo])
    view.show_result(_result(photo))
    view.show_finished({"count": 1, "errors": 0, "seconds": 0.01})
    assert view.result_panel.hint.isHidden()
    with qtbot.waitSignal(view.classify_requested, timeout=2000) as again:
        model.set_text("cpu")
    assert again.args[0] == [photo] and view.run is not None and view.run.asked == "CPU only"
    view.show_result(_result(photo))
    view.show_finished(None)
    with qtbot.waitSignal(view.classify_requested, timeout=2000) as again:
        view.set_model("efficientnet-lite0-qdq")  # only the model changes: the same
    assert again.args[0] == [photo]


def test_a_batch_from_another_choice_says_so_and_offers_to_run_again(qtbot: Any) -> None:
    view, model = _view(qtbot)
    photos = [str(SAMPLES / "chelsea.png"), str(SAMPLES / "coffee.png")]
    view.classify_paths(photos)
    for photo in photos:
        view.show_result(_result(photo))
    view.show_finished({"count": 2, "errors": 0, "seconds": 0.01})
    requests: list[Any] = []
    view.classify_requested.connect(requests.append)
    model.set_text("cpu")
    qtbot.wait(50)
    assert requests == []  # a batch may take minutes: not run again without asking
    panel = view.result_panel
    assert panel.hint.text() == "These results ran on Automatic; the next run uses CPU only."
    assert panel.rerun_button.isVisibleTo(view)
    view.set_model("efficientnet-lite0-qdq")
    assert panel.hint.text() == "These results are from efficientnet-lite0; the next run uses efficientnet-lite0-qdq."
    panel.rerun_button.click()
    assert requests == [photos] and view.busy and panel.hint.isHidden()


def test_low_confidence_is_said(qtbot: Any) -> None:
    view, _ = _view(qtbot)
    photo = str(SAMPLES / "rocket.jpg")
    view.classify_paths([photo])
    view.show_result(Classification(photo, (ClassScore(0, "Mexican hairless", 0.24),), 4.0, 2.0, ON_CPU))
    view.show_finished(None)
    assert not view.result_panel.hint.isHidden() and view.result_panel.hint.text().startswith("Low confidence")


def test_status_bar_is_never_ready_while_work_runs(make_studio: Any, qtbot: Any, tmp_path: Path) -> None:
    classifier = FakeClassifier(delay=0.02)
    chat = FakeChatModel(pieces=["word "] * 200, delay=0.005)
    studio = make_studio(open_classifier=opener_for(lambda folder, choice: classifier), chat_loader=loader_for(chat))
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(30):
        (folder / f"p{i}.png").write_bytes((SAMPLES / "chelsea.png").read_bytes())
    view, window = studio.classify_view, studio.window
    view.classify_paths([str(folder)])
    qtbot.waitUntil(lambda: view.inputs.progress.value() >= 3, timeout=TIMEOUT)
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
    from engines.loading import loading_text

    cpu = Device(CPU_EP, DeviceType.CPU, "", True)
    npu_here = Device("QNNExecutionProvider", DeviceType.NPU, "Qualcomm", True)
    npu_missing = Device("QNNExecutionProvider", DeviceType.NPU, "Qualcomm", False, reason="Needs Windows on Arm.")
    without, with_npu = (lambda: (cpu, npu_missing)), (lambda: (npu_here, cpu))
    npu = DeviceChoice.parse("npu")
    assert "compiles" not in loading_text("efficientnet-lite0", npu, without)
    assert "on the CPU (there is no NPU" in loading_text("efficientnet-lite0", npu, without)
    strict = loading_text("efficientnet-lite0", DeviceChoice.parse("npu", strict=True), without)
    assert "strict: there is no NPU" in strict
    assert "compiles" in loading_text("efficientnet-lite0", npu, with_npu)
    assert "compiles" in loading_text("efficientnet-lite0", DeviceChoice.parse("qnn"), with_npu)
    assert "no GPU" in loading_text("efficientnet-lite0", DeviceChoice.parse("gpu"), with_npu)

    def never() -> tuple[Device, ...]:
        raise AssertionError("the CPU and automatic choices ask discovery nothing while loading")

    assert loading_text("m", DeviceChoice.parse("cpu"), never) == "Loading m (CPU only)…"
    assert loading_text("m", DeviceChoice.parse("auto"), never) == "Loading m (Automatic)…"
