"""The chat's conversations as the Chat view uses them: every read and write of the conversation store
goes through here, so the view holds no database and persistence has one place.

An answer the store refuses (a read-only or full disk) is kept in memory: it is shown with its
conversation's messages and stored, in its place, before anything newer is written once the disk works
again. Every method raises StudioError (StorageError) as the store does; the view shows it.
"""

from __future__ import annotations

import builtins
import logging
import time
from dataclasses import replace
from typing import Any

from app.storage import ConversationStore, Message, StoredConversation
from engines.errors import StudioError

log = logging.getLogger(__name__)


class ChatHistory:
    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self.unsaved: builtins.list[Message] = []  # answers the store refused, oldest first

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
        self.store.delete(conversation_id)
        self.unsaved = [m for m in self.unsaved if m.conversation_id != conversation_id]

    def export(self, conversation_id: int, fmt: str) -> str:
        """The conversation as Markdown ("markdown") or JSON text."""
        if fmt == "markdown":
            return self.store.export_markdown(conversation_id)
        return self.store.export_json(conversation_id)

    # --- messages -----------------------------------------------------------------------------
    def messages(self, conversation_id: int) -> builtins.list[Message]:
        """What the conversation holds: the stored messages, then answers kept in memory."""
        self.store_unsaved()
        stored = list(self.store.messages(conversation_id))
        return stored + [m for m in self.unsaved if m.conversation_id == conversation_id]

    def add_question(self, conversation_id: int, text: str) -> Message:
        self.store_unsaved()  # a kept answer goes in before the question that follows it
        return self.store.add_message(conversation_id, "user", text)

    def begin_answer(self, conversation_id: int, text: str, model: str, device: str, ep: str) -> Message:
        """Store an answer as it starts (so a close keeps what came)."""
        return self.store.add_message(conversation_id, "assistant", text, model=model, device=device, ep=ep)

    def save_answer(
        self,
        answer_id: int,
        text: str,
        stop_reason: str,
        stats: dict[str, Any] | None,
        device: str | None,
        ep: str | None,
    ) -> None:
        self.store.update_message(answer_id, text=text, stop_reason=stop_reason, stats=stats, device=device, ep=ep)

    def delete_after(self, conversation_id: int, message_id: int) -> None:
        """Forget every message after `message_id` (0: all of them)."""
        self.store.delete_messages_after(conversation_id, message_id)

    # --- answers the disk refused -------------------------------------------------------------
    def keep_unsaved(self, conversation_id: int, text: str, **fields: Any) -> None:
        """The store refused an answer: keep it in memory (and on screen) rather than lose it."""
        if text:
            message = Message(-1, conversation_id, "assistant", text, time.time())
            self.unsaved.append(replace(message, **fields))

    def store_unsaved(self) -> None:
        """Store answers kept in memory while the disk refused them (before anything newer is stored)."""
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
