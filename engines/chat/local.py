"""The chat service with the model in this process: the CLI, scripts and benchmarks with a bundled model.

The model is stepped by one engine thread of this process (engines/chat/scheduler.py's loop, started on
first use): it makes the answers of every caller, several at once, and its events reach each caller's
`on_event` on the caller's own thread. A count, a prompt measure or a forget runs on the engine thread
between two tokens.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from engines.chat.requests import ChatEvent, ChatRequest, EventSink, Failed, Finished, PromptSize
from engines.chat.scheduler import Scheduler
from engines.chat.service import MAX_WAITING, ChatService, status
from engines.chat.session import ChatSession, Loader, model_info
from engines.errors import CancelledError
from engines.types import CancelToken, DeviceChoice

__all__ = ["LocalChat"]

T = TypeVar("T")
_Job = Callable[[], None]


class EngineThread:
    """The scheduler's loop on a thread of this process: jobs posted to it run between two steps."""

    def __init__(self, session: ChatSession) -> None:
        self.session = session
        self.scheduler = Scheduler(session, session.info.slots)
        self._inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def post(self, job: _Job) -> None:
        with self._lock:
            if self._stopped:
                raise CancelledError("The chat model was closed.")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="npu-studio-chat-engine", daemon=True)
                self._thread.start()
            self._inbox.put(job)

    def call(self, fn: Callable[[], T]) -> T:
        """`fn()` on the engine thread, between two steps; its result (or its exception) here."""
        if threading.current_thread() is self._thread:
            return fn()
        done = threading.Event()
        result: list[Any] = []

        def job() -> None:
            try:
                result.append((True, fn()))
            except BaseException as exc:  # handed to the caller as it is
                result.append((False, exc))
            finally:
                done.set()

        self.post(job)
        done.wait()
        ok, value = result[0]
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is not None:
            self._inbox.put(None)
            thread.join()

    def _loop(self) -> None:
        scheduler = self.scheduler
        while True:
            try:
                job = self._inbox.get(block=scheduler.idle)
                while True:
                    if job is None:
                        scheduler.close(CancelledError("The chat model was closed."))
                        return
                    job()
                    job = self._inbox.get_nowait()
            except queue.Empty:
                pass
            scheduler.round()


class LocalChat(ChatService):
    """A chat model loaded in this process."""

    def __init__(self, session: ChatSession, *, max_waiting: int = MAX_WAITING) -> None:
        super().__init__(session.info, max_waiting=max_waiting)
        self._session = session
        self._engine = EngineThread(session)

    @classmethod
    def load(
        cls,
        folder: str | os.PathLike[str],
        choice: DeviceChoice,
        *,
        on_event: Callable[[ChatEvent], None] | None = None,
        loader: Loader | None = None,
        check_memory: bool = True,
        available: frozenset[str] | None = None,
        max_waiting: int = MAX_WAITING,
    ) -> LocalChat:
        from engines.loading import loading_text

        status(on_event, loading_text(Path(folder).name, choice))
        if loader is not None:
            return cls(ChatSession.load(Path(folder), choice, loader=loader), max_waiting=max_waiting)
        from engines.chat.loaded import ChatModel
        from engines.chat.slots import slots_for

        model = ChatModel.load(Path(folder), choice, available=available, check_memory=check_memory)
        return cls.over(model, max_waiting=max_waiting, slots=slots_for(model.folder.path))

    @classmethod
    def over(
        cls, model: Any, folder: str | os.PathLike[str] | None = None, *, max_waiting: int = MAX_WAITING,
        slots: int = 1,
    ) -> LocalChat:  # fmt: skip
        """The service over a model already loaded here (a ChatModel)."""
        where = Path(folder) if folder is not None else Path(model.folder.path)
        return cls(ChatSession(model, model_info(model, where, slots=slots)), max_waiting=max_waiting)

    @property
    def model(self) -> Any:
        """The ChatModel itself (its tokenizer and genai model), for tools that need them."""
        return self._session.model

    def _run(self, request: ChatRequest, sink: EventSink) -> Finished | Failed:
        events: queue.SimpleQueue[ChatEvent] = queue.SimpleQueue()
        if request.cancel is None:
            request = replace(request, cancel=CancelToken())  # so that a caller who stops listening stops it
        scheduler = self._engine.scheduler
        self._engine.post(lambda: scheduler.add(request, events.put))
        try:
            while True:
                event = events.get()
                sink(event)
                if isinstance(event, Finished | Failed):
                    return event
        except BaseException:
            assert request.cancel is not None
            request.cancel.cancel()
            raise

    def measure(self, request: ChatRequest) -> PromptSize:
        return self._engine.call(lambda: self._session.measure(request))

    def count_tokens(self, text: str) -> int | None:
        try:
            return self._engine.call(lambda: self._session.count_tokens(text))
        except CancelledError:
            return None

    def forget(self, conversation: int) -> None:
        with contextlib.suppress(CancelledError):  # closed: nothing to forget
            self._engine.post(lambda: self._session.forget(conversation))

    def close(self) -> None:
        self._engine.stop()
        self._session.close()
