"""The chat as a user meets it: keys, long drafts, code blocks, continue, stats, stale banners, reopening,
starter prompts and a live dark theme (the real app with a scripted chat engine)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor, QTextCursor
from PySide6.QtWidgets import QApplication

from app.qtcompat import emit
from engines.errors import ContextOverflowError, PlacementError
from engines.text import rich_text
from engines.types import CPU_EP, Placement
from tests.ui.fakes import FakeChatModel, loader_for
from ui.chat_text import stats_line
from ui.code_blocks import CODE_PROPERTY
from ui.theme import DARK, LIGHT, apply_theme
from ui.transcript import ACTION_SCHEME

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
    qtbot.waitUntil(lambda: bool(view.model_info), timeout=TIMEOUT)
    return studio


def click_link(view: Any, href: str) -> None:
    assert href in view.transcript.link_labels(), f"no link {href}: {view.transcript.link_labels()}"
    emit(view.transcript.anchorClicked, QUrl(href))


def test_enter_sends_shift_enter_adds_a_line_and_the_setting_swaps_them(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    view.input.setFocus()
    qtbot.keyClicks(view.input, "first line")
    qtbot.keyClick(view.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(view.input, "second line")
    assert view.input.toPlainText() == "first line\nsecond line" and not view.generating
    qtbot.keyClick(view.input, Qt.Key.Key_Return)
    assert view.input.toPlainText() == ""
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    assert view.messages[0].text == "first line\nsecond line"

    view.panel.enter_sends.setChecked(False)  # swapped: Enter is a new line, Ctrl+Enter sends
    assert studio.settings.chat_enter_sends is False
    qtbot.keyClicks(view.input, "a")
    qtbot.keyClick(view.input, Qt.Key.Key_Return)
    assert view.input.toPlainText() == "a\n" and len(view.messages) == 2
    qtbot.keyClick(view.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(view.messages) == 4 and not view.generating, timeout=TIMEOUT)


def test_an_overlong_draft_is_counted_refused_and_kept(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    paste = "lorem ipsum dolor " * 2800  # 50,400 characters
    view.input.setPlainText(paste)
    assert view.composer.draft_label.text() == "Draft: ≈12,600 tokens · too long for the context"
    qtbot.keyClick(view.input, Qt.Key.Key_Return)
    assert not view.generating and view.input.toPlainText() == paste  # kept in the box
    assert studio.store.list() == []  # nothing stored
    assert any("too long" in m or "tokens" in m for m in view.banners.messages())
    view.composer.set_exact_count(paste, 3000)  # the tokenizer's count replaces the estimate
    assert view.composer.draft_label.text().startswith("Draft: 3,000 tokens")
    view.input.setPlainText("A short question")  # the draft fits now: the refusal goes
    assert view.banners.messages() == []


def test_a_message_the_engine_finds_too_long_is_taken_back_into_the_box(make_studio: Any, qtbot: Any) -> None:
    model = FakeChatModel(error=ContextOverflowError("This message is too long for the model's context window."))
    studio = ready(make_studio, qtbot, model)
    view = studio.chat_view
    assert view.send_text("short, but the tokenizer disagrees")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    assert view.input.toPlainText() == "short, but the tokenizer disagrees"
    assert view.messages == [] and studio.store.messages(view.conversation.id) == []
    assert "(no answer)" not in view.transcript.plain_text()


def test_code_blocks_wrap_inside_highlight_and_copy_with_feedback(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot, FakeChatModel(pieces=[ANSWER]))
    view = studio.chat_view
    assert view.send_text("Write fib")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
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
    answer_id = view.messages[-1].id
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
    assert view.send_text("Tell a story")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    answer = view.messages[-1]
    assert answer.stop_reason == "length" and "stopped at the answer length limit" in view.transcript.plain_text()
    labels = view.transcript.link_labels()
    assert labels[f"npu-action:continue/{answer.id}"] == "Continue"
    assert list(labels.values()).count("Regenerate") == 1  # one Regenerate, on the last answer
    model.pieces, model.stop_reason = [", the end."], "eos"
    click_link(view, f"npu-action:continue/{answer.id}")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    assert model.requests[-1][0] == "continue"
    assert [m.text for m in view.messages] == ["Tell a story", "Once upon a time, the end."]
    stored = studio.store.messages(view.conversation.id)
    assert (
        stored[-1].id == answer.id
        and stored[-1].text == "Once upon a time, the end."
        and stored[-1].stop_reason == "eos"
    )
    assert f"npu-action:continue/{answer.id}" not in view.transcript.link_labels()

    model.pieces, model.stop_reason = [" More."], "length"
    view.send_text("Another")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    cut = view.messages[-1]
    model.error = ContextOverflowError("The context window is full.", "Start a new chat.")
    click_link(view, f"npu-action:continue/{cut.id}")  # nothing more fits: the answer stays as it was
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    kept = studio.store.messages(view.conversation.id)[-1]
    assert (kept.text, kept.stop_reason) == (" More.", "length") and "Failed" not in view.transcript.plain_text()
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
    qtbot.waitUntil(lambda: not view.inputs.loading and bool(view.model_info), timeout=TIMEOUT)
    strict = PlacementError("Strict mode: no NPU took the model.", "Turn strict mode off to run on the CPU.")
    view.on_model_failed(strict)  # what the engine says under Strict on a machine with no NPU
    assert view.banners.messages() == [strict.message] and view.model_badge.text() == "Chat model not loaded"
    studio.choice_model.set_strict(False)  # Strict off: that error no longer holds, the app loads again
    assert strict.message not in view.banners.messages()
    qtbot.waitUntil(lambda: view.model_badge.text() == "CPU", timeout=TIMEOUT)  # loaded again
    assert view.banners.messages() == []

    model.error = ContextOverflowError("The conversation no longer fits the context window.", "Start a new chat.")
    view.send_text("Hello")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    assert view.banners.messages() == ["The conversation no longer fits the context window."]
    model.error = None
    view.send_text("Hello again")
    qtbot.waitUntil(lambda: not view.generating and len(view.messages) >= 2, timeout=TIMEOUT)
    assert view.banners.messages() == []  # the next answer succeeded: the error went

    fallback = Placement("NPU", (CPU_EP,), (CPU_EP,), fell_back=True, reason="No usable NPU on this machine.")
    view.on_model_loaded(dict(view.model_info) | {"placement": fallback})
    assert len(view.banners.messages()) == 1 and "No usable NPU" in view.banners.messages()[0]
    assert "Asked NPU → Ran on CPU" in view.model_badge.text()
    view.on_model_loaded(dict(view.model_info) | {"placement": Placement("Automatic", (CPU_EP,), (CPU_EP,))})
    assert view.banners.messages() == []  # no stacked, contradictory banners
    view.on_failed(ContextOverflowError("The conversation no longer fits.", "Start a new chat."))
    view.banners._banners[0].dismiss()  # closed by the user: it stays closed while nothing changes
    studio.choice_model.set_text("cpu")
    assert "The conversation no longer fits." not in view.banners.messages()


def test_the_last_conversation_is_reopened_after_a_restart(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    for text in ("First chat", "Second chat"):
        view.new_conversation()
        assert view.send_text(text)
        qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    first = studio.store.list()[-1]
    view.open_conversation(first.id)
    assert studio.shutdown()
    again = make_studio(chat_loader=loader_for(FakeChatModel()))
    assert again.chat_view.conversation is not None and again.chat_view.conversation.id == first.id
    assert again.chat_view.messages[0].text == "First chat"


def test_starter_prompts_in_an_empty_chat_send_with_one_click(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    prompts = view.transcript.starters
    assert len(prompts) >= 3 and prompts[0] in view.transcript.plain_text()
    click_link(view, "npu-action:starter/0")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    assert view.messages[0].text == prompts[0] and prompts[1] not in view.transcript.plain_text()
    assert view.input.toPlainText() == ""


def test_long_messages_are_collapsed_until_shown(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    long_text = "\n".join(f"line {i}" for i in range(200))
    assert view.send_text(long_text)
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    user = view.messages[0]
    assert "line 150" not in view.transcript.plain_text()
    assert view.transcript.link_labels()[f"npu-action:expand/{user.id}"].startswith("Show all (200 lines")
    click_link(view, f"npu-action:expand/{user.id}")
    assert "line 150" in view.transcript.plain_text()


def test_dark_theme_restyles_bubbles_and_code_live(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot, FakeChatModel(pieces=[ANSWER]))
    view = studio.chat_view
    assert view.send_text("Write fib")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
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
    assert view.send_text("Hello")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    view.begin_edit()
    qtbot.waitUntil(lambda: view.composer.edit_strip.isVisible(), timeout=5000)
    for label in (view.edit_label, view.context_label):
        assert label.isVisible()
        assert label.width() >= label.fontMetrics().horizontalAdvance(label.text()), label.text()
    assert view.transcript.width() >= 700  # the reading column gets the room at 1280 px
    assert not view.panel.isVisible()  # the settings panel starts collapsed


def test_the_chat_model_picker_uses_and_remembers_a_library_model(make_studio: Any, qtbot: Any) -> None:
    from types import SimpleNamespace

    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    entries = [
        SimpleNamespace(
            kind="genai-llm", name=n, display_name=n, precision="int4", devices=("cpu",), size_bytes=1 << 20
        )
        for n in (studio.settings.chat_model, "other-llm")
    ] + [SimpleNamespace(kind="image-classifier", name="vision", display_name="vision", size_bytes=0)]
    view.set_model_entries(entries)
    assert view.model_picker.names() == [studio.settings.chat_model, "other-llm"]  # chat models only
    view.model_picker.choose("other-llm")
    assert studio.settings.chat_model == "other-llm"
    qtbot.waitUntil(lambda: view.model_badge.text() == "Chat model not loaded", timeout=TIMEOUT)  # not installed
    assert any("other-llm" in m for m in view.banners.messages())


def test_each_answer_says_where_it_ran(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    assert view.send_text("Hi")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    assert "Assistant  ·  fake-model  ·  ✓ CPU" in view.transcript.plain_text()
    assert view.model_badge.text() == "CPU" and view.model_badge.kind == "ok"


def test_each_answer_has_the_chips_why_with_the_whole_reason(make_studio: Any, qtbot: Any) -> None:
    studio = ready(make_studio, qtbot)
    view = studio.chat_view
    assert view.send_text("Hi")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    answer = view.transcript.last()
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
    assert view.send_text("Hello")
    qtbot.waitUntil(lambda: not view.generating, timeout=TIMEOUT)
    view.transcript.setFocus()
    qtbot.keyClick(view.transcript, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert view.input.hasFocus()
    qtbot.keyClick(view.input, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not view.generating and model.requests[-1][0] == "regenerate", timeout=TIMEOUT)
    assert [m.role for m in view.messages] == ["user", "assistant"]


def test_an_answer_that_fell_back_says_asked_and_ran_in_the_chip_words() -> None:
    from ui.chat_text import answer_chip

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
    view.list_button.click()  # the user hides it: a resize no longer brings it back
    studio.window.resize(1300, 740)
    qtbot.wait(50)
    assert not view.conversations.isVisible()


def test_a_code_block_is_highlighted_once_its_fence_closes(qtbot: Any) -> None:
    from ui.transcript import Entry, Transcript

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
