"""The Chat view's conversations: the store's own thread, and the controller between the view and it.

`ConversationsHost` runs every read and write of the conversation store on its thread (the one job runner,
app/hosts/jobs.py), one at a time, in order: no SQL runs on the GUI thread. `Conversations` takes the view's
intents about the list (search, open, rename, delete, export, a system prompt, reopening the last one after
a restart) to the store and shows the records that come back. The turns of the conversation on screen (a
question, its answer) are app/hosts/chat_turns.py's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from PySide6.QtCore import QCoreApplication, QEvent, QObject, SignalInstance

from app.hosts.jobs import SHUTDOWN_TIMEOUT_MS, Host, Job, Worker
from app.storage.chat_history import ChatHistory
from app.storage.conversations import ConversationStore
from app.storage.records import Message, StoredConversation
from engines import StorageError, StudioError

log = logging.getLogger(__name__)

T = TypeVar("T")


class ConversationsHost(Host):
    """The conversation store's thread. `history` is touched only there (by the jobs `run` submits)."""

    def __init__(self, store: ConversationStore, parent: QObject | None = None) -> None:
        super().__init__(Worker(runtime=False), "conversations-host", parent)
        self.history = ChatHistory(store)

    def run(
        self,
        name: str,
        work: Callable[[ChatHistory], T],
        done: Callable[[T], None] | None = None,
        failed: Callable[[StudioError], None] | None = None,
    ) -> Job:
        """Run `work(history)` on the store's thread, after everything submitted before it; `done(result)` or
        `failed(error)` follow in the GUI thread."""
        job = self.submit(name, lambda _context: work(self.history), report_errors=False)
        if done is not None:
            job.returned.connect(done)
        if failed is not None:
            job.errored.connect(failed)
        return job

    def drain(self, timeout_ms: int = SHUTDOWN_TIMEOUT_MS) -> bool:
        """Wait until every job submitted so far has run (the last answer is on disk before the app quits).
        Blocks the calling (GUI) thread; True when they all ran in time."""
        if not self.qthread.isRunning():
            return True
        QCoreApplication.sendPostedEvents(self, QEvent.Type.MetaCall)  # jobs still on their way to the thread
        ran = threading.Event()
        barrier = Job("waiting for the store", lambda _context: ran.set(), self.new_token(), False)
        self._jobs.add(barrier)
        barrier.finished.connect(lambda: self._jobs.discard(barrier))
        self._submitted.emit(barrier)
        if not ran.wait(timeout_ms / 1000):
            log.warning("the conversation store did not finish its writes within %d ms", timeout_ms)
            return False
        return True


class ConversationsView(Protocol):
    """What the controller asks of the Chat view (ui/chat/view.py)."""

    @property
    def open_requested(self) -> SignalInstance: ...
    @property
    def rename_requested(self) -> SignalInstance: ...
    @property
    def delete_requested(self) -> SignalInstance: ...
    @property
    def export_requested(self) -> SignalInstance: ...
    @property
    def search_changed(self) -> SignalInstance: ...
    @property
    def system_prompt_changed(self) -> SignalInstance: ...

    def show_conversations(self, conversations: Sequence[StoredConversation]) -> None: ...
    def show_conversation(self, conversation: StoredConversation, messages: Sequence[Message]) -> None: ...
    def show_updated(self, conversation: StoredConversation) -> None: ...
    def show_deleted(self, conversation_id: int) -> None: ...
    def show_storage_error(self, error: object) -> None: ...
    def show_exported(self, path: str) -> None: ...


class Conversations(QObject):
    """The conversation list's controller: the view's intents in, the store's records out."""

    def __init__(
        self,
        view: ConversationsView,
        host: ConversationsHost,
        forget: Callable[[int], object],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.view = view
        self.host = host
        self._forget = forget  # a deleted conversation's state in the chat engine may go
        self._search = ""
        view.open_requested.connect(self.open)
        view.rename_requested.connect(self.rename)
        view.delete_requested.connect(self.delete)
        view.export_requested.connect(self.export)
        view.search_changed.connect(self.search)
        view.system_prompt_changed.connect(self.set_system_prompt)

    def refresh(self) -> None:
        """List the conversations again (after anything that changed them), with the search the view shows."""
        search = self._search
        self.host.run("listing conversations", lambda h: h.conversations(search),
                      self.view.show_conversations, self.view.show_storage_error)  # fmt: skip

    def search(self, text: str) -> None:
        self._search = text
        self.refresh()

    def reopen(self, conversation_id: int) -> None:
        """After a restart: the list, and the conversation that was on screen (nothing when it is gone)."""
        self.refresh()
        if conversation_id:
            self.host.run("reopening the last conversation", lambda h: _opened(h, conversation_id),
                          self._show_opened, lambda error: log.info("not reopened: %s", error))  # fmt: skip

    def open(self, conversation_id: int) -> None:
        self.host.run("opening a conversation", lambda h: _opened(h, conversation_id),
                      self._show_opened, self.view.show_storage_error)  # fmt: skip

    def _show_opened(self, opened: tuple[StoredConversation, list[Message]]) -> None:
        self.view.show_conversation(*opened)

    def rename(self, conversation_id: int, title: str) -> None:
        self.host.run("renaming a conversation", lambda h: h.rename(conversation_id, title),
                      self._updated, self._failed)  # fmt: skip

    def set_system_prompt(self, conversation_id: int, prompt: str) -> None:
        self.host.run("keeping a system prompt", lambda h: h.set_system_prompt(conversation_id, prompt),
                      self.view.show_updated, self.view.show_storage_error)  # fmt: skip

    def delete(self, conversation_id: int) -> None:
        def deleted(_: None) -> None:
            self._forget(conversation_id)
            self.view.show_deleted(conversation_id)
            self.refresh()

        self.host.run("deleting a conversation", lambda h: h.delete(conversation_id), deleted, self._failed)

    def export(self, conversation_id: int, fmt: str, path: str) -> None:
        self.host.run("exporting a conversation", lambda h: _export(h, conversation_id, fmt, path),
                      self.view.show_exported, self.view.show_storage_error)  # fmt: skip

    def _updated(self, conversation: StoredConversation) -> None:
        self.view.show_updated(conversation)
        self.refresh()

    def _failed(self, error: StudioError) -> None:
        self.view.show_storage_error(error)
        self.refresh()  # the list shows what is stored (a rename that failed goes back)


def _opened(history: ChatHistory, conversation_id: int) -> tuple[StoredConversation, list[Message]]:
    return history.get(conversation_id), history.messages(conversation_id)


def _export(history: ChatHistory, conversation_id: int, fmt: str, path: str) -> str:
    """Write the conversation as Markdown or JSON to `path` (the file the user chose); returns the path."""
    text = history.export(conversation_id, fmt)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StorageError(f"Could not write {path}: {exc.strerror or exc}.", "Pick another folder or name.") from exc
    return path
