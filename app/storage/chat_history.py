"""The chat's conversations as the Chat view uses them: every read and write of the conversation store
goes through here, on the conversations host's thread (app/hosts/conversations.py), so the view holds no
database and persistence has one place.

An answer the store refuses (a read-only or full disk) is kept in memory: it is shown with its
conversation's messages and stored, in its place, before anything newer is written once the disk works
again. So is the final text of an answer that was stored as it started, when the disk refuses it at the
end. Every method raises StudioError (StorageError) as the store does; the view shows it.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from app.storage.conversations import ConversationStore
from app.storage.records import DEFAULT_TITLE, Message, StoredConversation
from engines import StudioError

log = logging.getLogger(__name__)

TITLE_CHARS = 48  # a conversation is titled by its first question, cut here


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


@dataclass(frozen=True)
class _Edit:
    """An answer's final fields, as `save_answer` writes them (None: left as stored)."""

    text: str
    stop_reason: str
    stats: Mapping[str, object] | None
    device: str | None
    ep: str | None

    def write(self, store: ConversationStore, answer_id: int) -> None:
        store.update_message(answer_id, text=self.text, stop_reason=self.stop_reason, stats=self.stats,
                             device=self.device, ep=self.ep)  # fmt: skip


class ChatHistory:
    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self.unsaved: builtins.list[Message] = []  # answers the store refused, oldest first
        self.unsaved_edits: dict[int, _Edit] = {}  # stored answer id -> its final fields, refused

    # --- conversations ------------------------------------------------------------------------
    def conversations(self, search: str = "") -> builtins.list[StoredConversation]:
        return self.store.list(search)

    def get(self, conversation_id: int) -> StoredConversation:
        return self.store.get(conversation_id)

    def create(self, title: str, model: str, system_prompt: str) -> StoredConversation:
        return self.store.create(title, model=model, system_prompt=system_prompt)

    def rename(self, conversation_id: int, title: str) -> StoredConversation:
        self.store.rename(conversation_id, title)
        return self.store.get(conversation_id)

    def set_system_prompt(self, conversation_id: int, prompt: str) -> StoredConversation:
        self.store.set_system_prompt(conversation_id, prompt)
        return self.store.get(conversation_id)

    def delete(self, conversation_id: int) -> None:
        stored = {m.id for m in self.store.messages(conversation_id)}
        self.store.delete(conversation_id)
        self.unsaved = [m for m in self.unsaved if m.conversation_id != conversation_id]
        self.unsaved_edits = {k: v for k, v in self.unsaved_edits.items() if k not in stored}

    def export(self, conversation_id: int, fmt: str) -> str:
        """The conversation as Markdown ("markdown") or JSON text."""
        if fmt == "markdown":
            return self.store.export_markdown(conversation_id)
        return self.store.export_json(conversation_id)

    # --- messages -----------------------------------------------------------------------------
    def messages(self, conversation_id: int) -> builtins.list[Message]:
        """What the conversation holds: the stored messages, then answers kept in memory."""
        self.store_unsaved()
        stored = [self._as_edited(m) for m in self.store.messages(conversation_id)]
        return stored + [m for m in self.unsaved if m.conversation_id == conversation_id]

    def _as_edited(self, message: Message) -> Message:
        edit = self.unsaved_edits.get(message.id)
        if edit is None:
            return message
        return replace(
            message,
            text=edit.text,
            stop_reason=edit.stop_reason,
            stats=dict(edit.stats) if edit.stats is not None else message.stats,
            device=edit.device if edit.device is not None else message.device,
            ep=edit.ep if edit.ep is not None else message.ep,
        )

    def add_question(self, conversation_id: int, text: str) -> Message:
        self.store_unsaved()  # a kept answer goes in before the question that follows it
        return self.store.add_message(conversation_id, "user", text)

    def ask(self, conversation_id: int, text: str, *, model: str, system_prompt: str, after: int | None = None
            ) -> tuple[StoredConversation, builtins.list[Message]]:  # fmt: skip
        """Store a question: in a new conversation (`conversation_id` 0) titled by it, or next in an existing
        one (an empty one with the default title takes its title from it). `after`: an edit replaces every
        message after that one (0: all of them) first. Returns the conversation and its messages."""
        if conversation_id == 0:
            conversation = self.create(title_from(text), model, system_prompt)
        else:
            conversation = self.get(conversation_id)
            if after is not None:
                self.delete_after(conversation_id, after)
            if conversation.title == DEFAULT_TITLE and not self.store.messages(conversation_id):
                conversation = self.rename(conversation_id, title_from(text))
        self.add_question(conversation.id, text)
        return self.get(conversation.id), self.messages(conversation.id)

    def take_back(self, conversation_id: int) -> str:
        """Remove the last question (and its empty answer): the model refused it. Returns its text."""
        messages = self.store.messages(conversation_id)
        last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
        if last is None:
            return ""
        self.delete_after(conversation_id, messages[last - 1].id if last else 0)
        return messages[last].text

    def begin_answer(self, conversation_id: int, text: str, model: str, device: str, ep: str) -> Message:
        """Store an answer as it starts (so a close keeps what came)."""
        return self.store.add_message(conversation_id, "assistant", text, model=model, device=device, ep=ep)

    def save_answer(
        self,
        answer_id: int,
        text: str,
        stop_reason: str,
        stats: Mapping[str, object] | None,
        device: str | None,
        ep: str | None,
    ) -> None:
        """Write an answer's final text; one the disk refuses is kept (shown, and written once it can be)."""
        edit = _Edit(text, stop_reason, stats, device, ep)
        try:
            edit.write(self.store, answer_id)
        except StudioError:
            self.unsaved_edits[answer_id] = edit
            raise
        self.unsaved_edits.pop(answer_id, None)

    def delete_after(self, conversation_id: int, message_id: int) -> None:
        """Forget every message after `message_id` (0: all of them)."""
        self.store.delete_messages_after(conversation_id, message_id)

    # --- answers the disk refused -------------------------------------------------------------
    def keep_unsaved(self, conversation_id: int, text: str, *, model: str = "", device: str = "", ep: str = "",
                     stop_reason: str = "", stats: Mapping[str, object] | None = None) -> None:  # fmt: skip
        """The store refused an answer: keep it in memory (and on screen) rather than lose it."""
        if text:
            self.unsaved.append(Message(-1, conversation_id, "assistant", text, time.time(), model, device, ep,
                                        stop_reason, dict(stats or {})))  # fmt: skip

    def store_unsaved(self) -> None:
        """Store answers kept in memory while the disk refused them (before anything newer is stored)."""
        for answer_id, edit in list(self.unsaved_edits.items()):
            try:
                edit.write(self.store, answer_id)
                del self.unsaved_edits[answer_id]
            except StudioError as exc:
                log.info("a kept answer is still not stored: %s", exc)
        still: builtins.list[Message] = []
        for m in self.unsaved:
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
            except StudioError as exc:
                log.info("a kept answer is still not stored: %s", exc)
                still.append(m)
        self.unsaved = still
