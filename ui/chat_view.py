"""Chat: stored conversations, streamed Markdown answers, stop / regenerate / edit / continue / copy,
a system prompt and generation settings, stats under each answer, a draft token count and a
context-usage indicator (ui.chat_composer), starter prompts in an empty chat.

The header chip and the state banners come from one place (ui.chat_state.derive) and are derived
again after every change of device choice, model, placement, answer and error.

The view owns the conversation store (what is shown is what is saved); generation requests go out
as `generate_requested` and the chat host's signals come back to the `on_*` slots. An answer is stored
as soon as it starts (empty) and updated when it ends, so closing mid-answer keeps the partial text,
marked as stopped.

Its parts: the header row (ui.chat_header); the answer as it streams and is stored (ui.chat_answers);
the model's state, chip and banners (ui.chat_model_status); the conversation list, open, new,
rename, delete and export (ui.chat_conversations). This module lays the view out and sends:
a question, a regenerate, an edit, a continue.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.chat_history import ChatHistory
from app.qtcompat import emit
from app.storage import DEFAULT_TITLE, ConversationStore, Message, StoredConversation
from engines.errors import StudioError
from ui.chat_answers import MIN_RENDER_INTERVAL_MS, AnswerStream
from ui.chat_banners import ChatBanners
from ui.chat_composer import Composer
from ui.chat_conversations import ConversationActions
from ui.chat_header import ChatHeader
from ui.chat_model_status import ModelStatus
from ui.chat_state import ChatInputs
from ui.chat_text import starter_prompts, stats_line, title_from
from ui.conversation_list import ConversationList
from ui.device_picker import DeviceChoiceModel
from ui.generation_panel import GenerationPanel
from ui.theme import colors
from ui.transcript import Transcript
from ui.widgets import MARGIN, SPACING, BannerArea

log = logging.getLogger(__name__)

NARROW_VIEW = 1000  # below this width (the view's, in logical pixels) the conversation list folds away
__all__ = ["ChatView", "stats_line", "title_from"]


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


class ChatView(ConversationActions, ModelStatus, AnswerStream, QWidget):
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
        self.header = ChatHeader(choice_model)
        self.header.model_picker.model_chosen.connect(self.model_chosen)
        self.header.export_chosen.connect(self._export_current)
        # The header's parts, by the names the rest of the app (and its tests) use.
        self.list_button = self.header.list_button
        self.model_spinner = self.header.model_spinner
        self.model_picker = self.header.model_picker
        self.model_badge = self.header.model_badge
        self.picker = self.header.picker
        self.settings_button = self.header.settings_button
        self.export_button = self.header.export_button
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
        self.header.restyle()
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

    # --- internals --------------------------------------------------------------------------------
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
