"""The chat's stored conversations: the list (with its search), a new chat, opening one, reopening
the last one after a restart, rename, delete (after asking) and export (Markdown or JSON, to a file
the user picks).

A mixin of ChatView (ui.chat_view): it works on the view's conversation state, declared below."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QFileDialog, QLabel, QMessageBox, QWidget

from app.chat_history import ChatHistory
from app.qtcompat import emit
from app.storage import DEFAULT_TITLE, Message, StoredConversation
from engines.errors import StudioError
from ui.chat_composer import MessageBox
from ui.chat_state import ChatInputs
from ui.conversation_list import ConversationList
from ui.generation_panel import GenerationPanel
from ui.transcript import Transcript
from ui.widgets import BannerArea


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


class ConversationActions:
    history: ChatHistory
    conversation: StoredConversation | None
    messages: list[Message]
    generating: bool
    inputs: ChatInputs
    banners: BannerArea
    title: QLabel
    conversations: ConversationList
    transcript: Transcript
    input: MessageBox
    panel: GenerationPanel
    last_export_dir: str
    forget_requested: Any  # the view's signals (a Signal, bound on the view)
    conversation_changed: Any
    rederive: Callable[[], None]
    cancel_edit: Callable[[], None]
    _busy_notice: Callable[[str], None]
    _render_all: Callable[[], None]
    _show_context: Callable[[dict[str, Any] | None], None]
    _update_actions: Callable[[], None]

    def reopen(self, conversation_id: int) -> None:
        """After a restart: the conversation that was on screen (nothing when it is gone)."""
        if conversation_id and conversation_id in self.conversations.ids():
            self.open_conversation(conversation_id)

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
                cast(QWidget, self), tr("Delete conversation"), tr("Delete this conversation? This cannot be undone.")
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
            cast(QWidget, self),
            tr("Export conversation"),
            start,
            tr("Markdown (*.md)") if fmt == "markdown" else tr("JSON (*.json)"),
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
