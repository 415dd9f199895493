"""Chat: stored conversations, streamed Markdown answers, stop / regenerate / edit / continue / copy, a system
prompt and generation settings, stats under each answer, a draft token count and a context-usage indicator,
starter prompts in an empty chat.

The view is composed of named parts, each one thing with its own state: the header (ui.chat.header), the
banners (ui.chat.banners), the conversation list (ui.chat.conversation_list), the transcript
(ui.chat.transcript), the composer (ui.chat.composer), the settings panel (ui.chat.generation_panel), the
model's state (ui.chat.model_status: chip, spinner, banners, whether a message can be sent) and the
conversation on screen with its turns (ui.chat.session, with the answer as it streams: ui.chat.answers).

It holds no database. It shows the records the app gives it (`show_*`) and says what the user wants as
intents (`open_requested`, `rename_requested`, the session's `turn_requested`, ...); the app stores, and asks
the chat host for the answer (app/hosts/conversations.py, app/hosts/chat_turns.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEvent, Qt, Signal
from PySide6.QtGui import QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import QFileDialog, QLabel, QMessageBox, QSplitter, QVBoxLayout, QWidget

from engines import ModelEntry, default_path
from ui.chat.banners import ChatBanners
from ui.chat.composer import Composer
from ui.chat.conversation_list import ConversationList
from ui.chat.generation_panel import GenerationPanel
from ui.chat.header import ChatHeader
from ui.chat.model_status import ModelStatus
from ui.chat.records import ConversationRecord, MessageRecord
from ui.chat.session import ChatSession
from ui.chat.text import starter_prompts
from ui.chat.transcript import Transcript
from ui.common.device_picker import DeviceChoiceModel
from ui.common.theme import colors
from ui.common.widgets import MARGIN, SPACING, BannerArea

NARROW_VIEW = 1000  # below this width (the view's, in logical pixels) the conversation list folds away
__all__ = ["ChatView"]


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


class ChatView(QWidget):
    open_requested = Signal(int)
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)  # the user confirmed
    export_requested = Signal(int, str, str)  # conversation id, markdown | json, the file chosen
    search_changed = Signal(str)
    system_prompt_changed = Signal(int, str)  # the conversation on screen keeps its own system prompt
    settings_changed = Signal(str, object)  # default system prompt, option overrides
    enter_sends_changed = Signal(bool)  # the Enter / Shift+Enter swap
    count_requested = Signal(str)  # count this draft's tokens with the model's tokenizer
    model_chosen = Signal(str)  # the user picked another chat model of the library

    def __init__(
        self,
        choice_model: DeviceChoiceModel,
        system_prompt: str = "",
        options: Mapping[str, object] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.last_export_dir = ""
        self._conversations: list[ConversationRecord] = []
        self._list_choice: bool | None = None  # the user's show/hide of the conversation list, once made
        self._build(choice_model)
        self._icons_dark = colors().dark
        self.panel.set_prompt(system_prompt)
        self.panel.set_options(dict(options or {}))
        choice_model.changed.connect(self.status.choice_changed)
        self.session.conversation_changed.connect(
            lambda _id: self.header.export_button.setEnabled(self.session.conversation is not None)
        )
        self.header.export_button.setEnabled(False)
        self.status.rederive()

    # --- layout -----------------------------------------------------------------------------------
    def _build(self, choice_model: DeviceChoiceModel) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ChatHeader(choice_model)
        self.header.model_picker.model_chosen.connect(self.model_chosen)
        self.header.export_chosen.connect(self._export_current)
        outer.addWidget(self.header)
        self.banners = BannerArea()
        outer.addWidget(self.banners)
        self.state_banners = ChatBanners(
            self.banners, lambda cause: self.status.banner_closed(cause), {"waiting": lambda: self.session.regenerate()}
        )
        self.status = ModelStatus(
            self.header.model_badge, self.header.model_spinner, self.state_banners, choice_model.choice(), self
        )

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        self.conversations = ConversationList()
        self.conversations.selected.connect(self.open_conversation)
        self.conversations.new_requested.connect(self.new_conversation)
        self.conversations.search_changed.connect(self.search_changed)
        self.conversations.rename_requested.connect(self._rename)
        self.conversations.delete_requested.connect(self.delete_conversation)
        self.conversations.export_requested.connect(self.export_dialog)
        self.header.list_button.toggled.connect(self.conversations.setVisible)
        self.header.list_button.clicked.connect(self._list_chosen)  # a click is the user's choice; resizes are not
        splitter.addWidget(self.conversations)

        center = QWidget()
        column = QVBoxLayout(center)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(8)
        self.title = QLabel(tr("New chat"))
        self.title.setObjectName("SectionTitle")
        self.title.setTextFormat(Qt.TextFormat.PlainText)  # a conversation's title is the user's text
        column.addWidget(self.title)
        self.transcript = Transcript()
        self.transcript.set_starters(starter_prompts())
        column.addWidget(self.transcript, 1)
        self.composer = Composer()
        self.composer.count_requested.connect(self.count_requested)
        column.addWidget(self.composer)
        splitter.addWidget(center)

        self.panel = GenerationPanel()
        self.panel.changed.connect(self._settings_edited)
        self.panel.enter_sends_changed.connect(self._enter_sends_edited)
        self.header.settings_button.toggled.connect(self.panel.setVisible)
        self.panel.setVisible(False)
        splitter.addWidget(self.panel)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setStretchFactor(2, 0)
        splitter.setSizes([200, 900, 280])
        outer.addWidget(splitter, 1)

        self.session = ChatSession(
            self.transcript, self.composer, self.panel, self.status, self.state_banners, self.title, self
        )
        self.composer.send_clicked.connect(self._send_clicked)
        self.composer.stop_clicked.connect(self.session.stop)
        self.composer.cancel_edit_clicked.connect(self.session.cancel_edit)
        self.composer.input.textChanged.connect(self._draft_edited)

        regenerate = QShortcut(QKeySequence("Ctrl+R"), self)
        regenerate.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        regenerate.activated.connect(self.session.regenerate)
        focus = QShortcut(QKeySequence("Ctrl+L"), self)
        focus.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        focus.activated.connect(self.composer.input.setFocus)
        # Enter / Ctrl+Enter are the message box's own keys (ui.chat.composer.MessageBox).
        # Esc (stop, or leave edit mode) is a window-wide action: see escape().

    def _list_chosen(self, shown: bool) -> None:
        self._list_choice = shown

    def resizeEvent(self, event: QResizeEvent) -> None:
        """A narrow window gives the conversation the room: the list folds away (unless the user chose)."""
        super().resizeEvent(event)
        if self._list_choice is None:
            wide = event.size().width() >= NARROW_VIEW
            if self.header.list_button.isChecked() != wide:
                self.header.list_button.setChecked(wide)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and colors().dark != self._icons_dark:
            self._icons_dark = colors().dark  # icons are tinted pixmaps: drawn again in the new colours
            self.header.restyle()
            self.composer.restyle()
            self.conversations.restyle()

    def set_model(self, name: str) -> None:
        """The library model the chat uses (remembered by the app; shown in the picker)."""
        self.header.model_picker.set_current(name)

    def set_model_entries(self, entries: Sequence[ModelEntry]) -> None:
        """The library's models (the picker lists the chat models among them)."""
        self.header.model_picker.set_entries(entries)

    def set_enter_sends(self, enter_sends: bool) -> None:
        self.composer.set_enter_sends(enter_sends)
        self.panel.set_enter_sends(enter_sends)

    def _enter_sends_edited(self, enter_sends: bool) -> None:
        self.composer.set_enter_sends(enter_sends)
        self.enter_sends_changed.emit(enter_sends)

    def escape(self) -> None:
        """Esc: stop the answer, or leave edit mode."""
        if self.session.generating:
            self.session.stop()
        elif self.session.edit_target is not None:
            self.session.cancel_edit()

    def _send_clicked(self) -> None:
        if self.session.generating:
            return  # Enter while an answer streams does nothing: Stop is where Send was
        if self.session.send_text(self.composer.input.toPlainText()):
            self.composer.input.clear()

    def _draft_edited(self) -> None:
        if not self.composer.too_long():
            self.state_banners.drop("refusal")

    # --- the model (what the chat host says) --------------------------------------------------------
    def show_model_loading(self, text: str) -> None:
        self.status.loading(text)

    def on_model_loaded(self, info: Mapping[str, object]) -> None:
        self.status.loaded(info)
        defaults = info.get("default_options")
        if isinstance(defaults, dict):
            self.panel.set_defaults(defaults)
        if not self.session.generating and not self.session.messages:
            self.session.show_context(None)
        self.composer.recount()

    def on_model_unloaded(self) -> None:
        self.status.unloaded()

    def on_model_failed(self, error: object) -> None:
        self.status.failed(error)

    def on_tokens_counted(self, text: str, tokens: int) -> None:
        self.composer.set_exact_count(text, tokens)

    # --- conversations (the app's records) ----------------------------------------------------------
    def show_conversations(self, conversations: Sequence[ConversationRecord]) -> None:
        self._conversations = list(conversations)
        current = self.session.conversation
        self.conversations.set_conversations(self._conversations, current.id if current is not None else None)

    def show_conversation(self, conversation: ConversationRecord, messages: Sequence[MessageRecord]) -> None:
        """A conversation opened (or reopened after a restart): shown from its newest message."""
        if self.session.generating:
            return
        self.session.show(conversation, messages)
        self.conversations.set_conversations(self._conversations, conversation.id)

    def show_updated(self, conversation: ConversationRecord) -> None:
        """A conversation was renamed, or its system prompt changed."""
        self.session.update(conversation)

    def show_deleted(self, conversation_id: int) -> None:
        current = self.session.conversation
        if current is not None and current.id == conversation_id:
            self.new_conversation()

    def show_storage_error(self, error: object) -> None:
        self.state_banners.notice_error("storage", error)

    def show_exported(self, path: str) -> None:
        self.state_banners.notice("export", tr("Saved {name}").format(name=Path(path).name), path)

    def new_conversation(self) -> None:
        """Ctrl+N: an empty chat (stored when the first message is sent)."""
        if self.session.generating:
            self.session.busy_notice(tr("Stop it (Esc) before starting a new chat."))
            return
        self.session.show(None, [])
        self.conversations.list.clearSelection()
        self.conversations.list.setCurrentRow(-1)
        self.composer.input.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        current = self.session.conversation
        if current is not None and current.id == conversation_id:
            return
        if self.session.generating:
            self.session.busy_notice(tr("Stop it (Esc) before switching conversations."))
            self.show_conversations(self._conversations)  # the selection goes back to the one answering
            return
        self.open_requested.emit(conversation_id)

    def _rename(self, conversation_id: int, title: str) -> None:
        if title.strip():
            self.rename_requested.emit(conversation_id, title.strip())
        else:
            self.show_conversations(self._conversations)  # an empty title is no rename: the old one comes back

    def delete_conversation(self, conversation_id: int, confirm: bool = True) -> None:
        current = self.session.conversation
        if self.session.generating and current is not None and current.id == conversation_id:
            self.state_banners.notice("busy", tr("This conversation is still answering."),
                                      tr("Stop the answer (Esc) first."))  # fmt: skip
            return
        if confirm:
            answer = QMessageBox.question(
                self, tr("Delete conversation"), tr("Delete this conversation? This cannot be undone.")
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.delete_requested.emit(conversation_id)

    def _export_current(self, fmt: str) -> None:
        current = self.session.conversation
        if current is None:
            self.state_banners.notice("export", tr("Nothing to export yet."), tr("Send a message first."))
            return
        self.export_dialog(current.id, fmt)

    def export_dialog(self, conversation_id: int, fmt: str) -> None:
        suffix = ".md" if fmt == "markdown" else ".json"
        known = [c.title for c in (*self._conversations, self.session.conversation) if c and c.id == conversation_id]
        start = default_path(
            self.last_export_dir or Path.home(), known[0] if known else "", suffix=suffix, fallback="conversation"
        )
        filters = tr("Markdown (*.md)") if fmt == "markdown" else tr("JSON (*.json)")
        path, _ = QFileDialog.getSaveFileName(self, tr("Export conversation"), start, filters)
        if path:
            self.last_export_dir = str(Path(path).parent)
            self.export_requested.emit(conversation_id, fmt, path)

    def _settings_edited(self) -> None:
        prompt = self.panel.prompt()
        current = self.session.conversation
        if current is not None and current.system_prompt != prompt:
            self.system_prompt_changed.emit(current.id, prompt)
        self.settings_changed.emit(prompt, self.panel.options())
