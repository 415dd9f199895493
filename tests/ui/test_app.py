"""The whole app (Studio: window, views, hosts, settings, store) driven like a user would."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app import paths
from app.storage.settings import load_settings
from tests.ui.conftest import SAMPLES
from tests.ui.fakes import FakeChatModel, FakeClassifier, loader_for, opener_for, shown_scores, shows_photo

TIMEOUT = 120_000


def shown(studio: Any, qtbot: Any, view: str) -> None:
    """Show the window on `view` and make it the active window (shortcuts go to the active window)."""
    studio.show()
    studio.window.show_view(view)
    studio.window.activateWindow()
    qtbot.waitUntil(studio.window.isActiveWindow)


def test_window_has_every_view_and_shortcuts_switch_them(make_studio: Any, qtbot: Any) -> None:
    studio = make_studio(chat_loader=loader_for(FakeChatModel()))
    studio.show()
    studio.window.activateWindow()
    qtbot.waitUntil(studio.window.isActiveWindow)  # shortcuts go to the active window
    assert studio.window.view_keys()[:3] == ["devices", "classify", "chat"]
    assert {"benchmark", "models", "settings"} <= set(studio.window.view_keys())
    qtbot.keyClick(studio.window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert studio.window.current_view() == "classify"
    qtbot.keyClick(studio.window, Qt.Key.Key_3, Qt.KeyboardModifier.ControlModifier)
    assert studio.window.current_view() == "chat"
    qtbot.keyClick(studio.window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert studio.window.current_view() == "chat" and studio.chat_view.session.conversation is None


def test_devices_are_shown(make_studio: Any, qtbot: Any) -> None:
    studio = make_studio()
    studio.show()
    qtbot.waitUntil(lambda: bool(studio.devices_view.devices), timeout=TIMEOUT)
    view = studio.devices_view
    cpu_cards = [c for c in view.cards if c.device.type.value == "CPU"]
    assert cpu_cards and cpu_cards[0].badge.text() == "Usable"
    if not any(d.usable and d.type.value == "NPU" for d in view.devices):
        assert view.npu_notice is not None  # "No NPU found on this machine — here is why"
    assert "ONNX Runtime" in view.summary.text()
    assert "usable" in studio.window.device_label.text()


def test_startup_shows_the_window_before_onnxruntime_loads(tmp_path: Path) -> None:
    """In a fresh process: the window is shown before onnxruntime is imported (the workers load it)."""
    import os
    import subprocess

    probe = tmp_path / "probe.json"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", NPU_STUDIO_STARTUP_PROBE=str(probe))
    done = subprocess.run([sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    state = json.loads(probe.read_text())
    assert state["runtime_loaded_at_show"] is False


def test_the_startup_probe_can_keep_the_window_open(tmp_path: Path) -> None:
    """NPU_STUDIO_STARTUP_STAY=1 (tests/bench/bench_memory.py): the probe is written, the app stays up."""
    import contextlib
    import os
    import subprocess
    import time

    probe = tmp_path / "probe.json"
    env = dict(
        os.environ, QT_QPA_PLATFORM="offscreen", NPU_STUDIO_HOME=str(tmp_path / "home"),
        NPU_STUDIO_STARTUP_PROBE=str(probe), NPU_STUDIO_STARTUP_STAY="1", NPU_STUDIO_NO_PRELOAD="1",
    )
    app = subprocess.Popen([sys.executable, "-m", "app"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, state = time.monotonic() + 120, {}
        while "shown_at" not in state and app.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            with contextlib.suppress(OSError, ValueError):  # not written yet, or being written
                state = json.loads(probe.read_text())
        assert "shown_at" in state
        time.sleep(1.0)
        assert app.poll() is None  # without STAY the window closes as soon as the probe is written
    finally:
        app.terminate()
        app.wait(timeout=30)


def test_classify_end_to_end_on_a_real_photo(make_studio: Any, qtbot: Any, demo_classifier: Path) -> None:
    studio = make_studio()
    studio.window.show_view("classify")
    view = studio.classify_view
    view.classify_paths([str(SAMPLES / "chelsea.png")])
    assert view.busy and view.inputs.spinner.running
    qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT)
    assert view.batch.results.results and not view.batch.results.results[0].error
    scores = shown_scores(view.result_panel.bars)
    assert len(scores) == 5 and scores[0][1].endswith("%")
    assert any(word in view.result_panel.title.text() for word in ("cat", "tabby"))
    assert view.result_panel.chip.text().startswith("CPU · ") and view.result_panel.chip.kind == "ok"
    assert "inference" in view.result_panel.latency.text() and " ms" in view.result_panel.latency.text()
    assert shows_photo(view.drop_zone)


def test_a_bad_image_shows_an_error_banner(make_studio: Any, qtbot: Any, demo_classifier: Path, tmp_path: Path) -> None:
    studio = make_studio()
    bad = tmp_path / "holiday.jpg"
    bad.write_text("this is not a photo")
    view = studio.classify_view
    view.classify_paths([str(bad)])
    qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT)
    messages = view.banners.messages()
    assert messages == ["Could not classify holiday.jpg."]
    assert view.banners.isVisibleTo(view)
    # the view is usable again
    view.classify_paths([str(SAMPLES / "coffee.png")])
    qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT)
    assert "espresso" in view.result_panel.title.text()
    assert view.banners.messages() == []


def test_a_missing_model_is_explained(make_studio: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    studio = make_studio()
    studio.settings.classifier = "no-such-model"
    studio.classify_view.classify_paths([str(SAMPLES / "chelsea.png")])
    assert not studio.classify_view.busy
    assert "is not installed" in studio.classify_view.banners.messages()[0]


def test_batch_with_progress_cancel_and_csv(make_studio: Any, qtbot: Any, tmp_path: Path) -> None:
    classifier = FakeClassifier(delay=0.03)
    studio = make_studio(open_classifier=opener_for(lambda folder, choice: classifier))
    shown(studio, qtbot, "classify")
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(40):
        (folder / f"p{i:02d}.png").write_bytes((SAMPLES / "chelsea.png").read_bytes())
    (folder / "notes.txt").write_text("skipped: not an image")
    view = studio.classify_view
    view.classify_paths([str(folder)])
    assert view.inputs.progress.isVisibleTo(view) and view.inputs.cancel_button.isVisibleTo(view)
    assert view.inputs.progress.maximum() == 40
    qtbot.waitUntil(lambda: view.inputs.progress.value() >= 3, timeout=TIMEOUT)
    qtbot.keyClick(studio.window, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT)
    assert view.inputs.status_text().startswith("Cancelled after")
    done = len(view.batch.results.results)
    assert 3 <= done < 40 and view.batch.results.rowCount() == done
    out = tmp_path / "results.csv"
    view.batch.export_csv(str(out))
    rows = out.read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("path,label_1,probability_1") and len(rows) == done + 1
    assert "tabby" in rows[1]


def test_chat_streams_and_stores_the_answer(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel(pieces=["Here is code:\n\n", "```python\n", "print('hi')\n", "```\n"], delay=0.01)
    studio = make_studio(chat_loader=loader_for(model))
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: view.status.info.get("name") == "fake-model", timeout=TIMEOUT)
    assert view.header.model_badge.text() == "CPU" and view.header.model_badge.kind == "ok"
    shown(studio, qtbot, "chat")
    view.composer.input.setFocus()
    view.composer.input.setPlainText("Show me code")
    qtbot.keyClick(view.composer.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert view.session.generating and view.composer.input.toPlainText() == ""
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    answer = view.session.messages[-1]
    assert answer.text == "".join(model.pieces)
    stored = studio.store.messages(answer.conversation_id)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].model == "fake-model" and stored[1].ep == "CPUExecutionProvider" and stored[1].device == "CPU"
    assert stored[1].stop_reason == "eos" and stored[1].stats["decode_tokens_per_s"] == 100.0
    text = view.transcript.toPlainText()
    assert "print('hi')" in text and "```" not in text  # rendered as Markdown, not shown raw
    assert "decode 100 tok/s · prefill 200 tok/s · TTFT 0.05 s" in text
    assert view.composer.context_label.text().startswith("Context: ")
    assert studio.store.list()[0].title == "Show me code"


def test_stop_regenerate_edit(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel(pieces=["word "] * 400, delay=0.005)
    studio = make_studio(chat_loader=loader_for(model))
    shown(studio, qtbot, "chat")
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    assert view.session.send_text("Talk for a while")
    qtbot.waitUntil(lambda: len(view.session.answer.text) > 20, timeout=TIMEOUT)
    assert view.composer.stop_button.isVisibleTo(view)
    qtbot.keyClick(studio.window, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    stopped = view.session.messages[-1]
    assert stopped.stop_reason == "cancelled" and 0 < len(stopped.text) < 2000
    assert "Stopped" in view.transcript.toPlainText()

    model.pieces, model.delay = ["A fresh answer."], 0.0
    view.session.regenerate()
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert [m.text for m in view.session.messages] == ["Talk for a while", "A fresh answer."]
    assert model.requests[-1][0] == "regenerate"

    view.session.begin_edit()
    assert view.composer.input.toPlainText() == "Talk for a while" and view.composer.send_button.text() == "Resend"
    assert view.session.send_text("Say one word")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert [m.text for m in view.session.messages] == ["Say one word", "A fresh answer."]
    assert model.requests[-1][:2] == ("edit", "Say one word")
    stored = studio.store.messages(view.session.conversation.id)
    assert [m.text for m in stored] == ["Say one word", "A fresh answer."]


def test_conversations_new_rename_search_delete_export(make_studio: Any, qtbot: Any, tmp_path: Path) -> None:
    studio = make_studio(chat_loader=loader_for(FakeChatModel()))
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    for text in ("About cats", "About rockets"):
        view.new_conversation()
        assert view.session.send_text(text)
        qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    listed = view.conversations.list

    def titles() -> list[str]:
        return [listed.item(i).text() for i in range(listed.count())]

    qtbot.waitUntil(lambda: titles() == ["About rockets", "About cats"])
    first = int(listed.item(1).data(Qt.ItemDataRole.UserRole))
    listed.item(1).setText("Cats, renamed")  # what the list's editor (F2, double-click) does
    qtbot.waitUntil(lambda: "Cats, renamed" in titles() and studio.store.get(first).title == "Cats, renamed")
    view.conversations.search.setText("rocket")
    qtbot.waitUntil(lambda: titles() == ["About rockets"])
    view.conversations.search.setText("")
    qtbot.waitUntil(lambda: len(titles()) == 2)
    view.open_conversation(first)
    qtbot.waitUntil(lambda: view.title.text() == "Cats, renamed" and "About cats" in view.transcript.toPlainText())
    md, js = tmp_path / "c.md", tmp_path / "c.json"
    view.export_requested.emit(first, "markdown", str(md))
    view.export_requested.emit(first, "json", str(js))
    qtbot.waitUntil(lambda: js.exists() and view.banners.messages() == ["Saved c.json"])
    assert "About cats" in md.read_text() and json.loads(js.read_text())["messages"][0]["text"] == "About cats"
    view.export_requested.emit(first, "json", str(tmp_path / "missing" / "c.json"))
    qtbot.waitUntil(lambda: any("Could not write" in m for m in view.banners.messages()))
    view.delete_conversation(first, confirm=False)
    qtbot.waitUntil(lambda: titles() == ["About rockets"] and view.session.conversation is None)
    assert [c.title for c in studio.store.list()] == ["About rockets"]


def test_resuming_a_stored_conversation_gives_the_engine_its_history(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel()
    studio = make_studio(chat_loader=loader_for(model))
    conversation = studio.store.create("Earlier", model="fake-model")
    studio.store.add_message(conversation.id, "user", "First question")
    studio.store.add_message(conversation.id, "assistant", "First answer", stop_reason="eos")
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    studio.conversations.refresh()
    view.open_conversation(conversation.id)
    qtbot.waitUntil(lambda: view.session.conversation is not None and bool(view.status.info), timeout=TIMEOUT)
    assert view.session.send_text("Second question")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert model.requests[-1] == (
        "send",
        "Second question",
        [("user", "First question"), ("assistant", "First answer")],
    )


def test_closing_mid_generation_keeps_the_partial_answer(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel(pieces=["token "] * 5000, delay=0.005)
    studio = make_studio(chat_loader=loader_for(model))
    studio.show()
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    assert view.session.send_text("Never stop")
    qtbot.waitUntil(lambda: len(view.session.answer.text) > 30 and view.session.answer.key is not None, timeout=TIMEOUT)
    answer_id = view.session.answer.key
    studio.window.close()  # first the engine is told to stop; the window closes once it has
    qtbot.waitUntil(lambda: not studio.window.isVisible(), timeout=TIMEOUT)
    assert studio.shutdown()
    from app.storage.conversations import ConversationStore

    reopened = ConversationStore(paths.data_dir() / "conversations.db")
    answer = next(m for m in reopened.messages(view.session.conversation.id) if m.id == answer_id)
    reopened.close()
    assert answer.stop_reason == "cancelled"
    assert answer.text.startswith("token token") and len(answer.text) < len("token ") * 5000
    settings, _ = load_settings()
    assert settings.window_geometry  # saved on close


def test_closing_mid_batch_does_not_crash(make_studio: Any, qtbot: Any) -> None:
    classifier = FakeClassifier(delay=0.05)
    studio = make_studio(open_classifier=opener_for(lambda folder, choice: classifier))
    studio.show()
    studio.classify_view.classify_paths([str(SAMPLES / "chelsea.png")] * 50)
    qtbot.waitUntil(lambda: classifier.calls >= 2, timeout=TIMEOUT)
    studio.window.close()
    qtbot.waitUntil(lambda: not studio.window.isVisible(), timeout=TIMEOUT)
    assert studio.shutdown()
    assert classifier.calls < 50


def test_device_choice_is_shared_and_persisted(make_studio: Any, qtbot: Any) -> None:
    studio = make_studio()
    studio.devices_view.picker.combo.setCurrentIndex(studio.devices_view.picker.combo.findData("cpu"))
    studio.devices_view.picker.strict.setChecked(True)
    for picker in (studio.classify_view.picker, studio.chat_view.header.picker):
        assert picker.combo.currentData() == "cpu" and picker.strict.isChecked()
    assert studio.save_settings()
    settings, notice = load_settings()
    assert (settings.device, settings.strict, notice) == ("cpu", True, None)


@pytest.mark.allow_warnings("settings")
def test_a_corrupt_settings_file_means_defaults_and_a_notice(make_studio: Any) -> None:
    path = paths.config_dir() / "settings.json"
    path.write_text("{ this is not json", encoding="utf-8")
    studio = make_studio()
    assert studio.settings.device == "auto"
    notices = studio.window.banners.messages()
    assert len(notices) == 1 and "settings" in notices[0].lower()
    assert list(path.parent.glob("settings.json.bad-*"))


def test_window_geometry_and_view_are_restored(make_studio: Any, qtbot: Any) -> None:
    studio = make_studio()
    studio.show()
    studio.window.resize(1100, 700)
    studio.window.show_view("chat")
    studio.window.close()
    qtbot.waitUntil(lambda: not studio.window.isVisible(), timeout=TIMEOUT)
    again = make_studio()
    assert again.window.current_view() == "chat"
    # restoreGeometry() fits the window to the screen (the offscreen screen is 800 px wide), so check
    # the saved geometry and the dimension that fits.
    assert again.settings.window_geometry and again.window.size().height() == 700


@pytest.mark.allow_warnings("uncaught exception")
def test_uncaught_exceptions_are_logged_and_recorded(caplog: pytest.LogCaptureFixture) -> None:
    from app.window.crash import CrashReporter

    reporter = CrashReporter(show_dialog=False)
    try:
        raise ValueError("a bug in a slot")
    except ValueError as exc:
        reporter.excepthook(ValueError, exc, exc.__traceback__)
    assert reporter.errors == ["ValueError: a bug in a slot"]
    assert any("a bug in a slot" in r.getMessage() and r.levelname == "CRITICAL" for r in caplog.records)


def test_copy_puts_an_answer_on_the_clipboard(make_studio: Any, qtbot: Any) -> None:
    from PySide6.QtWidgets import QApplication

    studio = make_studio(chat_loader=loader_for(FakeChatModel(pieces=["Copy **me**"])))
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    assert view.session.send_text("Say something")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    view.transcript.action_triggered.emit("copy", view.session.messages[-1].id)
    assert QApplication.clipboard().text() == "Copy **me**"  # the Markdown source, as written


def test_a_failed_answer_can_be_retried(make_studio: Any, qtbot: Any) -> None:
    from engines.errors import GenerationError

    model = FakeChatModel(error=GenerationError("The NPU was reset.", "Try again."))
    studio = make_studio(chat_loader=loader_for(model))
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    assert view.session.send_text("Hello")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert view.banners.messages() == ["The NPU was reset."]
    failed = view.session.messages[-1]
    assert (failed.role, failed.stop_reason) == ("assistant", "error") and "Failed" in view.transcript.toPlainText()
    assert view.transcript.link_labels().get(f"npu-action:regenerate/{failed.id}") == "Regenerate"
    model.error = None
    view.session.regenerate()
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert [(m.role, m.stop_reason) for m in view.session.messages] == [("user", ""), ("assistant", "eos")]
    assert view.session.messages[-1].text == "Hello, **world**!"


@pytest.mark.allow_warnings("marked unusable for this run")
def test_a_gpu_lost_mid_batch_is_marked_unusable_and_a_retry_on_the_cpu_is_offered(
    make_studio: Any, qtbot: Any, demo_classifier: Path
) -> None:
    from PySide6.QtWidgets import QPushButton

    from engines.runtime.fallback import HEALTH
    from engines.types import CPU_EP, DeviceChoice, Placement

    dml = "DmlExecutionProvider"

    class LostGpu(FakeClassifier):
        def __init__(self) -> None:
            super().__init__()
            self.placement = Placement("GPU", (dml,), (dml, CPU_EP), ((dml, 12),))

        def classify_many(self, paths: list[str], k: int = 5, cancel: Any = None, **kwargs: Any) -> Any:
            raise RuntimeError("DirectML: DXGI_ERROR_DEVICE_REMOVED (0x887A0005)")

    made: list[DeviceChoice] = []

    def factory(folder: Path, choice: DeviceChoice) -> Any:
        made.append(choice)
        return LostGpu() if choice.policy.value == "gpu" else FakeClassifier()

    studio = make_studio(open_classifier=opener_for(factory))
    try:
        studio.choice_model.set_text("gpu")  # what picking "GPU" in the device picker does
        view = studio.classify_view
        view.classify_paths([str(SAMPLES / "chelsea.png")])
        qtbot.waitUntil(lambda: not view.busy and bool(view.banners.messages()), timeout=TIMEOUT)
        assert any("0x887A0005" in m for m in view.banners.messages())
        assert HEALTH.is_failed(dml)  # unusable for the rest of the run
        buttons = [b for b in view.banners.findChildren(QPushButton) if b.text().startswith("Retry on")]
        assert [b.text() for b in buttons] == ["Retry on the CPU"]
        buttons[0].click()
        qtbot.waitUntil(lambda: not view.busy and bool(view.batch.results.results), timeout=TIMEOUT)
        assert "tabby" in view.result_panel.title.text()
        assert made[-1].policy.value == "cpu"
    finally:
        HEALTH.reset()


@pytest.mark.allow_warnings("marked unusable for this run")
def test_a_gpu_lost_mid_answer_offers_the_chat_a_retry_on_the_cpu(make_studio: Any, qtbot: Any) -> None:
    from PySide6.QtWidgets import QPushButton

    from engines.errors import GenerationError
    from engines.runtime.fallback import HEALTH

    model = FakeChatModel(pieces=["Rivers ", "flow."], ep="DmlExecutionProvider")
    model.error = GenerationError(
        "Generation failed: DirectML error 0x887A0005: the GPU was removed or reset.",
        "Try another device.",
        failure_code="0x887A0005",
        device_lost=True,
    )
    studio = make_studio(chat_loader=loader_for(model))
    studio.choice_model.set_text("gpu")
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    assert view.session.send_text("Tell me about rivers.")
    qtbot.waitUntil(lambda: not view.session.generating and bool(view.banners.messages()), timeout=TIMEOUT)
    buttons = [b for b in view.banners.findChildren(QPushButton) if b.text() == "Retry on the CPU"]
    assert len(buttons) == 1
    assert HEALTH.is_failed("DmlExecutionProvider"), "the chat host marks the lost device, like the other paths"
    model.error = None  # the CPU works
    buttons[0].click()
    assert studio.choice_model.choice().policy.value == "cpu"
    qtbot.waitUntil(
        lambda: not view.session.generating and "Rivers flow." in view.transcript.toPlainText(), timeout=TIMEOUT
    )
    roles = [m.role for m in view.session.messages]
    assert roles == ["user", "assistant"]
    assert view.session.messages[-1].stop_reason == "eos"


def test_the_chat_retry_reads_the_error_fields_not_its_words() -> None:
    from app.window.device_offers import device_failed
    from engines.errors import GenerationError

    words_only = GenerationError("Generation failed: DirectML error 0x887A0005: the GPU was removed or reset.")
    assert not device_failed(words_only), "translated text is never parsed again"
    fields = GenerationError("Generation failed: the device stopped.", failure_code="npu-device", device_lost=True)
    assert device_failed(fields)
    assert not device_failed(GenerationError("The chat template failed on this conversation."))


def test_the_apps_save_does_not_undo_what_another_process_saved(make_studio: Any) -> None:
    """A CLI command (or a second window) saves a setting while the app runs; the app's next save keeps it."""
    import dataclasses

    from app.storage.settings import save_settings

    studio = make_studio()
    on_disk, _ = load_settings()
    save_settings(dataclasses.replace(on_disk, top_k=9, system_prompt="Set elsewhere."), since=on_disk)
    studio.keeper.remember(theme="dark")
    assert studio.save_settings()
    settings, notice = load_settings()
    assert (settings.theme, settings.top_k, settings.system_prompt, notice) == ("dark", 9, "Set elsewhere.", None)
