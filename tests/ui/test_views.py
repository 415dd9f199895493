"""Views on their own (no engines): devices cards and the empty NPU state, the shared picker, the
transcript's Markdown, banners, the generation panel and dark mode."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QApplication

from engines.errors import ImageError
from engines.types import CPU_EP, Device, DeviceType, Placement
from ui.chat.generation_panel import GenerationPanel
from ui.chat.transcript import Transcript
from ui.chat.transcript_render import Entry
from ui.classify.view import ClassifyView
from ui.common.device_picker import DeviceChoiceModel, DevicePicker
from ui.common.placement_chip import describe_placement
from ui.common.theme import DARK, LIGHT, apply_theme
from ui.common.widgets import BannerArea
from ui.devices.view import DevicesView

NPU = Device("QNNExecutionProvider", DeviceType.NPU, "Qualcomm", False, reason="No Snapdragon NPU driver.")
CPU = Device(CPU_EP, DeviceType.CPU, "AMD", True, ep_vendor="Microsoft", ep_version="1.32.0")
SNAPDRAGON = Device("QNNExecutionProvider", DeviceType.NPU, "Qualcomm", True, ep_version="2.7.0")


def test_devices_view_explains_a_missing_npu(qtbot: Any) -> None:
    view = DevicesView(DeviceChoiceModel())
    qtbot.addWidget(view)
    view.show_loading()
    assert view.spinner.running and not view.refresh_button.isEnabled()
    view.show_devices([CPU, NPU], {"onnxruntime": "1.32.0", "platform": "linux-x86_64", "providers": "CPU"})
    assert not view.spinner.running
    assert view.npu_notice is not None
    texts = [w.text() for w in view.npu_notice.findChildren(type(view.summary))]
    assert "No NPU found on this machine — here is why" in texts
    assert "No Snapdragon NPU driver." in texts
    assert [c.device.ep for c in view.cards] == [CPU_EP]  # the NPU is explained once, in the notice
    assert "usable: CPU" in view.summary.text() and "not available: NPU (why below)" in view.summary.text()
    assert view.capability.text().startswith("No NPU or GPU that ONNX Runtime can use here")
    from ui.devices.view import device_subtitle, device_title

    assert device_title(CPU) == "AMD CPU"  # not "AMD CPU (CPU)"
    assert device_title(SNAPDRAGON) == "Qualcomm NPU (QNN)"
    assert not device_subtitle(CPU).startswith("CPU · CPU")


def test_devices_view_with_an_npu_shows_its_card(qtbot: Any) -> None:
    view = DevicesView(DeviceChoiceModel())
    qtbot.addWidget(view)
    view.show_devices([SNAPDRAGON, CPU], {"onnxruntime": "1.32.0"})
    assert view.npu_notice is None
    assert [c.badge.text() for c in view.cards] == ["Usable", "Usable"]


def test_devices_view_shows_a_discovery_failure(qtbot: Any) -> None:
    view = DevicesView(DeviceChoiceModel())
    qtbot.addWidget(view)
    view.show_error(ImageError("ONNX Runtime could not be loaded.", "Reinstall NPU Studio."))
    assert view.banners.messages() == ["ONNX Runtime could not be loaded."]
    assert view.refresh_button.isEnabled()


def test_one_device_choice_shared_by_every_picker(qtbot: Any) -> None:
    model = DeviceChoiceModel("gpu", strict=False)
    first, second = DevicePicker(model), DevicePicker(model, compact=True)
    qtbot.addWidget(first)
    qtbot.addWidget(second)
    changes: list[Any] = []
    model.changed.connect(changes.append)
    first.combo.setCurrentIndex(first.combo.findData("npu"))
    second.strict.setChecked(True)
    assert second.combo.currentData() == "npu" and first.strict.isChecked()
    assert [c.describe() for c in changes] == ["NPU", "NPU (strict)"]
    model.set_devices([CPU, NPU, SNAPDRAGON])
    assert first.combo.findData("QNNExecutionProvider") >= 0  # an explicit EP for each usable device
    assert first.combo.itemText(first.combo.findData("QNNExecutionProvider")) == "QNN only (explicit provider)"
    # ... but not the CPU EP: "CPU only" is that already ("CPU only" next to "CPU EP only" confused people)
    assert first.combo.findData(CPU_EP) < 0
    model.set_devices([CPU, NPU])
    assert "not found" in first.combo.itemText(first.combo.findData("npu"))
    assert first.combo.currentData() == "npu"


def test_unknown_device_text_falls_back_to_auto() -> None:
    assert DeviceChoiceModel("warp-drive").text == "auto"


def test_transcript_renders_markdown_and_streams_in_place(qtbot: Any) -> None:
    view = Transcript()
    qtbot.addWidget(view)
    view.append_entry(Entry(1, "user", "Write *code*"))
    view.append_entry(Entry(2, "assistant", "", state="streaming"))
    assert "Thinking…" in view.toPlainText()
    for text in ("Sure:", "Sure:\n\n```python\nx = 1", "Sure:\n\n```python\nx = 1\n```\n\n**done**"):
        view.update_last(Entry(2, "assistant", text, state="streaming"))
    view.update_last(Entry(2, "assistant", text, footer="12 tokens", actions=("copy", "regenerate")))
    plain = view.toPlainText()
    assert "Write *code*" in plain  # a user's text is shown as typed
    assert "x = 1" in plain and "```" not in plain and "**" not in plain
    assert plain.count("Assistant") == 1 and "12 tokens" in plain and "Regenerate" in plain
    actions: list[tuple[str, int]] = []
    view.action_triggered.connect(lambda a, k: actions.append((a, k)))
    from PySide6.QtCore import QUrl

    view.anchorClicked.emit(QUrl("npu-action:copy/2"))
    assert actions == [("copy", 2)]


def test_banners_deduplicate_and_dismiss(qtbot: Any) -> None:
    area = BannerArea()
    qtbot.addWidget(area)
    area.show_message("Disk full.", "Free some space.", "error")
    area.show_message("Disk full.", "Free some space.", "error")
    assert area.messages() == ["Disk full."]
    area.show_message("Other", severity="warning")
    area.clear()
    assert area.messages() == []


def test_generation_panel_keeps_only_overrides(qtbot: Any) -> None:
    panel = GenerationPanel()
    qtbot.addWidget(panel)
    panel.set_defaults(
        {
            "max_new_tokens": 200,
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 40,
            "repetition_penalty": 1.1,
            "do_sample": False,
        }
    )
    assert not panel.temperature.isEnabled()  # greedy: sampling settings do not apply
    panel.max_new_tokens.setValue(64)
    panel.do_sample.setChecked(True)
    assert panel.temperature.isEnabled()
    with qtbot.waitSignal(panel.changed, timeout=2000):
        panel.temperature.setValue(1.0)
    assert panel.options() == {"max_new_tokens": 64, "do_sample": True, "temperature": 1.0}
    panel.max_new_tokens.setValue(200)
    assert "max_new_tokens" not in panel.options()
    panel.reset()
    assert panel.options() == {}


def test_placement_badge_kinds() -> None:
    full = Placement("NPU", ("QNNExecutionProvider",), ("QNNExecutionProvider",), (("QNNExecutionProvider", 120),))
    fell = Placement("NPU", ("QNNExecutionProvider",), (CPU_EP,), ((CPU_EP, 120),), fell_back=True, reason="no NPU")
    split = Placement(
        "NPU",
        ("QNNExecutionProvider",),
        ("QNNExecutionProvider", CPU_EP),
        (("QNNExecutionProvider", 100), (CPU_EP, 20)),
    )
    assert (full.badge(), describe_placement(full).kind) == ("QNN — all 120 nodes", "ok")
    assert (fell.badge(), describe_placement(fell).kind) == ("Fell back to CPU: no NPU", "warn")
    assert describe_placement(split).kind == "info"


def test_classify_view_refuses_an_empty_choice(qtbot: Any, tmp_path: Any) -> None:
    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    requests: list[Any] = []
    view.classify_requested.connect(requests.append)
    (tmp_path / "readme.txt").write_text("no photos here")
    view.classify_paths([str(tmp_path)])
    assert requests == [] and view.banners.messages() == ["No photos to classify."]
    banner = view.banners.banner("input")
    assert banner is not None and banner.hint.startswith("1 file skipped: not a photo.")


def test_paste_without_an_image_says_so(qtbot: Any, tmp_path: Any) -> None:
    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    QApplication.clipboard().setText("just text")
    view.inputs.paste()
    assert view.banners.messages() == ["The clipboard holds no image."]


def test_input_problems_keep_one_banner_the_newest(qtbot: Any, tmp_path: Any) -> None:
    """A dropped README.md that fails, then text pasted: the warning about the paste replaces the error
    about the README (one banner per cause), and a new run takes the input banner away."""
    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    readme = tmp_path / "README.md"
    readme.write_text("# not a photo")
    view.classify_paths([str(readme)])
    view.show_error(ImageError(f"Could not decode '{readme.name}': not an image."))
    assert view.banners.messages() == ["Could not decode 'README.md': not an image."]
    requests: list[Any] = []
    view.classify_requested.connect(requests.append)
    view.choice_model.set_text("cpu")  # a photo that cannot be read is not read again on another device
    qtbot.wait(50)
    assert requests == []
    QApplication.clipboard().setText("just text")
    view.inputs.paste()
    assert view.banners.messages() == ["The clipboard holds no image."]
    from tests.ui.conftest import SAMPLES

    view.classify_paths([str(SAMPLES / "coffee.png")])
    assert view.banners.messages() == []


def test_paste_an_image_sends_its_bytes(qtbot: Any) -> None:
    from PySide6.QtGui import QColor, QImage

    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    image = QImage(64, 48, QImage.Format.Format_RGB32)
    image.fill(QColor("orange"))
    QApplication.clipboard().setImage(image)
    with qtbot.waitSignal(view.classify_image_requested, timeout=2000) as sent:
        view.inputs.paste()
    data, name = sent.args
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and name == "Pasted image" and view.busy


def test_dark_palette(qtbot: Any) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    try:
        assert apply_theme(app, "dark") is DARK
        assert app.palette().window().color().name() == DARK.window
    finally:
        assert apply_theme(app, "light") is LIGHT


def test_streaming_renders_complete_blocks_once_and_matches_the_full_render(qtbot: Any) -> None:
    from ui.chat.transcript import committable

    answer = (
        "Intro paragraph with **bold**.\n\n"
        "```python\ndef f():\n\n    return 1\n```\n\n"
        "- one\n- two\n\n"
        "1. first\n2. second\n\n"
        "Closing words."
    )
    assert committable("a\n\nb") == 3 and committable("```\nx\n\ny") == 0
    streamed, whole = Transcript(), Transcript()
    qtbot.addWidget(streamed)
    qtbot.addWidget(whole)
    streamed.append_entry(Entry(1, "user", "hi"))
    streamed.append_entry(Entry(2, "assistant", "", state="streaming"))
    for end in range(1, len(answer) + 1, 3):
        streamed.stream_last(Entry(2, "assistant", answer[:end], state="streaming"))
        assert "```" not in streamed.toPlainText().split("Assistant", 1)[1] or answer[:end].count("```") % 2
    streamed.stream_last(Entry(2, "assistant", answer, state="streaming"))
    during = streamed.toPlainText()
    streamed.update_last(Entry(2, "assistant", answer))
    whole.append_entry(Entry(1, "user", "hi"))
    whole.append_entry(Entry(2, "assistant", answer))
    assert streamed.toPlainText() == whole.toPlainText()
    for line in ("Intro paragraph with bold.", "def f():", "return 1", "one", "second", "Closing words."):
        assert line in during


def test_dropping_files_classifies_them(qtbot: Any) -> None:
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    from tests.ui.conftest import SAMPLES
    from tests.ui.fakes import shows_photo

    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(SAMPLES / "coffee.png")), QUrl.fromLocalFile(str(SAMPLES / "rocket.jpg"))])
    drop = QDropEvent(
        QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier
    )
    with qtbot.waitSignal(view.classify_requested, timeout=2000) as sent:
        view.dropEvent(drop)
    assert [p.rsplit("/", 1)[-1] for p in sent.args[0]] == ["coffee.png", "rocket.jpg"]
    assert view.busy and view.inputs.progress.isVisibleTo(view) and shows_photo(view.drop_zone)


def test_a_result_can_be_copied(qtbot: Any) -> None:
    from engines.types import Classification, ClassScore
    from tests.ui.conftest import SAMPLES

    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    panel = view.result_panel
    assert panel.copy_button.isHidden()  # nothing to copy yet
    photo = str(SAMPLES / "coffee.png")
    view.classify_paths([photo])
    on_cpu = Placement("CPU only", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),), wanted_type=DeviceType.CPU)
    view.show_result(Classification(photo, (ClassScore(0, "espresso", 0.951), ClassScore(1, "cup", 0.015)), 4.0, 2.0,
                                    on_cpu))  # fmt: skip
    view.show_finished(None)
    panel.copy_button.click()
    assert QApplication.clipboard().text().splitlines() == [
        "coffee.png", "espresso\t95.1%", "cup\t1.5%", "CPU · 94/94 nodes", "6.0 ms"
    ]
    assert panel.copy_button.text() == "Copied"
    qtbot.waitUntil(lambda: panel.copy_button.text() == "Copy", timeout=3000)
    assert panel.contextMenuPolicy().name == "CustomContextMenu"
