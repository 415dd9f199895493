"""Chat: stored conversations, streamed Markdown answers, stop / regenerate / edit / continue / copy,
a system prompt and generation settings, stats under each answer, a draft token count and a
context-usage indicator (ui.chat_composer), starter prompts in an empty chat.

The header chip and the state banners come from one place (ui.chat_state.derive) and are derived
again after every change of device choice, model, placement, answer and error.

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

from PySide6.QtCore import QCoreApplication, QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QLabel,
    QMenu,
    QMessageBox,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat_history import ChatHistory
from app.qtcompat import emit
from app.storage import DEFAULT_TITLE, ConversationStore, Message, StoredConversation
from engines.errors import ContextOverflowError, StudioError
from engines.types import DeviceChoice, Placement, short_ep_name
from ui.chat_banners import ChatBanners
from ui.chat_composer import Composer
from ui.chat_state import ChatInputs, derive
from ui.chat_text import answer_entry, message_entries, starter_prompts, stats_line, title_from
from ui.conversation_list import ConversationList
from ui.device_picker import DeviceChoiceModel, DevicePicker
from ui.generation_panel import GenerationPanel
from ui.icons import icon
from ui.model_picker import ModelPicker
from ui.placement_chip import PlacementChip
from ui.theme import colors
from ui.transcript import Entry, Transcript
from ui.widgets import MARGIN, SPACING, BannerArea, Spinner, ViewHeader, error_text

log = logging.getLogger(__name__)

MIN_RENDER_INTERVAL_MS = 16  # streamed text is drawn at most ~60 times a second
NARROW_VIEW = 1000  # below this width (the view's, in logical pixels) the conversation list folds away
__all__ = ["ChatView", "stats_line", "title_from"]


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


class ChatView(QWidget):
    # kind (send | regenerate | edit), conversation id, text, history [(role, text)], system prompt, options
    generate_requested = Signal(str, int, str, object, str, object)
    stop_requested = Signal()
    forget_requested = Signal(int)  # a conversation was deleted: the engine may drop its state
    settings_changed = Signal(str, object)  # default system prompt, option overrides
    enter_sends_changed = Signal(bool)  # the Enter / Shift+Enter swap
    conversation_changed = Signal(int)  # the conversation on screen (0: a new, empty chat), to reopen it
    count_requested = Signal(str)  # count this draft's tokens with the model's tokenizer
    model_chosen = Signal(str)  # the user picked another chat model of the library

    def __init__(
        self,
        store: ConversationStore,
        choice_model: DeviceChoiceModel,
        system_prompt: str = "",
        options: dict[str, Any] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.history = ChatHistory(store)  # every read and write of the conversations goes through it
        self.conversation: StoredConversation | None = None
        self.messages: list[Message] = []
        self.generating = False
        self.answer_id: int | None = None
        self.answer_text = ""
        self.edit_target: int | None = None
        self.model_info: dict[str, Any] = {}
        self.last_export_dir = ""
        self.kind = ""  # the request being answered: send | regenerate | edit | continue
        self.inputs = ChatInputs(choice=choice_model.choice())
        self._refused_text = ""  # a draft the engine refused (too long): put back into the box
        self._continued_from: str | None = None  # the answer's text before a Continue
        self._chip_shown: tuple[object, ...] = ()
        self._list_choice: bool | None = None  # the user's show/hide of the conversation list, once made
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.timeout.connect(self._render_stream)
        self._render_interval_ms = MIN_RENDER_INTERVAL_MS
        self._build(choice_model)
        self.state_banners = ChatBanners(self.banners, self._banner_read)
        self._icons_dark = colors().dark
        self.panel.set_prompt(system_prompt)
        self.panel.set_options(options or {})
        self.refresh_list()
        self._update_actions()
        choice_model.changed.connect(self._on_choice_changed)
        self.rederive()

    # --- layout -----------------------------------------------------------------------------------
    def _build(self, choice_model: DeviceChoiceModel) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader(tr("Chat"), tr("A small language model, running on this machine. Nothing leaves it."))
        self.list_button = QToolButton()
        self.list_button.setIcon(icon("chat"))
        self.list_button.setCheckable(True)
        self.list_button.setChecked(True)
        self.list_button.setToolTip(tr("Show or hide the conversation list"))
        self.list_button.setAccessibleName(tr("Conversation list"))
        self.header.controls.addWidget(self.list_button)
        self.model_spinner = Spinner()
        self.header.controls.addWidget(self.model_spinner)
        self.model_picker = ModelPicker("genai-llm")
        self.model_picker.model_chosen.connect(self.model_chosen)
        self.header.controls.addWidget(self.model_picker)
        self.model_badge = PlacementChip()  # where the chat model runs, derived (see rederive)
        self.model_badge.setAccessibleName(tr("Where the chat model runs"))
        self.header.controls.addWidget(self.model_badge)
        self.picker = DevicePicker(choice_model, compact=True)
        self.header.controls.addWidget(self.picker)
        self.settings_button = QToolButton()
        self.settings_button.setIcon(icon("sliders"))
        self.settings_button.setToolTip(tr("System prompt and generation settings"))
        self.settings_button.setAccessibleName(tr("Chat settings"))
        self.settings_button.setCheckable(True)
        self.settings_button.setChecked(False)  # the reading column gets the room; one click opens it
        self.header.controls.addWidget(self.settings_button)
        self.export_button = QToolButton()
        self.export_button.setIcon(icon("export"))
        self.export_button.setToolTip(tr("Export this conversation"))
        self.export_button.setAccessibleName(tr("Export this conversation"))
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction(tr("Export as Markdown…"), lambda: self._export_current("markdown"))
        menu.addAction(tr("Export as JSON…"), lambda: self._export_current("json"))
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
        self.list_button.toggled.connect(self.conversations.setVisible)
        self.list_button.clicked.connect(self._list_chosen)  # a click is the user's choice; resizes are not
        splitter.addWidget(self.conversations)

        center = QWidget()
        column = QVBoxLayout(center)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(8)
        self.title = QLabel(tr(DEFAULT_TITLE))
        self.title.setObjectName("SectionTitle")
        column.addWidget(self.title)
        self.transcript = Transcript()
        self.transcript.action_triggered.connect(self._on_action)
        self.transcript.starter_chosen.connect(self.send_text)
        self.transcript.set_starters(starter_prompts())
        column.addWidget(self.transcript, 1)
        self.composer = Composer()
        self.composer.send_clicked.connect(self._send_clicked)
        self.composer.stop_clicked.connect(self.stop)
        self.composer.cancel_edit_clicked.connect(self.cancel_edit)
        self.composer.count_requested.connect(self.count_requested)
        self.composer.input.textChanged.connect(self._draft_edited)
        column.addWidget(self.composer)
        # The composer's parts, by the names the rest of the app (and its tests) use.
        self.input = self.composer.input
        self.send_button = self.composer.send_button
        self.stop_button = self.composer.stop_button
        self.context_label = self.composer.context_label
        self.context_bar = self.composer.context_bar
        self.edit_label = self.composer.edit_label
        splitter.addWidget(center)

        self.panel = GenerationPanel()
        self.panel.changed.connect(self._settings_edited)
        self.panel.enter_sends_changed.connect(self._enter_sends_edited)
        self.settings_button.toggled.connect(self.panel.setVisible)
        self.panel.setVisible(False)
        splitter.addWidget(self.panel)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setStretchFactor(2, 0)
        splitter.setSizes([200, 900, 280])
        outer.addWidget(splitter, 1)

        regenerate = QShortcut(QKeySequence("Ctrl+R"), self)
        regenerate.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        regenerate.activated.connect(self.regenerate)
        focus = QShortcut(QKeySequence("Ctrl+L"), self)
        focus.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        focus.activated.connect(self.input.setFocus)
        # Enter / Ctrl+Enter are the message box's own keys (ui.chat_composer.MessageBox).
        # Esc (stop, or leave edit mode) is a window-wide action: see escape().

    def _list_chosen(self, shown: bool) -> None:
        self._list_choice = shown

    def resizeEvent(self, event: QResizeEvent) -> None:
        """A narrow window gives the conversation the room: the list folds away (unless the user chose)."""
        super().resizeEvent(event)
        if self._list_choice is None:
            wide = event.size().width() >= NARROW_VIEW
            if self.list_button.isChecked() != wide:
                self.list_button.setChecked(wide)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and colors().dark != self._icons_dark:
            self._restyle_icons()

    def _restyle_icons(self) -> None:
        """Icons are tinted pixmaps: a theme switch draws them again in the new colours."""
        self._icons_dark = colors().dark
        self.list_button.setIcon(icon("chat"))
        self.settings_button.setIcon(icon("sliders"))
        self.export_button.setIcon(icon("export"))
        self.composer.restyle()
        self.conversations.restyle()

    def set_model(self, name: str) -> None:
        """The library model the chat uses (remembered by the app; shown in the picker)."""
        self.model_picker.set_current(name)

    def set_model_entries(self, entries: Any) -> None:
        self.model_picker.set_entries(entries)

    def set_enter_sends(self, enter_sends: bool) -> None:
        self.composer.set_enter_sends(enter_sends)
        self.panel.set_enter_sends(enter_sends)

    def _enter_sends_edited(self, enter_sends: bool) -> None:
        self.composer.set_enter_sends(enter_sends)
        emit(self.enter_sends_changed, enter_sends)

    def reopen(self, conversation_id: int) -> None:
        """After a restart: the conversation that was on screen (nothing when it is gone)."""
        if conversation_id and conversation_id in self.conversations.ids():
            self.open_conversation(conversation_id)

    # --- conversations ----------------------------------------------------------------------------
    def refresh_list(self) -> None:
        try:
            items = self.history.conversations(self.conversations.search.text())
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        self.conversations.set_conversations(items, self.conversation.id if self.conversation else None)

    def new_conversation(self) -> None:
        """Ctrl+N: an empty chat (stored when the first message is sent)."""
        if self.generating:
            self._busy_notice(tr("Stop it (Esc) before starting a new chat."))
            return
        self.conversation = None
        self.messages = []
        self.cancel_edit()
        self.transcript.set_entries([])
        self.title.setText(tr(DEFAULT_TITLE))
        self.conversations.list.clearSelection()
        self.conversations.list.setCurrentRow(-1)
        self._show_context(None)
        self.inputs.answer_error = None  # an error belongs to the conversation it came from
        self.rederive()
        self._update_actions()
        emit(self.conversation_changed, 0)
        self.input.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if self.conversation is not None and self.conversation.id == conversation_id:
            return
        if self.generating:
            self._busy_notice(tr("Stop it (Esc) before switching conversations."))
            self.refresh_list()
            return
        try:
            self.conversation = self.history.get(conversation_id)
            self.messages = self.history.messages(conversation_id)
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
        self.inputs.answer_error = None
        self.rederive()
        self._update_actions()
        emit(self.conversation_changed, conversation_id)

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        title = title.strip()
        if not title:
            self.refresh_list()
            return
        try:
            renamed = self.history.rename(conversation_id, title)
            if self.conversation is not None and self.conversation.id == conversation_id:
                self.conversation = renamed
                self.title.setText(self.conversation.title)
        except StudioError as exc:
            self.banners.show_error(exc)
        self.refresh_list()

    def delete_conversation(self, conversation_id: int, confirm: bool = True) -> None:
        if self.generating and self.conversation is not None and self.conversation.id == conversation_id:
            self.banners.show_message(tr("This conversation is still answering."), tr("Stop the answer (Esc) first."))
            return
        if confirm:
            answer = QMessageBox.question(
                self, tr("Delete conversation"), tr("Delete this conversation? This cannot be undone.")
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        try:
            self.history.delete(conversation_id)
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
            self.banners.show_message(tr("Nothing to export yet."), tr("Send a message first."))
            return
        self.export_dialog(self.conversation.id, fmt)

    def export_dialog(self, conversation_id: int, fmt: str) -> None:
        suffix = ".md" if fmt == "markdown" else ".json"
        try:
            title = self.history.get(conversation_id).title
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        safe = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in title).strip() or "conversation"
        start = str(Path(self.last_export_dir or Path.home()) / f"{safe}{suffix}")
        path, _ = QFileDialog.getSaveFileName(
            self, tr("Export conversation"), start, tr("Markdown (*.md)") if fmt == "markdown" else tr("JSON (*.json)")
        )
        if path:
            self.last_export_dir = str(Path(path).parent)
            self.export_to(conversation_id, fmt, path)

    def export_to(self, conversation_id: int, fmt: str, path: str | Path) -> bool:
        try:
            text = self.history.export(conversation_id, fmt)
            Path(path).write_text(text, encoding="utf-8")
        except StudioError as exc:
            self.banners.show_error(exc)
            return False
        except OSError as exc:
            self.banners.show_message(
                tr("Could not write {path}.").format(path=path), exc.strerror or str(exc), "error"
            )
            return False
        return True

    # --- sending ----------------------------------------------------------------------------------
    def _send_clicked(self) -> None:
        if self.generating:
            return  # Enter while an answer streams does nothing: Stop is where Send was
        text = self.input.toPlainText()
        if self.send_text(text):
            self.input.clear()

    def _busy_notice(self, hint: str) -> None:
        self.state_banners.notice("busy", tr("An answer is still coming."), hint)  # goes when the answer ends

    def _draft_edited(self) -> None:
        if not self.composer.too_long():
            self.state_banners.drop("refusal")

    def send_text(self, text: str) -> bool:
        """Send `text` (or the edited last message). True when a request went out. A message that
        cannot fit the model's context is refused here: nothing is sent or stored, and the text is
        left in (or put into) the message box."""
        text = text.strip()
        if not text:
            return False
        if self.generating:
            self._busy_notice(tr("Wait for it, or stop it with Esc."))
            return False
        refusal = self.composer.too_long(text)
        if refusal:
            if self.input.toPlainText().strip() != text:
                self.input.setPlainText(text)
            self.state_banners.drop("refusal")
            self.state_banners.notice(
                "refusal", refusal, tr("Shorten it, or send it in parts. Your text is still in the box."), "error"
            )
            self.input.setFocus()
            return False
        self.panel.flush()
        if self.edit_target is not None:
            return self._send_edit(text)
        try:
            if self.conversation is None:
                self.conversation = self.history.create(
                    title_from(text), model=self.model_info.get("name", ""), system_prompt=self.panel.prompt()
                )
            elif self.conversation.title == DEFAULT_TITLE and not self.messages:
                self.conversation = self.history.rename(self.conversation.id, title_from(text))
            history = self._history()
            user = self.history.add_question(self.conversation.id, text)
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
            self.history.delete_after(self.conversation.id, user.id)
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
        self.composer.set_editing(True)

    def cancel_edit(self) -> None:
        if self.edit_target is not None:
            self.input.clear()
        self.edit_target = None
        self.composer.set_editing(False)

    def _send_edit(self, text: str) -> bool:
        user = self._last_user()
        if self.conversation is None or user is None or user.id != self.edit_target:
            self.cancel_edit()
            return False
        history = self._history()
        before = [m for m in self.messages if m.id < user.id]
        try:
            self.history.delete_after(self.conversation.id, before[-1].id if before else 0)
            new_user = self.history.add_question(self.conversation.id, text)
        except StudioError as exc:
            self.banners.show_error(exc)
            return False
        self.messages = [*before, new_user]
        self.edit_target = None
        self.composer.set_editing(False)
        self._start("edit", text, history)
        return True

    def continue_answer(self) -> None:
        """Write more of the last answer (it stopped at the length limit)."""
        answer = self.messages[-1] if self.messages else None
        if self.generating or self.conversation is None or answer is None or answer.role != "assistant":
            return
        if answer.id < 0:
            return  # kept in memory only (the disk refused it): nothing stored to continue
        history = self._history()
        self._start("continue", "", history, answer)

    def stop(self) -> None:
        if self.generating:
            self.composer.set_stopping()
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
            answer = self.history.begin_answer(
                self.conversation.id,
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

    def _start(self, kind: str, text: str, history: list[tuple[str, str]], answer: Message | None = None) -> None:
        assert self.conversation is not None
        self.generating = True
        self.kind = kind
        # Only a new question can be taken back whole (an edit has already replaced the old one).
        self._refused_text = text if kind == "send" else ""
        self._continued_from = answer.text if answer is not None else None
        # A new answer is stored when the engine starts answering (the model is known by then); a
        # continued one is the stored answer, written further.
        self.answer_id = answer.id if answer is not None else None
        self.answer_text = answer.text if answer is not None else ""
        self.rederive()
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
        self.inputs.loading = text
        self.inputs.model_error = None  # a new load: the last load's error no longer holds
        self.state_banners.reset()
        self.rederive()

    def on_model_loaded(self, info: dict[str, Any]) -> None:
        self.model_info = dict(info)
        self.model_spinner.stop()
        self.inputs.loading = ""
        self.inputs.info = dict(info)
        self.inputs.model_error = None
        self.state_banners.reset()
        defaults = info.get("default_options")
        if isinstance(defaults, dict):
            self.panel.set_defaults(defaults)
        if not self.generating and not self.messages:
            self._show_context(None)
        self.composer.recount()
        self.rederive()

    def on_model_failed(self, error: object) -> None:
        self.model_spinner.stop()
        self.model_info = {}
        self.inputs.loading = ""
        self.inputs.info = {}
        self.inputs.model_error = error
        self.state_banners.reset()
        self.rederive()

    def on_tokens_counted(self, text: str, tokens: int) -> None:
        self.composer.set_exact_count(text, tokens)

    def _on_choice_changed(self, choice: DeviceChoice) -> None:
        self.inputs.choice = choice
        self.inputs.model_error = None  # it belonged to the old choice; the app loads for the new one
        self.rederive()

    def rederive(self) -> None:
        """Chip, state banners and status from the current inputs (see ui.chat_state)."""
        state = derive(self.inputs)
        chip = (state.placement, state.chip_kind, state.chip_text, state.chip_details)
        if chip != self._chip_shown:  # restyling the chip costs a style sheet pass: only on a change
            self._chip_shown = chip
            if state.placement is not None:
                self.model_badge.set_placement(state.placement)  # asked: what the model was loaded for
            else:
                self.model_badge.set_state(state.chip_kind, state.chip_text, state.chip_details)
        self.state_banners.sync(state.banners)

    def _banner_read(self, key: tuple[str, str]) -> bool:
        """The user closed a state banner: a failed answer's error is then read (it goes); a model's
        state stays, its banner closed until that state changes."""
        if self.inputs.answer_error is not None and error_text(self.inputs.answer_error) == key:
            self.inputs.answer_error = None
            return True
        return False

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
        """A failure while answering (or a request that could not start). A message the engine found
        too long for the context is taken back: not kept in the history, and put back into the box."""
        if self.generating:
            if isinstance(error, ContextOverflowError) and not self.answer_text and self._take_back():
                pass
            elif self._continued_from is not None and self.answer_text == self._continued_from:
                pass  # a Continue that wrote nothing: the answer stays as it was (and can be continued)
            elif self.answer_id is not None:
                self._save_answer(self.answer_text, "error", None)
            elif self.answer_text:
                self._keep_unsaved(self.answer_text, "error", {})
            self.generating = False
            self._reload_messages()
            self._render_all()
            self._update_actions()
        self.inputs.answer_error = error
        self.rederive()

    def _take_back(self) -> bool:
        """Remove the refused message (and its empty answer) from the store; put its text back."""
        user = self._last_user()
        if self.conversation is None or user is None or not self._refused_text:
            return False
        before = [m for m in self.messages if m.id < user.id]
        try:
            self.history.delete_after(self.conversation.id, before[-1].id if before else 0)
        except StudioError as exc:
            log.warning("could not remove the refused message: %s", exc)
            return False
        self.messages = before
        self.answer_id = None
        if not self.input.toPlainText().strip():
            self.input.setPlainText(self._refused_text)
        return True

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
        placement = self.model_info.get("placement")
        if isinstance(placement, Placement):
            data["asked"] = placement.requested  # for the answer's chip: "Asked NPU → Ran on CPU"
        stop_reason = str(stats.get("stop_reason", "cancelled" if state else "eos"))
        self._store_answer()
        if self.answer_id is None:
            self._keep_unsaved(text, stop_reason, data)
        self._save_answer(text, stop_reason, data)
        self.generating = False
        self.state_banners.drop("busy")
        if not state:
            self.inputs.answer_error = None  # an answer came: the last failure no longer holds
        self._reload_messages()
        self._render_all()
        self._show_context(data)
        self._update_actions()
        self.refresh_list()
        self.rederive()

    def _save_answer(self, text: str, stop_reason: str, stats: dict[str, Any] | None) -> None:
        if self.answer_id is None:
            return
        try:
            self.history.save_answer(
                self.answer_id,
                text,
                stop_reason,
                stats,
                device=str(stats.get("device") or short_ep_name(str(stats.get("ep", "")))) if stats else None,
                ep=str(stats.get("ep", "")) if stats else None,
            )
        except StudioError as exc:
            log.warning("could not save the answer: %s", exc)
            self.banners.show_error(exc)

    def _reload_messages(self) -> None:
        if self.conversation is None:
            return
        try:
            self.messages = self.history.messages(self.conversation.id)
        except StudioError as exc:
            self.banners.show_error(exc)

    def _keep_unsaved(self, text: str, stop_reason: str, stats: dict[str, Any]) -> None:
        """The store refused the answer: keep it in memory (and on screen) rather than lose it."""
        if self.conversation is None:
            return
        info = self.model_info
        self.history.keep_unsaved(
            self.conversation.id,
            text,
            model=str(info.get("name", "")),
            device=str(stats.get("device") or info.get("device", "")),
            ep=str(stats.get("ep") or info.get("ep", "")),
            stop_reason=stop_reason,
            stats=stats,
        )

    def _entry_for_answer(self, state: str, footer: str) -> Entry:
        return answer_entry(self.answer_id or -1, self.answer_text, self.model_info, state, footer)

    def _render_all(self) -> None:
        entries = message_entries(self.messages, self.generating)
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
        self.composer.overhead = round(len(self.panel.prompt()) / 4) + 8
        self.composer.set_context(used, length)

    def _update_actions(self) -> None:
        self.composer.set_busy(self.generating)
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
        elif action == "continue":
            self.continue_answer()

    def _settings_edited(self) -> None:
        prompt = self.panel.prompt()
        if self.conversation is not None and self.conversation.system_prompt != prompt:
            try:
                self.conversation = self.history.set_system_prompt(self.conversation.id, prompt)
            except StudioError as exc:
                self.banners.show_error(exc)
        emit(self.settings_changed, prompt, self.panel.options())
