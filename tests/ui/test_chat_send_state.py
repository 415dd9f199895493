"""What the Chat view says and allows while no model can answer: Send is disabled and says why (the device),
one banner per cause, an expected fallback is the chip's to say, and once the cause is gone a question left
without an answer is one click from its answer (the real app with a scripted chat engine)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from engines.errors import DeviceUnavailableError
from engines.types import CPU_EP, DeviceChoice, Placement
from tests.ui.fakes import FakeChatModel

TIMEOUT = 60_000
NO_NPU = "No usable NPU for chat on this machine: no NPU driver was found."
STRICT_HINT = "Turn strict mode off to run on the CPU instead, or pick another device."


@dataclass
class NpuLessModel(FakeChatModel):
    """A machine with no NPU: asked for the NPU it runs on the CPU and says why; under Strict it fails."""

    asked_npu: bool = False

    @property
    def placement(self) -> Placement:
        if self.asked_npu:
            return Placement("NPU", (CPU_EP,), (CPU_EP,), fell_back=True, reason=NO_NPU)
        return Placement("Automatic", (CPU_EP,), (CPU_EP,))


def start(make_studio: Any, qtbot: Any) -> tuple[Any, NpuLessModel]:
    model = NpuLessModel()

    def load(folder: Path, choice: DeviceChoice) -> NpuLessModel:
        npu = choice.policy.value == "npu"
        if npu and choice.strict:
            raise DeviceUnavailableError(NO_NPU, STRICT_HINT)
        model.asked_npu = npu
        return model

    studio = make_studio(chat_loader=load)
    studio.show()
    studio.window.resize(1280, 720)
    studio.window.show_view("chat")
    studio.load_chat_model()
    qtbot.waitUntil(lambda: bool(studio.chat_view.status.info), timeout=TIMEOUT)
    return studio, model


def buttons(view: Any) -> list[str]:
    return [b.text() for b in view.banners.findChildren(QPushButton) if b.isVisibleTo(view.banners)]


def test_strict_npu_disables_send_says_why_and_unticking_it_sends_with_one_click(make_studio: Any, qtbot: Any) -> None:
    studio, model = start(make_studio, qtbot)
    view = studio.chat_view
    send = view.composer.send_button
    studio.choice_model.set_text("npu")
    studio.choice_model.set_strict(True)
    qtbot.waitUntil(lambda: view.status.inputs.model_error is not None, timeout=TIMEOUT)
    assert view.banners.messages() == [NO_NPU]  # one banner, naming the device (not "pick a model")
    assert view.banners.shown()[0].hint == STRICT_HINT
    assert not send.isEnabled() and "No usable NPU" in send.toolTip() and "strict" in send.toolTip()
    assert view.header.model_badge.text() == "Chat model not loaded"

    view.composer.input.setFocus()
    qtbot.keyClicks(view.composer.input, "Hello")
    qtbot.keyClick(view.composer.input, Qt.Key.Key_Return)  # Enter does what the disabled button would not
    assert view.composer.input.toPlainText() == "Hello" and view.session.messages == []
    assert studio.store.list() == [] and model.answered == 0

    studio.choice_model.set_strict(False)  # the cause goes: the model loads (on the CPU, asked for the NPU)
    qtbot.waitUntil(lambda: bool(view.status.info) and send.isEnabled(), timeout=TIMEOUT)
    assert view.banners.messages() == []  # no stale error, and no "pick another device" for a fallback
    assert view.header.model_badge.text() == "Asked NPU → Ran on CPU"
    assert view.composer.input.toPlainText() == "Hello"  # the waiting message, one click from being sent
    send.click()
    qtbot.waitUntil(lambda: not view.session.generating and len(view.session.messages) == 2, timeout=TIMEOUT)
    assert [m.text for m in view.session.messages] == ["Hello", "Hello, **world**!"]
    assert view.banners.messages() == []


def test_a_question_sent_while_the_model_fails_to_load_waits_and_is_answered_with_one_click(
    make_studio: Any, qtbot: Any
) -> None:
    studio, model = start(make_studio, qtbot)
    view = studio.chat_view
    studio.choice_model.set_text("npu")
    studio.choice_model.set_strict(True)  # the load starts: a message sent now waits for it
    assert view.status.inputs.loading and view.composer.send_button.isEnabled()
    assert view.session.send_text("Hello")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert [m.role for m in view.session.messages] == ["user"]  # stored, not answered
    assert view.banners.messages() == [NO_NPU]  # the load's failure says it all: no second, vaguer banner
    assert not view.composer.send_button.isEnabled()

    studio.choice_model.set_strict(False)
    qtbot.waitUntil(lambda: buttons(view) == ["Answer it"], timeout=TIMEOUT)
    assert view.banners.messages() == ["“Hello” has no answer yet."]
    next(b for b in view.banners.findChildren(QPushButton) if b.text() == "Answer it").click()
    qtbot.waitUntil(lambda: not view.session.generating and len(view.session.messages) == 2, timeout=TIMEOUT)
    assert [m.text for m in view.session.messages] == ["Hello", "Hello, **world**!"]  # answered, not asked twice
    assert model.requests[-1][1:] == ("Hello", [])
    assert view.banners.messages() == []


def test_one_banner_per_cause_the_newest_replacing_the_older(make_studio: Any, qtbot: Any) -> None:
    studio, _model = start(make_studio, qtbot)
    view = studio.chat_view
    view.status.failed(DeviceUnavailableError("GPU gone.", "Pick another device."))
    view.status.failed(DeviceUnavailableError("NPU gone.", "Pick another device."))
    assert view.banners.messages() == ["NPU gone."]
    assert not view.session.send_text("Hi") and not view.session.send_text("Hi again")
    assert view.banners.messages() == ["Not sent: no chat model can answer yet.", "NPU gone."]
    assert view.composer.input.toPlainText() == "Hi again"
    studio.load_chat_model()
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    assert view.banners.messages() == []  # the model loaded: its error, and "not sent", went with it
