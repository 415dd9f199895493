"""The chat as a user meets it: keys, long drafts, code blocks, continue, stats, stale banners, reopening,
starter prompts and a live dark theme (the real app with a scripted chat engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor, QTextCursor
from PySide6.QtWidgets import QApplication

from engines.errors import ContextOverflowError, PlacementError
from engines.text import rich_text
from engines.types import CPU_EP, Placement
from tests.ui.fakes import FakeChatModel, loader_for
from ui.chat.code_blocks import CODE_PROPERTY
from ui.chat.text import stats_line
from ui.chat.transcript_render import ACTION_SCHEME
from ui.common.theme import DARK, LIGHT, apply_theme

TIMEOUT = 60_000
CODE = "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)  # " + "long " * 80
ANSWER = f"Here is a function:\n\n```python\n{CODE}\n```\n\nDone."


def ready(make_studio: Any, qtbot: Any, model: FakeChatModel | None = None) -> Any:
    studio = make_studio(chat_loader=loader_for(model or FakeChatModel()))
    studio.show()
    studio.window.resize(1280, 720)
    studio.window.show_view("chat")
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    return studio


def click_link(view: Any, href: str) -> None:
    assert href in view.transcript.link_labels(), f"no link {href}: {view.transcript.link_labels()}"
    view.transcript.anchorClicked.emit(QUrl(href))


def test_enter_sends_shift_enter_adds_a_line_and_the_setting_swaps_them(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    view.composer.input.setFocus()
    qtbot.keyClicks(view.composer.input, "first line")
    qtbot.keyClick(view.composer.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(view.composer.input, "second line")
    assert view.composer.input.toPlainText() == "first line\nsecond line" and not view.session.generating
    qtbot.keyClick(view.composer.input, Qt.Key.Key_Return)
    assert view.composer.input.toPlainText() == ""
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert view.session.messages[0].text == "first line\nsecond line"

    view.panel.enter_sends.setChecked(False)  # swapped: Enter is a new line, Ctrl+Enter sends
    assert studio.settings.chat_enter_sends is False
    qtbot.keyClicks(view.composer.input, "a")
    qtbot.keyClick(view.composer.input, Qt.Key.Key_Return)
    assert view.composer.input.toPlainText() == "a\n" and len(view.session.messages) == 2
    qtbot.keyClick(view.composer.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(view.session.messages) == 4 and not view.session.generating, timeout=TIMEOUT)


def test_an_overlong_draft_is_counted_refused_and_kept(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    paste = "lorem ipsum dolor " * 2800  # 50,400 characters
    view.composer.input.setPlainText(paste)
    assert view.composer.draft_label.text() == "Draft: ≈12,600 tokens · too long for the context"
    qtbot.keyClick(view.composer.input, Qt.Key.Key_Return)
    assert not view.session.generating and view.composer.input.toPlainText() == paste  # kept in the box
    assert studio.store.list() == []  # nothing stored
    assert any("too long" in m or "tokens" in m for m in view.banners.messages())
    view.composer.set_exact_count(paste, 3000)  # the tokenizer's count replaces the estimate
    assert view.composer.draft_label.text().startswith("Draft: 3,000 tokens")
    view.composer.input.setPlainText("A short question")  # the draft fits now: the refusal goes
    assert view.banners.messages() == []
    view.composer.set_exact_count("A short question", 1)  # one token is "1 token", not "1 tokens"
    assert view.composer.draft_label.text() == "Draft: 1 token"
    view.composer.input.setPlainText("Hello")  # estimated before the tokenizer answers
    assert view.composer.draft_label.text() == "Draft: ≈1 token"


def test_a_message_the_engine_finds_too_long_is_taken_back_into_the_box(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel(error=ContextOverflowError("This message is too long for the model's context window."))
    studio = ready(make_studio, qtbot, model)
    view = studio.chat_view
    assert view.session.send_text("short, but the tokenizer disagrees")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert view.composer.input.toPlainText() == "short, but the tokenizer disagrees"
    assert view.session.messages == [] and studio.store.messages(view.session.conversation.id) == []
    assert "(no answer)" not in view.transcript.toPlainText()


def test_code_blocks_wrap_inside_highlight_and_copy_with_feedback(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot, FakeChatModel(pieces=[ANSWER]))
    view = studio.chat_view
    assert view.session.send_text("Write fib")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    transcript = view.transcript
    assert transcript.horizontalScrollBar().maximum() == 0  # the long line wraps inside its box
    doc = transcript.document()
    found = doc.find("def fib")
    assert not found.isNull()
    frame = found.currentFrame()
    assert frame.frameFormat().property(CODE_PROPERTY) == 0  # the first line is inside the code box
    assert QColor(frame.frameFormat().background().color()).name() == LIGHT.code_bg
    keyword = QTextCursor(doc)
    keyword.setPosition(found.selectionStart() + 1)  # inside "def"
    assert keyword.charFormat().foreground().color().name() != QColor(LIGHT.text).name()  # highlighted
    assert keyword.charFormat().fontFamilies()  # monospace
    answer_id = view.session.messages[-1].id
    href = f"npu-action:copy-code/{answer_id}/0"
    assert transcript.link_labels()[href] == "Copy"
    click_link(view, href)
    assert QApplication.clipboard().text() == CODE
    assert transcript.link_labels()[href] == "Copied"
    qtbot.waitUntil(lambda: transcript.link_labels()[href] == "Copy", timeout=5000)


def test_continue_after_the_length_limit_writes_on_in_the_same_answer(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel(pieces=["Once upon", " a time"], stop_reason="length")
    studio = ready(make_studio, qtbot, model)
    view = studio.chat_view
    assert view.session.send_text("Tell a story")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    answer = view.session.messages[-1]
    assert answer.stop_reason == "length" and "stopped at the answer length limit" in view.transcript.toPlainText()
    labels = view.transcript.link_labels()
    assert labels[f"npu-action:continue/{answer.id}"] == "Continue"
    assert list(labels.values()).count("Regenerate") == 1  # one Regenerate, on the last answer
    model.pieces, model.stop_reason = [", the end."], "eos"
    click_link(view, f"npu-action:continue/{answer.id}")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert model.requests[-1][0] == "continue"
    assert [m.text for m in view.session.messages] == ["Tell a story", "Once upon a time, the end."]
    stored = studio.store.messages(view.session.conversation.id)
    assert (
        stored[-1].id == answer.id
        and stored[-1].text == "Once upon a time, the end."
        and stored[-1].stop_reason == "eos"
    )
    assert f"npu-action:continue/{answer.id}" not in view.transcript.link_labels()

    model.pieces, model.stop_reason = [" More."], "length"
    view.session.send_text("Another")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    cut = view.session.messages[-1]
    model.error = ContextOverflowError("The context window is full.", "Start a new chat.")
    click_link(view, f"npu-action:continue/{cut.id}")  # nothing more fits: the answer stays as it was
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    kept = studio.store.messages(view.session.conversation.id)[-1]
    assert (kept.text, kept.stop_reason) == (" More.", "length") and "Failed" not in view.transcript.toPlainText()
    assert view.banners.messages() == ["The context window is full."]


def test_stats_say_decode_and_prefill_rates_and_time_to_first_token() -> None:
    stats = {
        "decode_tokens_per_s": 95.4,
        "prefill_tokens_per_s": 800.2,
        "time_to_first_token_s": 0.21,
        "generated_tokens": 64,
        "stop_reason": "eos",
    }
    assert stats_line(stats) == "decode 95 tok/s · prefill 800 tok/s · TTFT 0.2 s · 64 tokens"


def test_stale_chat_banners_go_with_the_state_that_raised_them(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel()
    studio = ready(make_studio, qtbot, model)
    view = studio.chat_view
    studio.choice_model.set_text("npu")
    studio.choice_model.set_strict(True)
    qtbot.waitUntil(lambda: not view.status.inputs.loading and bool(view.status.info), timeout=TIMEOUT)
    strict = PlacementError("Strict mode: no NPU took the model.", "Turn strict mode off to run on the CPU.")
    view.on_model_failed(strict)  # what the engine says under Strict on a machine with no NPU
    assert view.banners.messages() == [strict.message] and view.header.model_badge.text() == "Chat model not loaded"
    studio.choice_model.set_strict(False)  # Strict off: that error no longer holds, the app loads again
    assert strict.message not in view.banners.messages()
    # Loaded again (or kept, as it runs where it ran): on the CPU, said with or without what was asked.
    qtbot.waitUntil(lambda: bool(view.status.info) and view.header.model_badge.text().endswith("CPU"), timeout=TIMEOUT)
    assert view.banners.messages() == []

    model.error = ContextOverflowError("The conversation no longer fits the context window.", "Start a new chat.")
    view.session.send_text("Hello")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert view.banners.messages() == ["The conversation no longer fits the context window."]
    model.error = None
    view.session.send_text("Hello again")
    qtbot.waitUntil(lambda: not view.session.generating and len(view.session.messages) >= 2, timeout=TIMEOUT)
    assert view.banners.messages() == []  # the next answer succeeded: the error went

    fallback = Placement("NPU", (CPU_EP,), (CPU_EP,), fell_back=True, reason="No usable NPU on this machine.")
    view.on_model_loaded(dict(view.status.info) | {"placement": fallback})
    assert view.banners.messages() == []  # an expected fallback is the chip's to say, not a banner's
    assert "Asked NPU → Ran on CPU" in view.header.model_badge.text()
    assert "No usable NPU" in view.header.model_badge.toolTip()
    view.on_model_loaded(dict(view.status.info) | {"placement": Placement("Automatic", (CPU_EP,), (CPU_EP,))})
    assert view.banners.messages() == []
    view.session.answer_failed(ContextOverflowError("The conversation no longer fits.", "Start a new chat."))
    view.banners.shown()[0].dismiss()  # closed by the user: it stays closed while nothing changes
    studio.choice_model.set_text("cpu")
    assert "The conversation no longer fits." not in view.banners.messages()


def test_the_last_conversation_is_reopened_after_a_restart(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    for text in ("First chat", "Second chat"):
        view.new_conversation()
        assert view.session.send_text(text)
        qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    first = studio.store.list()[-1]
    view.open_conversation(first.id)
    qtbot.waitUntil(lambda: view.session.conversation is not None and view.session.conversation.id == first.id)
    assert studio.shutdown()
    again = make_studio(chat_loader=loader_for(FakeChatModel())).chat_view.session
    qtbot.waitUntil(lambda: again.conversation is not None, timeout=TIMEOUT)  # read off the GUI thread
    assert again.conversation is not None and again.conversation.id == first.id
    assert again.messages[0].text == "First chat"


def test_starter_prompts_in_an_empty_chat_send_with_one_click(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    prompts = view.transcript.starters
    assert len(prompts) >= 3 and prompts[0] in view.transcript.toPlainText()
    click_link(view, "npu-action:starter/0")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert view.session.messages[0].text == prompts[0] and prompts[1] not in view.transcript.toPlainText()
    assert view.composer.input.toPlainText() == ""


def test_long_messages_are_collapsed_until_shown(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    long_text = "\n".join(f"line {i}" for i in range(200))
    assert view.session.send_text(long_text)
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    user = view.session.messages[0]
    assert "line 150" not in view.transcript.toPlainText()
    assert view.transcript.link_labels()[f"npu-action:expand/{user.id}"].startswith("Show all (200 lines")
    click_link(view, f"npu-action:expand/{user.id}")
    assert "line 150" in view.transcript.toPlainText()


def test_dark_theme_restyles_bubbles_and_code_live(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot, FakeChatModel(pieces=[ANSWER]))
    view = studio.chat_view
    assert view.session.send_text("Write fib")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    try:
        apply_theme(QApplication.instance(), "dark")  # type: ignore[arg-type]
        frames = view.transcript._frames
        qtbot.waitUntil(lambda: frames is not view.transcript._frames, timeout=5000)  # re-rendered
        user, answer = view.transcript._frames
        assert user.frameFormat().background().color().name() == DARK.user_bubble
        assert answer.frameFormat().background().color().name() == DARK.surface
        code = view.transcript.document().find("def fib").currentFrame()
        assert code.frameFormat().background().color().name() == DARK.code_bg
        plain = view.transcript.document().find("Done.")
        color = plain.charFormat().foreground().color()
        assert plain.charFormat().foreground().style() == Qt.BrushStyle.NoBrush or color.lightness() > 150
        assert view.transcript.palette().text().color().name() == QColor(DARK.text).name()
    finally:
        apply_theme(QApplication.instance(), "light")  # type: ignore[arg-type]


def test_edit_mode_and_context_are_not_cut_at_1280x720(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    assert view.session.send_text("Hello")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    view.session.begin_edit()
    qtbot.waitUntil(lambda: view.composer.edit_strip.isVisible(), timeout=5000)
    for label in (view.composer.edit_label, view.composer.context_label):
        assert label.isVisible()
        assert label.width() >= label.fontMetrics().horizontalAdvance(label.text()), label.text()
    assert view.transcript.width() >= 700  # the reading column gets the room at 1280 px
    assert not view.panel.isVisible()  # the settings panel starts collapsed


def test_the_chat_model_picker_uses_and_remembers_a_library_model(make_studio: Any, qtbot: Any) -> None:
    from engines.models.library import ModelEntry

    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    entries = [
        ModelEntry(n, n, "genai-llm", Path("/x") / n, True, 1 << 20, "0" * 64, precision="int4", devices=("cpu",))
        for n in (studio.settings.chat_model, "other-llm")
    ] + [ModelEntry("vision", "vision", "image-classifier", Path("/x/vision"), True, 0, "0" * 64)]
    view.set_model_entries(entries)
    assert view.header.model_picker.names() == [studio.settings.chat_model, "other-llm"]  # chat models only
    view.header.model_picker.choose("other-llm")
    assert studio.settings.chat_model == "other-llm"
    qtbot.waitUntil(lambda: view.header.model_badge.text() == "Chat model not loaded", timeout=TIMEOUT)  # not installed
    assert any("other-llm" in m for m in view.banners.messages())


def test_each_answer_says_where_it_ran(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    assert view.session.send_text("Hi")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert "Assistant  ·  fake-model  ·  ✓ CPU" in view.transcript.toPlainText()
    assert view.header.model_badge.text() == "CPU" and view.header.model_badge.kind == "ok"


def test_each_answer_has_the_chips_why_with_the_whole_reason(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    assert view.session.send_text("Hi")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    answer = (view.transcript.entries[-1] if view.transcript.entries else None)
    assert answer is not None and answer.chip[2], "the answer carries the placement's full reason"
    whys = [href for href, label in view.transcript.link_labels().items() if label == "Why?"]
    assert whys == [f"{ACTION_SCHEME}:why/{answer.key}"]
    view.transcript.anchorClicked.emit(QUrl(whys[0]))
    popover = view.transcript.popover
    assert popover is not None and popover.isVisible()
    assert rich_text(answer.chip[2].splitlines()[0]) in popover.label.text()
    popover.close()


def test_ctrl_r_writes_the_last_answer_again_and_ctrl_l_goes_to_the_box(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel()
    studio = ready(make_studio, qtbot, model)
    view = studio.chat_view
    studio.window.activateWindow()
    qtbot.waitUntil(studio.window.isActiveWindow)
    assert view.session.send_text("Hello")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    view.transcript.setFocus()
    qtbot.keyClick(view.transcript, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert view.composer.input.hasFocus()
    qtbot.keyClick(view.composer.input, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not view.session.generating and model.requests[-1][0] == "regenerate", timeout=TIMEOUT)
    assert [m.role for m in view.session.messages] == ["user", "assistant"]


def test_an_answer_that_fell_back_says_asked_and_ran_in_the_chip_words() -> None:
    from ui.chat.text import answer_chip

    kind, line, details = answer_chip(CPU_EP, "CPU", {"fell_back": True, "asked": "NPU", "fallback_reason": "No NPU."})
    assert (kind, line) == ("warn", "Asked NPU → Ran on CPU") and "No NPU." in details
    assert answer_chip(CPU_EP, "CPU", {})[:2] == ("ok", "CPU")


def test_a_narrow_window_folds_the_conversation_list_unless_the_user_chose(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    studio.window.resize(960, 540)
    qtbot.waitUntil(lambda: not view.conversations.isVisible(), timeout=5000)
    studio.window.resize(1280, 720)
    qtbot.waitUntil(view.conversations.isVisible, timeout=5000)
    view.header.list_button.click()  # the user hides it: a resize no longer brings it back
    studio.window.resize(1300, 740)
    qtbot.wait(50)
    assert not view.conversations.isVisible()


def test_a_code_block_is_highlighted_once_its_fence_closes(qtbot: Any) -> None:
    from ui.chat.transcript import Transcript
    from ui.chat.transcript_render import Entry

    transcript = Transcript()
    qtbot.addWidget(transcript)
    transcript.append_entry(Entry(1, "assistant", "", state="streaming"))
    plain = QColor(LIGHT.text).name()

    def def_colour() -> str:
        found = transcript.document().find("def f")
        cursor = QTextCursor(transcript.document())
        cursor.setPosition(found.selectionStart() + 1)
        return cursor.charFormat().foreground().color().name()

    transcript.stream_last(Entry(1, "assistant", "Code:\n\n```python\ndef f():\n    return 1\n", state="streaming"))
    assert def_colour() == plain  # still being written: drawn plain, cheap to redraw
    transcript.stream_last(
        Entry(1, "assistant", "Code:\n\n```python\ndef f():\n    return 1\n```\n\nDone", state="streaming")
    )
    assert def_colour() != plain  # closed: highlighted, once


def test_the_export_dialog_offers_a_name_windows_accepts(
    make_studio: Any, qtbot: Any, monkeypatch: Any, tmp_path: Any
) -> None:
    """A conversation titled CON, or with a 600-byte title, is offered CON_.md or a short name (engines/names.py)."""
    from PySide6.QtWidgets import QFileDialog

    studio = make_studio()
    view = studio.chat_view
    view.last_export_dir = str(tmp_path)
    offered: list[str] = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *args: (offered.append(args[2]), ("", ""))[1])
    for title in ("CON", "é" * 300):
        conversation = studio.store.create(title)
        studio.store.add_message(conversation.id, "user", "hi")
        studio.conversations.refresh()
        qtbot.waitUntil(lambda: view.conversations.list.count() == len(studio.store.list()))
        view.export_dialog(conversation.id, "markdown")
    names = [Path(p).name for p in offered]
    assert names[0] == "CON_.md" and all(Path(p).parent == tmp_path for p in offered)
    assert names[1].endswith(".md") and len(names[1].encode()) <= 120


def test_the_window_says_when_its_answer_waits_for_another_request_on_the_same_model(
    make_studio: Any, qtbot: Any
) -> None:
    import threading

    from engines.chat.requests import ChatRequest, Text
    from engines.chat.types import ChatOptions

    model = FakeChatModel(pieces=["other "] * 60, delay=0.02)
    studio = ready(make_studio, qtbot, model)
    view, service = studio.chat_view, studio.chat.service
    assert service is not None
    outside: list[object] = []  # another door (a server's client) answered on the same loaded model
    runner = threading.Thread(target=lambda: outside.append(
        service.generate(ChatRequest.send([], "from outside", options=ChatOptions()), lambda e: None)))
    runner.start()
    qtbot.waitUntil(lambda: model.answered == 1, timeout=TIMEOUT)
    with qtbot.waitSignal(studio.chat.generation_waiting, timeout=TIMEOUT) as waited:
        assert view.session.send_text("Mine, please")
    assert waited.args == [1]
    assert "Waiting for another request to finish" in view.transcript.toPlainText()
    assert "Waiting for another request" in studio.window.status_label.text()
    model.pieces, model.delay = ["My answer."], 0.0
    runner.join(30)
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert outside and view.session.messages[-1].text == "My answer."
    assert "Waiting for another request" not in view.transcript.toPlainText()
    assert not any(isinstance(e, Text) for e in outside)
