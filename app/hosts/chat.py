"""The chat engine's host: the app's door to the chat service (engines/chat/service.py), on its own
QThread like every other host. An operation is one method that submits one job (app/hosts/jobs.py): load,
ask (and `generate`, the Chat view's request in its own terms), count a draft's tokens, forget.

The model is opened with `responsive=True`: onnxruntime-genai holds the GIL for a whole token, so the
service runs it in the bounded engine child (the one rule, engines/chat/opening.py), unless a test
injects a loader or NPU_STUDIO_CHAT_IN_PROCESS=1. Other doors (the server) may share the loaded model:
`service` is the one loaded now, `follow` tells them when it changes (in the host's thread, so a
busy GUI thread never holds them up) and `loading` while one loads;
the engine answers their turns and the window's together (several at once, the rest in a fair line),
and `generation_waiting` says when the window's turn waits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.hosts.jobs import Host, Job, JobContext, Worker, import_serialized
from engines import (
    CPU_EP,
    CancelledError,
    ChatEvent,
    ChatMessage,
    ChatOptions,
    ChatRequest,
    ChatService,
    DeviceChoice,
    GenerationError,
    Placement,
    Reloaded,
    Started,
    Status,
    StopReason,
    StudioError,
    Text,
    Turn,
    Waiting,
)

log = logging.getLogger(__name__)

History = Sequence[tuple[str, str]]  # (role, text) of the stored turns before a request
Loader = Callable[[Path, DeviceChoice], Any]  # a test's own model object: any shape the chat session drives
_TURNS = {"send": Turn.REPLY, "regenerate": Turn.REGENERATE, "edit": Turn.EDIT, "continue": Turn.CONTINUE}


def request_from_view(kind: str, conversation_id: int, text: str, history: History, system_prompt: str,
                      options: Mapping[str, object]) -> ChatRequest:  # fmt: skip
    """The Chat view's request (kind: send | regenerate | edit | continue, the stored turns before it)."""
    turn = _TURNS.get(kind)
    if turn is None:
        raise GenerationError(f"Unknown chat request '{kind}'.")
    messages = [ChatMessage(role, content, StopReason.EOS if role == "assistant" else None)
                for role, content in history if role in ("user", "assistant")]  # fmt: skip
    if turn == Turn.REPLY:
        return ChatRequest.send(messages, text, system_prompt=system_prompt,
                                options=ChatOptions.from_overrides(options), conversation=conversation_id)  # fmt: skip
    return ChatRequest(tuple(messages), system_prompt, ChatOptions.from_overrides(options), turn=turn,
                       text=text if turn == Turn.EDIT else "", conversation=conversation_id)  # fmt: skip


class ChatWorker(Worker):
    """The host thread's state: the loaded chat service (None until a model loads)."""

    def __init__(self, loader: Loader | None = None) -> None:
        super().__init__()
        self.loader = loader
        self._service: ChatService | None = None
        self._lock = threading.Lock()  # `service` is read from the GUI thread (the server's door)
        self.load_failure: StudioError | None = None  # why the last load failed (None: it did not); host thread only
        self.placement: Placement | None = None  # what was asked of the model kept loaded (None: as it loaded)
        self.followers: list[Callable[[ChatService | None], None]] = []  # told in the thread that swaps

    @property
    def service(self) -> ChatService | None:
        with self._lock:
            return self._service

    def follow(self, follower: Callable[[ChatService | None], None]) -> None:
        with self._lock:
            self.followers.append(follower)

    def swap(self, service: ChatService | None) -> ChatService | None:
        """Make `service` the loaded one and tell the followers (the server) at once, in this thread: a door
        outside the window follows the model without waiting for the GUI thread."""
        with self._lock:
            old, self._service = self._service, service
            followers = list(self.followers)
        if old is not service:
            for follow in followers:
                follow(service)
        return old

    def dispose(self) -> None:
        """After the thread stopped: end the engine (and its process)."""
        old = self.swap(None)
        if old is not None:
            old.close()


class ChatHost(Host):
    worker: ChatWorker
    model_loaded = Signal(object)  # ModelInfo.as_dict()
    generation_waiting = Signal(int)  # the window's turn waits: other turns ahead of it
    generation_started = Signal(int)  # conversation id
    text_generated = Signal(str)  # coalesced pieces of the answer
    generation_finished = Signal(object)  # Finished.as_dict(): the stats, the model's name and the final text
    cancelled = Signal(object)  # the same, stop_reason "cancelled"
    tokens_counted = Signal(str, int)  # a draft and its token count with the loaded model's tokenizer
    model_unloaded = Signal()  # the engine dropped its model (it hung, its template was unsafe)

    def __init__(self, loader: Loader | None = None, parent: QObject | None = None) -> None:
        worker = ChatWorker(loader)
        super().__init__(worker, "chat-host", parent)
        self.worker = worker
        self._latest_load: Job | None = None
        self._loads = 0  # loads asked for and not finished yet
        self._wanted: tuple[str, DeviceChoice] | None = None  # the model and device of the latest load

    @property
    def service(self) -> ChatService | None:
        """The chat service loaded now, for other doors that share the model (None: no model)."""
        return self.worker.service

    def follow(self, follower: Callable[[ChatService | None], None]) -> None:
        """Call `follower(service)` whenever the loaded service changes, in the thread that changes it (the
        host's); it must be thread-safe and quick."""
        self.worker.follow(follower)

    @property
    def loading(self) -> bool:
        """A model is being loaded (or waits to be): other doors may wait for the one it brings."""
        return self._loads > 0

    def load(self, folder: str | Path, choice: DeviceChoice) -> Job:
        """Load a chat model. A load still running (a model being tried) is given up: the newest choice
        wins at once instead of after a trial of up to a minute. Stop (cancel) also ends a trial. The model
        loading or loaded already (asked again by another door) is not loaded twice, and a choice that would
        run the loaded model where it runs now (the CPU) keeps it: only what was asked changes."""
        where = str(folder)
        wanted = (where, choice)
        if wanted == self._wanted and self._latest_load is not None:
            service = self.worker.service
            if self._loads > 0:
                return self._latest_load  # the same model is on its way (the window and the server asked)
            if service is not None and service.loaded:
                loaded = service.info.as_dict()  # loaded already: said again, not loaded twice
                return self.submit("chat model load", lambda context: context.send(self.model_loaded, loaded))
        self._wanted = wanted
        if self._latest_load is not None:
            self._latest_load.cancel()

        def open_model(context: JobContext) -> None:
            from engines import open_service

            current = self.worker.service
            kept = _same_place(current, where, choice) if current is not None and current.loaded else None
            if current is not None and kept is not None:
                log.info("chat model kept on the CPU for %s: no reload", choice.describe())
                info = replace(current.info, placement=kept)
                self.worker.placement = kept
                context.send(self.model_loaded, info.as_dict())
                return
            self.worker.placement = None
            old = self.worker.swap(None)
            if old is not None:
                old.close()
            if self.worker.loader is not None:
                import_serialized("onnxruntime", "onnxruntime_genai")  # in this order (Windows ML genai)
            try:
                service = open_service(where, choice, responsive=True, loader=self.worker.loader,
                                       on_event=lambda event: _status(context, event), cancel=context.cancel,
                                       abandon=self.worker.closing.is_set)  # fmt: skip
            except CancelledError:
                if job is not self._latest_load:
                    log.info("chat model load of %s given up: another model was chosen", where)
                    return  # (the newer load reports for itself)
                raise
            except StudioError as exc:
                self.worker.load_failure = exc
                raise
            self.worker.load_failure = None
            self.worker.swap(service)
            context.send(self.model_loaded, service.info.as_dict())

        job = self.submit("chat model load", open_model)
        self._latest_load = job
        self._loads += 1
        job.finished.connect(self._load_ended)
        return job

    def _load_ended(self) -> None:
        self._loads = max(0, self._loads - 1)

    def ask(self, request: ChatRequest | Callable[[], ChatRequest]) -> Job:
        """Answer a request (or the request a function builds, in the host's thread) with the loaded model:
        generation_waiting / started / text_generated, then generation_finished or cancelled (or failed)."""

        def answer(context: JobContext) -> None:
            service = self.worker.service
            if service is None:
                raise self._not_loaded()
            built = request() if callable(request) else request
            turn = replace(built, cancel=context.cancel)
            try:
                done = service.generate(turn, lambda event: self._relay(context, event))
            except StudioError as exc:
                self._after_failure(context, service, exc)
                raise
            context.send(self.cancelled if done.stop_reason == StopReason.CANCELLED else self.generation_finished,
                         done.as_dict())  # fmt: skip

        return self.submit("chat generation", answer)

    def generate(self, kind: str, conversation_id: int, text: str, history: History, system_prompt: str,
                 options: Mapping[str, object]) -> Job:  # fmt: skip
        """The Chat view's request: kind send | regenerate | edit | continue after the stored `history`."""
        turns, overrides = list(history), dict(options)
        return self.ask(lambda: request_from_view(kind, conversation_id, text, turns, system_prompt, overrides))

    def count_tokens(self, text: str) -> Job | None:
        """Count a draft with the loaded model's tokenizer (answered by `tokens_counted`). Best effort: no
        model, a busy engine or a failure gives no count (the view keeps its estimate), never a banner."""
        if not self.qthread.isRunning():
            return None

        def count(context: JobContext) -> int | None:
            service = self.worker.service
            tokens = service.count_tokens(text) if service is not None else None
            if isinstance(tokens, int):
                context.send(self.tokens_counted, text, tokens)
            return tokens

        return self.submit("token count", count, report_errors=False)

    def forget(self, conversation_id: int) -> Job | None:
        """A conversation was deleted: its generator may go."""
        if not self.qthread.isRunning():
            return None

        def forget(context: JobContext) -> None:
            service = self.worker.service
            if service is not None:
                service.forget(conversation_id)

        return self.submit("closing a conversation", forget)

    # --- what the service says, in the host's signals -----------------------------------------------------

    def _relay(self, context: JobContext, event: ChatEvent) -> None:
        if isinstance(event, Text):
            context.send(self.text_generated, event.text)
        elif isinstance(event, Waiting):
            context.send(self.generation_waiting, event.ahead)
        elif isinstance(event, Started):
            context.send(self.generation_started, event.conversation if event.conversation is not None else 0)
        elif isinstance(event, Reloaded):  # a restarted engine loaded the model again before answering
            kept = self.worker.placement  # (what was asked of it since, when a device change kept it)
            info = replace(event.info, placement=kept) if kept is not None else event.info
            context.send(self.model_loaded, info.as_dict())
        else:
            _status(context, event)

    def _not_loaded(self) -> StudioError:
        """Why a request finds no model: the last load's own failure (it names the device, and what to do),
        or that none was loaded."""
        failure = self.worker.load_failure
        if failure is None:
            from engines import no_model_error

            return no_model_error()
        return GenerationError(f"Not answered: {failure.message}", failure.hint)

    def _after_failure(self, context: JobContext, service: ChatService, error: StudioError) -> None:
        # The one fallback path, on this side of the pipe too: the error's fields (not its words) say
        # whether the device failed; such a device is not planned again this run.
        from engines import note_device_failure

        if error.device_failure and service.info.ep:
            note_device_failure(error, service.info.ep)
        if not service.loaded and self.worker.service is service:
            self.worker.swap(None)  # stopped for what the model did: it is not loaded again unasked
            service.close()
            context.send(self.model_unloaded)


def _same_place(service: ChatService, folder: str, choice: DeviceChoice) -> Placement | None:
    """Where `choice` would run the model `service` has loaded, when that is where it runs now, on the CPU
    (a device change that lands on the CPU again needs no reload, which costs seconds: a new engine
    process and the model read again). None: it would run elsewhere, or fail (strict), so it loads again."""
    info = service.info
    if info.ep != CPU_EP or Path(info.folder).resolve() != Path(folder).resolve():
        return None
    from engines import chat_devices, plan_providers, validate_model_folder

    try:
        plan = plan_providers(validate_model_folder(folder), choice, chat_devices(None, choice))
    except StudioError:
        return None
    if plan.ep != CPU_EP or plan.options:
        return None
    asked = plan.placement()
    return replace(info.placement, requested=asked.requested, fell_back=asked.fell_back, reason=asked.reason,
                   wanted_type=asked.wanted_type, policy=asked.policy)  # fmt: skip


def _status(context: JobContext, event: ChatEvent) -> None:
    if isinstance(event, Status):
        context.status(event.text)
