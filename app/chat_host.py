"""The chat engine's host: a worker on its own QThread that drives the chat child process
(app/chat_process.py), or the engine in this process when a loader is injected (tests) or
NPU_STUDIO_CHAT_IN_PROCESS=1."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app.chat_process import ChatProcess, ChatSession, History, error_from_payload, in_process_requested
from app.jobs import Host, Worker, import_serialized
from app.qtcompat import emit
from engines.errors import CancelledError, StudioError
from engines.types import CancelToken, DeviceChoice

log = logging.getLogger(__name__)


class ChatWorker(Worker):
    """Runs chat requests; the engine itself lives in a child process (see app.chat_process) unless a
    loader is injected (tests) or NPU_STUDIO_CHAT_IN_PROCESS=1."""

    model_loaded = Signal(object)  # model_info dict
    generation_started = Signal(int)  # conversation id
    text_generated = Signal(str)  # coalesced pieces of the answer
    generation_finished = Signal(object)  # GenerationStats.as_dict() + model identity and final text
    cancelled = Signal(object)  # same as finished, stop_reason "cancelled"
    tokens_counted = Signal(str, int)  # a draft and its token count with the loaded model's tokenizer
    model_unloaded = Signal()  # the engine was stopped with its model (it hung, its template was unsafe)

    def __init__(self, loader: Callable[[Path, DeviceChoice], Any] | None = None) -> None:
        super().__init__()
        in_process = loader is not None or in_process_requested()
        self._session = ChatSession(loader) if in_process else None
        self._process = None if in_process else ChatProcess()
        self._ep = ""  # the EP the loaded chat model runs on
        self.latest_load: CancelToken | None = None  # the newest load's token (set by the host)
        self.updates = 0  # text_generated emissions (tests and benchmarks)

    @property
    def in_process(self) -> bool:
        return self._session is not None

    def _publish(self, piece: str) -> None:
        self.updates += 1
        emit(self.text_generated, piece)

    def _remote(self, message: tuple[Any, ...], cancel: CancelToken | None = None) -> Any:
        """Run one request in the child; relay its events; return the terminal event's payload."""
        assert self._process is not None

        def on_event(event: tuple[Any, ...]) -> None:
            kind = event[0]
            if kind == "status":
                emit(self.status, event[1])
            elif kind == "started":
                emit(self.generation_started, event[1])
            elif kind == "text":
                self._publish(event[1])
            elif kind == "reloaded":  # a restarted engine loaded the model again before answering
                self._ep = str(event[1].get("ep", "") or "")
                emit(self.model_loaded, event[1])

        kind, *payload = self._process.request(message, on_event, cancel, self.closing.is_set)
        if kind == "failed":
            raise error_from_payload(payload[0])
        return payload[0] if payload else None

    @Slot(str, object, object)
    def load(self, folder: str, choice: DeviceChoice, cancel: CancelToken | None = None) -> None:
        def job() -> None:
            if self._session is not None:
                import_serialized("onnxruntime", "onnxruntime_genai")  # in this order (Windows ML genai)
                info = self._session.load(folder, choice, lambda text: emit(self.status, text))
            else:
                try:
                    info = self._remote(("load", folder, choice), cancel)
                except CancelledError:
                    if cancel is not None and cancel is not self.latest_load:
                        log.info("chat model load of %s given up: another model was chosen", folder)
                        return  # (the newer load reports for itself)
                    raise
            self._ep = str(info.get("ep", "") or "")
            emit(self.model_loaded, info)

        self.run_job("chat model load", job)

    @Slot(str, int, str, object, str, object, object)
    def generate(
        self,
        kind: str,
        conversation_id: int,
        text: str,
        history: History,
        system_prompt: str,
        overrides: dict[str, Any],
        cancel: CancelToken,
    ) -> None:
        """kind: send | regenerate | edit | continue."""

        def job() -> None:
            try:
                data = answer()
            except StudioError as exc:
                # The one fallback path, on this side of the pipe too: the error's fields (not its
                # words) say whether the device failed; such a device is not planned again this run.
                from engines.runtime.fallback import note_failure

                if exc.device_failure and self._ep:
                    note_failure(exc, self._ep)
                if self._process is not None and self._process.last_load is None and self._ep:
                    self._ep = ""  # stopped for what the model did: it is not loaded again unasked
                    emit(self.model_unloaded)
                raise
            emit(self.cancelled if data.get("stop_reason") == "cancelled" else self.generation_finished, data)

        def answer() -> dict[str, Any]:
            if self._session is not None:
                return self._session.generate(
                    kind,
                    conversation_id,
                    text,
                    history,
                    system_prompt,
                    overrides,
                    on_started=lambda i: emit(self.generation_started, i),
                    on_text=self._publish,
                    cancel=cancel,
                )
            message = ("generate", kind, conversation_id, text, list(history), system_prompt, dict(overrides))
            return dict(self._remote(message, cancel))

        self.run_job("chat generation", job)

    @Slot(str)
    def count(self, text: str) -> None:
        """Count a draft's tokens. Best effort: no model, or a failure, gives no count (the view keeps
        its estimate), never an error banner."""
        if self.closing.is_set():
            return
        try:
            if self._session is not None:
                tokens = self._session.count_tokens(text)
            elif self._process is not None and self._process.alive:
                tokens = self._remote(("count", text))
            else:
                tokens = None
        except Exception as exc:  # a count is a hint; the send path reports real problems
            log.debug("token count failed: %s", exc)
            return
        if isinstance(tokens, int):
            emit(self.tokens_counted, text, tokens)

    @Slot(int)
    def forget(self, conversation_id: int) -> None:
        def job() -> None:
            if self._session is not None:
                self._session.forget(conversation_id)
            elif self._process is not None and self._process.alive:
                self._remote(("forget", conversation_id))

        self.run_job("closing a conversation", job)

    def dispose(self) -> None:
        """After the thread stopped: end the engine (and its process)."""
        if self._session is not None:
            self._session.close()
        if self._process is not None:
            self._process.close()


class ChatHost(Host):
    worker: ChatWorker
    model_loaded = Signal(object)
    generation_started = Signal(int)
    text_generated = Signal(str)
    generation_finished = Signal(object)
    cancelled = Signal(object)
    tokens_counted = Signal(str, int)
    model_unloaded = Signal()
    RELAYED = (
        "model_loaded",
        "generation_started",
        "text_generated",
        "generation_finished",
        "cancelled",
        "tokens_counted",
        "model_unloaded",
    )
    _load = Signal(str, object, object)
    _generate = Signal(str, int, str, object, str, object, object)
    _forget = Signal(int)
    _count = Signal(str)

    def __init__(
        self, loader: Callable[[Path, DeviceChoice], Any] | None = None, parent: QObject | None = None
    ) -> None:
        w = ChatWorker(loader)
        super().__init__(w, "chat-host", parent)
        self.worker = w
        self._load.connect(w.load)
        self._generate.connect(w.generate)
        self._forget.connect(w.forget)
        self._count.connect(w.count)

    def load(self, folder: str | Path, choice: DeviceChoice) -> None:
        """Load a chat model. A load still running (a model being tried) is given up: the newest choice
        wins at once instead of after a trial of up to a minute. Stop (cancel) also ends a trial."""
        self.start()
        previous, token = self.worker.latest_load, self.new_token()
        self.worker.latest_load = token
        if previous is not None:
            previous.cancel()
        emit(self._load, str(folder), choice, token)

    def generate(
        self,
        kind: str,
        conversation_id: int,
        text: str,
        history: History,
        system_prompt: str,
        options: dict[str, Any],
    ) -> None:
        self.start()
        emit(self._generate, kind, conversation_id, text, list(history), system_prompt, dict(options), self.new_token())

    def send(
        self,
        conversation_id: int,
        text: str,
        history: History,
        system_prompt: str = "",
        options: dict[str, Any] | None = None,
    ) -> None:
        self.generate("send", conversation_id, text, history, system_prompt, options or {})

    def forget(self, conversation_id: int) -> None:
        if self.qthread.isRunning():
            emit(self._forget, conversation_id)

    def count_tokens(self, text: str) -> None:
        """Count a draft with the loaded model's tokenizer (answered by `tokens_counted`)."""
        if self.qthread.isRunning():
            emit(self._count, text)
