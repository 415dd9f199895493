"""The conversation on screen and its turns: what the user asks (send, regenerate, edit, continue, stop), shown
at once, and what the app stored of it, shown when it comes back.

A turn goes out as `turn_requested` and lasts (`generating`) until the app reports its answer stored
(`show_turn_ended`), failed (`answer_failed`, then `show_turn_failed`) or the question refused
(`show_turn_refused`). Until the question is stored it is shown as pending; the answer streams in through
the AnswerStream. Nothing is sent while no model can answer, nor a message that cannot fit the context:
the text stays in the box and a banner says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import QCoreApplication, QObject, Signal
from PySide6.QtWidgets import QApplication, QLabel

from ui.chat.answers import AnswerStream
from ui.chat.banners import ChatBanners
from ui.chat.composer import Composer
from ui.chat.generation_panel import GenerationPanel
from ui.chat.model_status import ModelStatus
from ui.chat.records import ConversationRecord, MessageRecord
from ui.chat.text import message_entries
from ui.chat.transcript import Transcript
from ui.chat.transcript_render import Entry
from ui.common.plain import set_plain

PENDING_KEY = -2  # the question shown before it is stored


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


class ChatSession(QObject):
    # kind (send | regenerate | edit | continue), conversation id (0: a new one), text, the stored turns before
    # it [(role, text)], system prompt, option overrides, and the anchor: for an edit the message the new
    # question follows (0: none), for a regenerate the question answered again, for a continue its answer
    turn_requested = Signal(str, int, str, object, str, object, int)
    stop_requested = Signal()
    conversation_changed = Signal(int)  # the conversation on screen (0: a new, empty chat), to reopen it

    def __init__(
        self,
        transcript: Transcript,
        composer: Composer,
        panel: GenerationPanel,
        status: ModelStatus,
        banners: ChatBanners,
        title: QLabel,
        parent: QObject,
    ) -> None:
        super().__init__(parent)
        self.transcript = transcript
        self.composer = composer
        self.panel = panel
        self.status = status
        self.banners = banners
        self.title = title
        self.conversation: ConversationRecord | None = None
        self.messages: list[MessageRecord] = []
        self.generating = False  # a turn is out: from the request until its answer is stored
        self.kind = ""  # the turn being answered: send | regenerate | edit | continue
        self.edit_target: int | None = None
        self.answer = AnswerStream(transcript, lambda: status.info, self)
        self._pending = ""  # the question shown before it is stored
        self._refused_text = ""  # the text a failed send puts back into the box
        status.changed.connect(self.update_actions)
        transcript.action_triggered.connect(self._on_action)
        transcript.starter_chosen.connect(self.send_text)

    # --- asking ---------------------------------------------------------------------------------------
    def busy_notice(self, hint: str) -> None:
        self.banners.notice("busy", tr("An answer is still coming."), hint)  # goes when the answer ends

    def send_text(self, text: str) -> bool:
        """Send `text` (or the edited last message). True when it went out. Nothing is sent while no model
        can answer, nor a message that cannot fit the model's context: the text stays in (or is put into)
        the message box, and a banner says why."""
        text = text.strip()
        if not text:
            return False
        if self.generating:
            self.busy_notice(tr("Wait for it, or stop it with Esc."))
            return False
        refusal = self.composer.too_long(text)
        if refusal or not self.status.can_send:
            self._keep_in_box(text)
            if refusal:
                hint = tr("Shorten it, or send it in parts. Your text is still in the box.")
                self.banners.notice("refusal", refusal, hint, "error")
            else:
                hint = tr("It is still in the box, to send once a model can answer (the Send button says why).")
                self.banners.notice("not-sent", tr("Not sent: no chat model can answer yet."), hint, "warning")
            return False
        self.panel.flush()
        if self.edit_target is not None:
            return self._send_edit(text)
        history = self._history()
        self._pending = text
        self._request("send", text, history, 0)
        return True

    def regenerate(self) -> None:
        """Answer the last question again (also one a failure, or a missing model, left without an answer)."""
        user = self._last_user()
        if self.generating or self.conversation is None or user is None or not self.status.can_send:
            return
        history = self._history()
        self.messages = [m for m in self.messages if m.id <= user.id]
        self._request("regenerate", "", history, user.id)

    def begin_edit(self) -> None:
        user = self._last_user()
        if self.generating or user is None:
            return
        self.edit_target = user.id
        self.composer.input.setPlainText(user.text)
        self.composer.input.setFocus()
        self.composer.set_editing(True)

    def cancel_edit(self) -> None:
        if self.edit_target is not None:
            self.composer.input.clear()
        self.edit_target = None
        self.composer.set_editing(False)

    def _send_edit(self, text: str) -> bool:
        user = self._last_user()
        if self.conversation is None or user is None or user.id != self.edit_target:
            self.cancel_edit()
            return False
        history = self._history()
        before = [m for m in self.messages if m.id < user.id]
        self.messages = before
        self._pending = text
        self.edit_target = None
        self.composer.set_editing(False)
        self._request("edit", text, history, before[-1].id if before else 0)
        return True

    def continue_answer(self) -> None:
        """Write more of the last answer (it stopped at the length limit, or was stopped)."""
        answer = self.messages[-1] if self.messages else None
        if self.generating or self.conversation is None or answer is None or answer.role != "assistant":
            return
        if answer.id < 0 or not self.status.can_send:
            return  # kept in memory only (the disk refused it): nothing stored to continue
        self._request("continue", "", self._history(), answer.id, answer)

    def _request(self, kind: str, text: str, history: list[tuple[str, str]], anchor: int,
                 answer: MessageRecord | None = None) -> None:  # fmt: skip
        self.generating = True
        self.kind = kind
        self._refused_text = text if kind in ("send", "edit") else ""
        self.answer.begin(answer.text if answer is not None else "", answer.id if answer is not None else None)
        self.status.clear_answer_error()  # a new attempt: the last failure's banner goes
        self.render()
        self.update_actions()
        conversation = self.conversation.id if self.conversation is not None else 0
        self.turn_requested.emit(kind, conversation, text, history, self.panel.prompt(), self.panel.options(), anchor)

    def stop(self) -> None:
        if self.generating:
            self.composer.set_stopping()
            self.stop_requested.emit()

    def copy_message(self, message_id: int) -> None:
        message = next((m for m in self.messages if m.id == message_id), None)
        if message is not None:
            QApplication.clipboard().setText(message.text)

    # --- a turn, as the app stored it -----------------------------------------------------------------
    def show_question(self, conversation: ConversationRecord, messages: Sequence[MessageRecord]) -> None:
        """The question is stored (a new conversation, the first time): it is the conversation on screen."""
        new = self.conversation is None or self.conversation.id != conversation.id
        self.conversation = conversation
        self.messages = list(messages)
        self._pending = ""
        set_plain(self.title, conversation.title)
        self.render()
        self.update_actions()
        if new:
            self.conversation_changed.emit(conversation.id)

    def show_answer_started(self, answer_id: int) -> None:
        """The answer is stored (empty) as it starts: a close keeps what came."""
        if self.generating:
            self.answer.key = answer_id

    def show_turn_ended(self, messages: Sequence[MessageRecord] | None, stats: Mapping[str, object],
                        stopped: bool) -> None:  # fmt: skip
        """The answer ended (finished, or stopped) and is stored. `messages` None: they could not be read
        back; the answer stays on screen as it was written."""
        if not self.generating:
            return
        self.answer.end()
        self.generating = False
        self.banners.drop("busy")
        if not stopped:
            self.status.answer_done()
        if messages is not None:
            self.messages = list(messages)
            self.render()
        else:
            self.transcript.update_last(self.answer.entry(""))
        self.show_context(stats)
        self.update_actions()

    def answer_failed(self, error: object) -> None:
        """The answer failed (the app settles what is stored, then calls show_turn_failed). A failure because
        no model can answer leaves the question waiting for one: the model's banner says why."""
        self.answer.end()
        self.status.answer_failed(error)

    def show_turn_failed(self, messages: Sequence[MessageRecord] | None, taken_back: str) -> None:
        """What a failed answer left is stored. `taken_back`: the question the model found too long, removed
        from the conversation and put back into the box."""
        if not self.generating:
            return
        self.generating = False
        self._pending = ""
        self.banners.drop("busy")
        if messages is not None:
            self.messages = list(messages)
        if taken_back and not self.composer.input.toPlainText().strip():
            self.composer.input.setPlainText(taken_back)
        self.render()
        self.update_actions()

    def show_turn_refused(self, error: object) -> None:
        """The question could not be stored: nothing was sent, and its text goes back into the box."""
        if not self.generating:
            return
        self.answer.end()
        self.generating = False
        self._pending = ""
        self.banners.drop("busy")
        if self._refused_text:
            self._keep_in_box(self._refused_text)
        self.banners.notice_error("storage", error)
        self.render()
        self.update_actions()

    def show_storage_error(self, error: object) -> None:
        """The store refused a write (a read-only or full disk): what it refused stays on screen."""
        self.banners.notice_error("storage", error)

    def end_turn(self) -> None:
        """The window closes: the app stores what was written; the view stops waiting for it."""
        self.panel.flush()
        self.answer.end()
        self.generating = False

    # --- which conversation ----------------------------------------------------------------------------
    def show(self, conversation: ConversationRecord | None, messages: Sequence[MessageRecord]) -> None:
        """Show a stored conversation from its newest message (None: a new, empty chat)."""
        self.conversation = conversation
        self.messages = list(messages)
        self.cancel_edit()
        set_plain(self.title, conversation.title if conversation is not None else tr("New chat"))
        if conversation is not None and conversation.system_prompt:
            self.panel.set_prompt(conversation.system_prompt)
        self.render()
        last = next((m.stats for m in reversed(self.messages) if m.role == "assistant" and m.stats), None)
        self.show_context(last)
        self.status.clear_answer_error()  # an error belongs to the conversation it came from
        self.update_actions()
        self.conversation_changed.emit(conversation.id if conversation is not None else 0)

    def update(self, conversation: ConversationRecord) -> None:
        """The conversation on screen was renamed, or its system prompt changed."""
        if self.conversation is not None and self.conversation.id == conversation.id:
            self.conversation = conversation
            set_plain(self.title, conversation.title)

    # --- drawing ---------------------------------------------------------------------------------------
    def render(self) -> None:
        entries = message_entries(self.messages, self.generating)
        if self._pending:
            entries.append(Entry(PENDING_KEY, "user", self._pending, actions=()))
        if self.generating:
            if entries and self.answer.key is not None and entries[-1].key == self.answer.key:
                entries.pop()  # the answer being continued: drawn as it streams
            entries.append(self.answer.entry("streaming"))
        self.transcript.set_entries(entries)

    def show_context(self, stats: Mapping[str, object] | None) -> None:
        used = stats.get("context_used", 0) if stats else 0
        length = stats.get("context_length", 0) if stats else 0
        if not length:
            length = self.status.info.get("context_length", 0) or 0
        self.composer.overhead = round(len(self.panel.prompt()) / 4) + 8
        self.composer.set_context(used if isinstance(used, int) else 0, length if isinstance(length, int) else 0)

    def update_actions(self) -> None:
        """Send / Stop, and what the state says about this conversation (a question waiting for an answer)."""
        self.composer.set_busy(self.generating)
        self.composer.set_send_reason(self.status.state.send_reason)
        if self.status.can_send:
            self.banners.drop("not-sent")  # a model can answer again: "not sent" no longer holds
        last = self.messages[-1] if self.messages else None
        waiting = last is not None and last.role == "user" and not self.generating
        self.status.set_unanswered(last.text if waiting and last is not None else "")

    # --- internals ---------------------------------------------------------------------------------------
    def _history(self) -> list[tuple[str, str]]:
        """The turns the engine should hold before this request."""
        return [(m.role, m.text) for m in self.messages if m.role in ("user", "assistant")]

    def _last_user(self) -> MessageRecord | None:
        return next((m for m in reversed(self.messages) if m.role == "user"), None)

    def _keep_in_box(self, text: str) -> None:
        if self.composer.input.toPlainText().strip() != text:
            self.composer.input.setPlainText(text)
        self.composer.input.setFocus()

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
