"""Chat: stored conversations, streamed Markdown answers, stop / regenerate / edit / copy, a system
prompt and generation settings, stats under each answer and a context-usage indicator.

The view owns the conversation store (what is shown is what is saved); generation requests go out
as `generate_requested` and the chat host's signals come back to the `on_*` slots. An answer is stored
as soon as it starts (empty) and updated when it ends, so closing mid-answer keeps the partial text,
marked as stopped.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.qtcompat import emit
from app.storage import DEFAULT_TITLE, Conversation, ConversationStore, Message
from engines.errors import StudioError
from engines.types import Placement, short_ep_name
from ui.conversation_list import ConversationList
from ui.device_picker import DeviceChoiceModel, DevicePicker
from ui.generation_panel import GenerationPanel
from ui.icons import icon
from ui.theme import colors
from ui.transcript import Entry, Transcript
from ui.widgets import MARGIN, SPACING, BannerArea, Spinner, ViewHeader, muted_label, set_badge

log = logging.getLogger(__name__)

TITLE_CHARS = 48
MIN_RENDER_INTERVAL_MS = 16  # streamed text is drawn at most ~60 times a second


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def stats_line(stats: dict[str, Any]) -> str:
    """ "first token 120 ms · 85.2 tok/s · 64 tokens · CPU" (+ why it stopped, when that matters)."""
    parts: list[str] = []
    ttft = stats.get("time_to_first_token_s")
    if isinstance(ttft, int | float) and ttft > 0:
        parts.append(f"first token {ttft * 1000:.0f} ms")
    rate = stats.get("decode_tokens_per_s")
    if isinstance(rate, int | float) and rate > 0:
        parts.append(f"{rate:.1f} tok/s")
    generated = stats.get("generated_tokens")
    if isinstance(generated, int):
        parts.append(f"{generated} tokens")
    ep = stats.get("ep")
    if isinstance(ep, str) and ep:
        where = short_ep_name(ep)
        device = stats.get("device")
        if isinstance(device, str) and device and device.lower() != where.lower():
            where += f" ({device})"
        parts.append(where)
    reason = stats.get("stop_reason")
    if reason == "length":
        parts.append("reached the answer length limit")
    elif reason == "context":
        parts.append("context window full")
    dropped = stats.get("dropped_turns")
    if isinstance(dropped, int) and dropped:
        parts.append(f"{dropped} oldest turn(s) left the context")
    if stats.get("fell_back"):
        parts.append(f"fell back: {stats.get('fallback_reason', '')}")
    return " · ".join(parts)


class ChatView(QWidget):
    # kind (send | regenerate | edit), conversation id, text, history [(role, text)], system prompt, options
    generate_requested = Signal(str, int, str, object, str, object)
    stop_requested = Signal()
    forget_requested = Signal(int)  # a conversation was deleted: the engine may drop its state
    settings_changed = Signal(str, object)  # default system prompt, option overrides

    def __init__(
        self,
        store: ConversationStore,
        choice_model: DeviceChoiceModel,
        system_prompt: str = "",
        options: dict[str, Any] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.conversation: Conversation | None = None
        self.messages: list[Message] = []
        # Answers the store refused (a read-only or full disk): kept on screen, stored when it works again.
        self._unsaved: list[Message] = []
        self.generating = False
        self.answer_id: int | None = None
        self.answer_text = ""
        self.edit_target: int | None = None
        self.model_info: dict[str, Any] = {}
        self.last_export_dir = ""
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.timeout.connect(self._render_stream)
        self._render_interval_ms = MIN_RENDER_INTERVAL_MS
        self._build(choice_model)
        self.panel.set_prompt(system_prompt)
        self.panel.set_options(options or {})
        self.refresh_list()
        self._update_actions()

    # --- layout -----------------------------------------------------------------------------------
    def _build(self, choice_model: DeviceChoiceModel) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader("Chat", "A small language model, running on this machine. Nothing leaves it.")
        self.model_spinner = Spinner()
        self.header.controls.addWidget(self.model_spinner)
        self.model_badge = QLabel()
        set_badge(self.model_badge, "neutral", "Chat model not loaded")
        self.header.controls.addWidget(self.model_badge)
        self.picker = DevicePicker(choice_model, compact=True)
        self.header.controls.addWidget(self.picker)
        self.settings_button = QToolButton()
        self.settings_button.setIcon(icon("sliders"))
        self.settings_button.setToolTip("System prompt and generation settings")
        self.settings_button.setCheckable(True)
        self.settings_button.setChecked(True)
        self.header.controls.addWidget(self.settings_button)
        self.export_button = QToolButton()
        self.export_button.setIcon(icon("export"))
        self.export_button.setToolTip("Export this conversation")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction("Export as Markdown…", lambda: self._export_current("markdown"))
        menu.addAction("Export as JSON…", lambda: self._export_current("json"))
        self.export_button.setMenu(menu)
        self.header.controls.addWidget(self.export_button)
        outer.addWidget(self.header)
        self.banners = BannerArea()
        outer.addWidget(self.banners)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        self.conversations = ConversationList()
        self.conversations.selected.connect(self.open_conversation)
        self.conversations.new_requested.connect(self.new_conversation)
        self.conversations.search_changed.connect(lambda _t: self.refresh_list())
        self.conversations.rename_requested.connect(self.rename_conversation)
        self.conversations.delete_requested.connect(lambda i: self.delete_conversation(i, confirm=True))
        self.conversations.export_requested.connect(self.export_dialog)
        splitter.addWidget(self.conversations)

        center = QWidget()
        column = QVBoxLayout(center)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(8)
        self.title = QLabel(DEFAULT_TITLE)
        self.title.setObjectName("SectionTitle")
        column.addWidget(self.title)
        self.transcript = Transcript()
        self.transcript.action_triggered.connect(self._on_action)
        column.addWidget(self.transcript, 1)

        info_row = QHBoxLayout()
        info_row.setSpacing(8)
        self.context_label = muted_label("Context: —", word_wrap=False)
        info_row.addWidget(self.context_label)
        self.context_bar = QProgressBar()
        self.context_bar.setTextVisible(False)
        self.context_bar.setFixedWidth(140)
        self.context_bar.setFixedHeight(8)
        self.context_bar.setRange(0, 1)
        self.context_bar.setValue(0)
        info_row.addWidget(self.context_bar)
        info_row.addStretch(1)
        self.edit_label = muted_label("", word_wrap=False)
        info_row.addWidget(self.edit_label)
        self.regenerate_button = QPushButton(icon("regenerate"), "Regenerate")
        self.regenerate_button.clicked.connect(self.regenerate)
        info_row.addWidget(self.regenerate_button)
        self.stop_button = QPushButton(icon("stop"), "Stop")
        self.stop_button.setToolTip("Stop the answer (Esc)")
        self.stop_button.clicked.connect(self.stop)
        info_row.addWidget(self.stop_button)
        column.addLayout(info_row)

        composer = QHBoxLayout()
        composer.setSpacing(8)
        self.input = QPlainTextEdit()
        self.input.setPlaceholderText("Message the model…  (Ctrl+Enter to send)")
        self.input.setFixedHeight(76)
        composer.addWidget(self.input, 1)
        self.send_button = QPushButton(icon("send", colors().accent_text), "Send")
        self.send_button.setObjectName("Primary")
        self.send_button.setToolTip("Send (Ctrl+Enter)")
        self.send_button.setMinimumHeight(40)
        self.send_button.clicked.connect(self._send_clicked)
        composer.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        column.addLayout(composer)
        splitter.addWidget(center)

        self.panel = GenerationPanel()
        self.panel.changed.connect(self._settings_edited)
        self.settings_button.toggled.connect(self.panel.setVisible)
        splitter.addWidget(self.panel)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setStretchFactor(2, 0)
        splitter.setSizes([240, 700, 280])
        outer.addWidget(splitter, 1)

        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(keys), self.input)
            shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
            shortcut.activated.connect(self._send_clicked)
        # Esc (stop, or leave edit mode) is a window-wide action: see escape().

    # --- conversations ----------------------------------------------------------------------------
    def refresh_list(self) -> None:
        try:
            items = self.store.list(self.conversations.search.text())
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        self.conversations.set_conversations(items, self.conversation.id if self.conversation else None)

    def new_conversation(self) -> None:
        """Ctrl+N: an empty chat (stored when the first message is sent)."""
        if self.generating:
            self.banners.show_message("An answer is still coming.", "Stop it (Esc) before starting a new chat.")
            return
        self.conversation = None
        self.messages = []
        self.cancel_edit()
        self.transcript.set_entries([])
        self.title.setText(DEFAULT_TITLE)
        self.conversations.list.clearSelection()
        self.conversations.list.setCurrentRow(-1)
        self._show_context(None)
        self._update_actions()
        self.input.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if self.conversation is not None and self.conversation.id == conversation_id:
            return
        if self.generating:
            self.banners.show_message("An answer is still coming.", "Stop it (Esc) before switching conversations.")
            self.refresh_list()
            return
        try:
            self.conversation = self.store.get(conversation_id)
            self.messages = self.store.messages(conversation_id)
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        self.cancel_edit()
        self.title.setText(self.conversation.title)
        if self.conversation.system_prompt:
            self.panel.set_prompt(self.conversation.system_prompt)
        self._render_all()
        last_stats = next((m.stats for m in reversed(self.messages) if m.role == "assistant" and m.stats), None)
        self._show_context(last_stats)
        self._update_actions()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        title = title.strip()
        if not title:
            self.refresh_list()
            return
        try:
            self.store.rename(conversation_id, title)
            if self.conversation is not None and self.conversation.id == conversation_id:
                self.conversation = self.store.get(conversation_id)
                self.title.setText(self.conversation.title)
        except StudioError as exc:
            self.banners.show_error(exc)
        self.refresh_list()

    def delete_conversation(self, conversation_id: int, confirm: bool = True) -> None:
        if self.generating and self.conversation is not None and self.conversation.id == conversation_id:
            self.banners.show_message("This conversation is still answering.", "Stop the answer (Esc) first.")
            return
        if confirm:
            answer = QMessageBox.question(
                self, "Delete conversation", "Delete this conversation? This cannot be undone."
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        try:
            self.store.delete(conversation_id)
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        emit(self.forget_requested, conversation_id)
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.conversation = None
            self.new_conversation()
        self.refresh_list()

    # --- export -----------------------------------------------------------------------------------
    def _export_current(self, fmt: str) -> None:
        if self.conversation is None:
            self.banners.show_message("Nothing to export yet.", "Send a message first.")
            return
        self.export_dialog(self.conversation.id, fmt)

    def export_dialog(self, conversation_id: int, fmt: str) -> None:
        suffix = ".md" if fmt == "markdown" else ".json"
        try:
            title = self.store.get(conversation_id).title
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        safe = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in title).strip() or "conversation"
        start = str(Path(self.last_export_dir or Path.home()) / f"{safe}{suffix}")
        path, _ = QFileDialog.getSaveFileName(
            self, "Export conversation", start, "Markdown (*.md)" if fmt == "markdown" else "JSON (*.json)"
        )
        if path:
            self.last_export_dir = str(Path(path).parent)
            self.export_to(conversation_id, fmt, path)

    def export_to(self, conversation_id: int, fmt: str, path: str | Path) -> bool:
        try:
            text = (
                self.store.export_markdown(conversation_id)
                if fmt == "markdown"
                else self.store.export_json(conversation_id)
            )
            Path(path).write_text(text, encoding="utf-8")
        except StudioError as exc:
            self.banners.show_error(exc)
            return False
        except OSError as exc:
            self.banners.show_message(f"Could not write {path}.", exc.strerror or str(exc), "error")
            return False
        return True

    # --- sending ----------------------------------------------------------------------------------
    def _send_clicked(self) -> None:
        text = self.input.toPlainText()
        if self.send_text(text):
            self.input.clear()

    def send_text(self, text: str) -> bool:
        """Send `text` (or the edited last message). True when a request went out."""
        text = text.strip()
        if not text:
            return False
        if self.generating:
            self.banners.show_message("An answer is still coming.", "Wait for it, or stop it with Esc.")
            return False
        self.panel.flush()
        if self.edit_target is not None:
            return self._send_edit(text)
        try:
            if self.conversation is None:
                self.conversation = self.store.create(
                    title_from(text), model=self.model_info.get("name", ""), system_prompt=self.panel.prompt()
                )
            elif self.conversation.title == DEFAULT_TITLE and not self.messages:
                self.store.rename(self.conversation.id, title_from(text))
                self.conversation = self.store.get(self.conversation.id)
            self._store_unsaved()
            history = self._history()
            user = self.store.add_message(self.conversation.id, "user", text)
        except StudioError as exc:
            self.banners.show_error(exc)
            return False
        self.messages.append(user)
        self.title.setText(self.conversation.title)
        self._start("send", text, history)
        self.refresh_list()
        return True

    def regenerate(self) -> None:
        """Answer the last message again (also a message left without an answer by a failure)."""
        user = self._last_user()
        if self.generating or self.conversation is None or user is None:
            return
        history = self._history()
        try:
            self.store.delete_messages_after(self.conversation.id, user.id)
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        self.messages = [m for m in self.messages if m.id <= user.id]
        self._start("regenerate", "", history)

    def begin_edit(self) -> None:
        user = self._last_user()
        if self.generating or user is None:
            return
        self.edit_target = user.id
        self.input.setPlainText(user.text)
        self.input.setFocus()
        self.edit_label.setText("Editing your last message · Esc to cancel")
        self.send_button.setText("Resend")

    def cancel_edit(self) -> None:
        if self.edit_target is not None:
            self.input.clear()
        self.edit_target = None
        self.edit_label.setText("")
        self.send_button.setText("Send")

    def _send_edit(self, text: str) -> bool:
        user = self._last_user()
        if self.conversation is None or user is None or user.id != self.edit_target:
            self.cancel_edit()
            return False
        history = self._history()
        before = [m for m in self.messages if m.id < user.id]
        try:
            self.store.delete_messages_after(self.conversation.id, before[-1].id if before else 0)
            new_user = self.store.add_message(self.conversation.id, "user", text)
        except StudioError as exc:
            self.banners.show_error(exc)
            return False
        self.messages = [*before, new_user]
        self.edit_target = None
        self.edit_label.setText("")
        self.send_button.setText("Send")
        self._start("edit", text, history)
        return True

    def stop(self) -> None:
        if self.generating:
            self.stop_button.setEnabled(False)
            self.stop_button.setText("Stopping…")
            emit(self.stop_requested)

    def escape(self) -> None:
        if self.generating:
            self.stop()
        elif self.edit_target is not None:
            self.cancel_edit()

    def copy_message(self, message_id: int) -> None:
        message = next((m for m in self.messages if m.id == message_id), None)
        if message is not None:
            QApplication.clipboard().setText(message.text)

    def _store_answer(self) -> None:
        """Store the answer being written (empty until it ends, so that a close keeps what came)."""
        if self.conversation is None or self.answer_id is not None:
            return
        info = self.model_info
        try:
            answer = self.store.add_message(
                self.conversation.id,
                "assistant",
                self.answer_text,
                model=str(info.get("name", "")),
                device=str(info.get("device", "")),
                ep=str(info.get("ep", "")),
            )
        except StudioError as exc:
            log.warning("could not store the answer: %s", exc)
            self.banners.show_error(exc)
            return
        self.answer_id = answer.id
        self.messages.append(answer)

    def _history(self) -> list[tuple[str, str]]:
        """The turns the engine should hold before this request."""
        return [(m.role, m.text) for m in self.messages if m.role in ("user", "assistant")]

    def _last_user(self) -> Message | None:
        return next((m for m in reversed(self.messages) if m.role == "user"), None)

    def _start(self, kind: str, text: str, history: list[tuple[str, str]]) -> None:
        assert self.conversation is not None
        self.generating = True
        self.answer_id = None  # stored when the engine starts answering (the model is known by then)
        self.answer_text = ""
        self._render_all()
        self.refresh_list()
        self._update_actions()
        emit(
            self.generate_requested,
            kind,
            self.conversation.id,
            text,
            history,
            self.panel.prompt(),
            self.panel.options(),
        )

    # --- slots wired to the chat host -------------------------------------------------------------
    def show_model_loading(self, text: str) -> None:
        self.model_spinner.start()
        set_badge(self.model_badge, "neutral", "Loading chat model…")
        self.model_badge.setToolTip(text)

    def on_model_loaded(self, info: dict[str, Any]) -> None:
        self.model_info = dict(info)
        self.model_spinner.stop()
        placement = info.get("placement")
        fell_back = isinstance(placement, Placement) and placement.fell_back
        where = short_ep_name(str(info.get("ep", ""))) or "?"
        set_badge(self.model_badge, "warn" if fell_back else "ok", f"{info.get('name', 'model')} · {where}")
        self.model_badge.setToolTip(str(info.get("description", "")))
        if fell_back and isinstance(placement, Placement):
            self.banners.show_message(
                f"The chat model runs on {where}: {placement.reason}", "Pick another device to try again.", "warning"
            )
        if info.get("memory_notice"):
            self.banners.show_message(
                f"Memory: {info['memory_notice']}", "Close other apps, or use a shorter context.", "warning"
            )
        defaults = info.get("default_options")
        if isinstance(defaults, dict):
            self.panel.set_defaults(defaults)
        if not self.generating and not self.messages:
            self._show_context(None)

    def on_model_failed(self, error: object) -> None:
        self.model_spinner.stop()
        self.model_info = {}
        set_badge(self.model_badge, "error", "Chat model not loaded")
        self.banners.show_error(error)

    def on_generation_started(self, conversation_id: int) -> None:
        if self.generating and self.conversation is not None and conversation_id == self.conversation.id:
            self._store_answer()

    def on_text(self, piece: str) -> None:
        if not self.generating:
            return
        self.answer_text += piece
        if not self._render_timer.isActive():
            self._render_timer.start(self._render_interval_ms)

    def _render_stream(self) -> None:
        """Draw the streamed text; the next draw waits at least 3x as long as this one took, so that
        the UI thread spends at most a quarter of its time on a fast stream."""
        if not self.generating:
            return
        started = time.perf_counter()
        self.transcript.stream_last(self._entry_for_answer("streaming", ""))
        took_ms = (time.perf_counter() - started) * 1000
        self._render_interval_ms = max(MIN_RENDER_INTERVAL_MS, round(3 * took_ms))

    def on_finished(self, stats: dict[str, Any]) -> None:
        self._end(stats, "")

    def on_cancelled(self, stats: dict[str, Any]) -> None:
        self._end(stats, "stopped")

    def on_failed(self, error: object) -> None:
        """A failure while answering (or a request that could not start)."""
        if self.generating:
            if self.answer_id is not None:
                self._save_answer(self.answer_text, "error", None)
            elif self.answer_text:
                self._keep_unsaved(self.answer_text, "error", {})
            self.generating = False
            self._reload_messages()
            self._render_all()
            self._update_actions()
        self.banners.show_error(error)

    def shutdown(self) -> None:
        """Closing the window: keep the partial answer, marked as stopped."""
        self.panel.flush()
        if self.generating:
            if self.answer_id is None and self.answer_text:
                self._store_answer()
            self._save_answer(self.answer_text, "cancelled", None)
            self.generating = False

    # --- internals --------------------------------------------------------------------------------
    def _end(self, stats: dict[str, Any], state: str) -> None:
        if not self.generating:
            return
        self._render_timer.stop()
        self._render_interval_ms = MIN_RENDER_INTERVAL_MS
        text = str(stats.get("text", self.answer_text))
        self.answer_text = text
        data = {k: v for k, v in stats.items() if k != "text"}
        stop_reason = str(stats.get("stop_reason", "cancelled" if state else "eos"))
        self._store_answer()
        if self.answer_id is None:
            self._keep_unsaved(text, stop_reason, data)
        self._save_answer(text, stop_reason, data)
        self.generating = False
        self._reload_messages()
        self._render_all()
        self._show_context(data)
        self._update_actions()
        self.refresh_list()

    def _save_answer(self, text: str, stop_reason: str, stats: dict[str, Any] | None) -> None:
        if self.answer_id is None:
            return
        try:
            self.store.update_message(
                self.answer_id,
                text=text,
                stop_reason=stop_reason,
                stats=stats,
                device=str(stats.get("device") or short_ep_name(str(stats.get("ep", "")))) if stats else None,
                ep=str(stats.get("ep", "")) if stats else None,
            )
        except StudioError as exc:
            log.warning("could not save the answer: %s", exc)
            self.banners.show_error(exc)

    def _reload_messages(self) -> None:
        if self.conversation is None:
            return
        self._store_unsaved()
        try:
            self.messages = self.store.messages(self.conversation.id)
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        self.messages += [m for m in self._unsaved if m.conversation_id == self.conversation.id]

    def _keep_unsaved(self, text: str, stop_reason: str, stats: dict[str, Any]) -> None:
        """The store refused the answer: keep it in memory (and on screen) rather than lose it."""
        if self.conversation is None or not text:
            return
        info = self.model_info
        self._unsaved.append(
            Message(
                -1,
                self.conversation.id,
                "assistant",
                text,
                time.time(),
                model=str(info.get("name", "")),
                device=str(stats.get("device") or info.get("device", "")),
                ep=str(stats.get("ep") or info.get("ep", "")),
                stop_reason=stop_reason,
                stats=stats,
            )
        )

    def _store_unsaved(self) -> None:
        """Store answers kept in memory while the disk refused them (before anything newer is stored)."""
        still: list[Message] = []
        for m in self._unsaved:
            try:
                self.store.add_message(
                    m.conversation_id,
                    "assistant",
                    m.text,
                    model=m.model,
                    device=m.device,
                    ep=m.ep,
                    stop_reason=m.stop_reason,
                    stats=m.stats,
                )
            except StudioError:
                still.append(m)
        self._unsaved = still

    def _entry(self, message: Message, index: int) -> Entry:
        last_user = self._last_user()
        if message.role == "user":
            actions = ("copy", "edit") if last_user is not None and message.id == last_user.id else ("copy",)
            return Entry(message.id, "user", message.text, actions=actions)
        is_last = index == len(self.messages) - 1
        state = {"cancelled": "stopped", "error": "error"}.get(message.stop_reason, "")
        meta_parts = [message.model] if message.model else []
        if message.ep:
            meta_parts.append(short_ep_name(message.ep))
        actions = ("copy", "regenerate") if is_last else ("copy",)
        return Entry(
            message.id,
            "assistant",
            message.text,
            meta=" · ".join(meta_parts),
            footer=stats_line(message.stats) if message.stats else "",
            state=state,
            actions=actions,
        )

    def _entry_for_answer(self, state: str, footer: str) -> Entry:
        info = self.model_info
        meta = " · ".join(p for p in (str(info.get("name", "")), short_ep_name(str(info.get("ep", "")))) if p)
        return Entry(self.answer_id or -1, "assistant", self.answer_text, meta=meta, footer=footer, state=state)

    def _render_all(self) -> None:
        entries = [self._entry(m, i) for i, m in enumerate(self.messages) if m.role in ("user", "assistant")]
        if self.generating:
            if entries and self.answer_id is not None and entries[-1].key == self.answer_id:
                entries.pop()
            entries.append(self._entry_for_answer("streaming", ""))
        self.transcript.set_entries(entries)

    def _show_context(self, stats: dict[str, Any] | None) -> None:
        used = int(stats.get("context_used", 0)) if stats else 0
        length = int(stats.get("context_length", 0)) if stats else 0
        if not length:
            length = int(self.model_info.get("context_length", 0) or 0)
        if not length:
            self.context_label.setText("Context: —")
            self.context_bar.setRange(0, 1)
            self.context_bar.setValue(0)
            return
        self.context_bar.setRange(0, length)
        self.context_bar.setValue(min(used, length))
        self.context_label.setText(f"Context: {used:,} / {length:,} tokens")
        self.context_bar.setToolTip(f"{used / length:.0%} of the model's context window is used")

    def _update_actions(self) -> None:
        busy = self.generating
        self.send_button.setEnabled(not busy)
        self.stop_button.setVisible(busy)
        self.stop_button.setEnabled(busy)
        self.stop_button.setText("Stop")
        can_regenerate = self._last_user() is not None
        self.regenerate_button.setVisible(not busy and can_regenerate)
        self.export_button.setEnabled(self.conversation is not None)

    def _on_action(self, action: str, key: int) -> None:
        if action == "copy":
            self.copy_message(key)
        elif action == "edit":
            user = self._last_user()
            if user is not None and user.id == key:
                self.begin_edit()
        elif action == "regenerate":
            self.regenerate()

    def _settings_edited(self) -> None:
        prompt = self.panel.prompt()
        if self.conversation is not None and self.conversation.system_prompt != prompt:
            try:
                self.store.set_system_prompt(self.conversation.id, prompt)
                self.conversation = self.store.get(self.conversation.id)
            except StudioError as exc:
                self.banners.show_error(exc)
        emit(self.settings_changed, prompt, self.panel.options())
