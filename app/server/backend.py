"""The server's `ChatBackend` over the one chat service (`engines.open_chat`, engines/chat/service.py).

Each admitted request is one `ChatRequest` answered by `ChatService.generate` on a thread of its own; the
service makes several answers at once and queues the rest fairly (engines/chat/scheduler.py), the app's
chat window included when the app serves, and its `Waiting` / `Started` / `Text` / `Finished` / `Failed`
events are translated to the server's (app/server/protocol.py).

An OpenAI request carries its whole conversation and expects it read whole: before it queues, its prompt
is measured with the model's own tokenizer (`ChatService.measure`, between two tokens of what the engine is
answering) and one longer than the context window is refused with both counts; the answer is clamped to
what the window leaves. The turn itself never drops the oldest messages (`drop_oldest=False`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import engines
from app.server.library import LibraryCards
from app.server.protocol import (
    Admission,
    CompletionRequest,
    EventSink,
    Failed,
    Finished,
    InvalidRequestError,
    ModelCard,
    PromptTooLongError,
    QueueFullError,
    Started,
    Text,
    Waiting,
)
from engines import BusyError, CancelledError, CancelToken, ChatRequest, ChatService, GenerationError, StudioError

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 512  # an answer's length when the request gives none
MODEL_WAIT_S = 300.0  # a request waits this long for the model the app is loading (a first NPU compile is slow)


class ServiceBackend:
    def __init__(
        self,
        service: ChatService | None,
        *,
        library: LibraryCards,
        model_id: str = "",
        load_error: StudioError | None = None,
        owns_service: bool = True,
        max_waiting: int = 16,
        folder: Path | None = None,
        expecting: Callable[[], bool] | None = None,
    ) -> None:
        """`service`: a ChatService (None when the model could not load: `load_error` says why, and every
        request hears it). `owns_service`: close it with the server (the CLI), or leave it to its owner
        (the app, whose chat window uses it too). `expecting()`: its owner is loading one, which `use`
        will bring; a request meanwhile waits for it (up to MODEL_WAIT_S) instead of being refused."""
        self.service = service
        self.library = library
        self.load_error = load_error
        self.model_id = model_id or (service.info.name if service is not None else "")
        self.owns_service = owns_service
        self.max_waiting = max_waiting  # the service's line: past it, 429
        self.folder = folder if folder is not None else (Path(service.info.folder) if service is not None else None)
        self.expecting = expecting
        self._changed = threading.Condition()
        self._lock = threading.Lock()
        self._active: dict[int, CancelToken] = {}
        self._durations: list[float] = []
        self._closed = False

    def use(self, service: ChatService | None) -> None:
        """Serve `service` from now on (the app's chat loaded another model); requests already answering
        finish on the one they started on, or fail with it."""
        with self._changed:
            self.service = service
            if service is not None:
                self.model_id = service.info.name
                self.folder = Path(service.info.folder)
            self.load_error = None
            self._changed.notify_all()

    def _awaited(self) -> ChatService | None:
        """The service, after waiting for the one its owner is loading (if it is)."""
        deadline = time.monotonic() + MODEL_WAIT_S
        with self._changed:
            while (self.service is None and not self._closed and self.expecting is not None and self.expecting()
                   and time.monotonic() < deadline):  # fmt: skip
                self._changed.wait(0.1)
            return self.service

    # -- ChatBackend --------------------------------------------------------------------------

    def models(self) -> list[ModelCard]:
        service = self.service
        if service is None or not service.loaded:
            return self.library.cards("", None, self.load_error, self.folder)
        info = service.info
        return self.library.cards(self.model_id, info.placement, self.load_error, self.folder, info.context_length)

    def admit(self, request: CompletionRequest) -> Admission:
        service = self._awaited()
        if service is None and self.load_error is None and not self._closed:
            error = StudioError("No chat model is loaded right now.", "Load one in the app's Chat view.")
            error.code = "model-unloaded"
            raise error
        if request.model != self.model_id:
            known = [card.id for card in self.library.cards("", None, None)]
            what = "is not loaded" if request.model in known else "does not exist"
            hint = f" This server serves {self.model_id!r}." if self.model_id else ""
            error = StudioError(f"The model {request.model[:100]!r} {what}.{hint}", "List the models with "
                                "GET /v1/models.")
            error.code = "model-not-found"
            raise error
        if self.load_error is not None:
            raise self.load_error
        if self._closed or service is None:
            raise shutting_down()
        if not service.loaded:
            error = StudioError(f"{self.model_id} is no longer loaded: the chat engine stopped it (it hung, or its "
                                "chat template proved unsafe).", "Load it again or choose another model.")
            error.code = "model-unloaded"
            raise error
        size = service.measure(self._chat_request(request, 1))
        if size.room <= 0:
            raise PromptTooLongError(size.prompt_tokens, size.context_length)
        wanted = request.max_tokens or min(DEFAULT_MAX_TOKENS, size.room)
        info = service.info
        return Admission(size.prompt_tokens, max(1, min(wanted, size.room)), info.placement,
                         {"source": self.library.source_of(info.placement.primary_ep)})

    def submit(
        self, request: CompletionRequest, admission: Admission, on_event: EventSink, cancel: CancelToken
    ) -> None:
        service = self.service
        if service is None or self._closed:
            raise shutting_down()
        waiting = service.waiting
        if waiting >= self.max_waiting:
            raise QueueFullError(f"The server is busy: {service.in_flight} requests are running or waiting.",
                                 self._estimate(waiting + 1))
        chat = self._chat_request(request, admission.max_tokens, cancel)
        thread = threading.Thread(target=self._run, args=(service, chat, admission, on_event, cancel), daemon=True,
                                  name="npu-studio-serve-turn")
        with self._lock:
            self._active[id(cancel)] = cancel
        thread.start()

    def busy(self) -> int:
        with self._lock:
            return len(self._active)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        with self._lock:
            tokens = list(self._active.values())
        for token in tokens:
            token.cancel()
        deadline = time.monotonic() + 10
        while self.busy() and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.owns_service and self.service is not None:
            self.service.close()

    # -- one request --------------------------------------------------------------------------

    @staticmethod
    def _chat_request(request: CompletionRequest, max_tokens: int, cancel: CancelToken | None = None) -> ChatRequest:
        """The chat service's request for a completion: the whole conversation, read whole (never its oldest
        turns dropped). A conversation the model cannot take as it is (a system message after the first
        other one) is the client's error."""
        from engines import ChatOptions, Guidance, GuidanceKind, Turn

        sampled = not request.greedy and request.top_p != 0
        try:
            options = ChatOptions(
                max_new_tokens=max_tokens,
                do_sample=sampled,
                temperature=request.temperature if sampled and request.temperature else ChatOptions.temperature,
                top_p=request.top_p if request.top_p else ChatOptions.top_p,
                seed=request.seed,
            )
            guidance = Guidance(GuidanceKind.JSON_SCHEMA, request.json_schema) if request.json_schema else None
            turn = Turn.REPLY if request.messages[-1].role == "user" else Turn.CONTINUE
            return ChatRequest.from_roles([(m.role, m.content) for m in request.messages], options=options,
                                          stop=request.stop, guidance=guidance, turn=turn, cancel=cancel,
                                          drop_oldest=False)  # fmt: skip
        except GenerationError as exc:
            raise InvalidRequestError(exc.message, exc.hint) from None

    def _run(self, service: ChatService, chat: ChatRequest, admission: Admission, on_event: EventSink,
             cancel: CancelToken) -> None:  # fmt: skip
        started = time.perf_counter()
        ended = False

        def sink(event: Any) -> None:
            nonlocal ended
            if isinstance(event, engines.Waiting):
                on_event(Waiting(event.ahead))
            elif isinstance(event, engines.Started):
                on_event(Started(admission.prompt_tokens))
            elif isinstance(event, engines.Text):
                on_event(Text(event.text))
            elif isinstance(event, engines.Finished):
                ended = True
                on_event(self._finished(event, cancel))
            elif isinstance(event, engines.Failed):
                ended = True
                error = event.error
                if isinstance(error, BusyError):
                    error = QueueFullError(error.message, self._estimate(service.waiting + 1))
                on_event(Failed(error))

        try:
            service.generate(chat, sink)
        except StudioError:
            pass  # already reported as Failed
        except Exception as exc:
            log.exception("chat request failed")
            if not ended:
                on_event(Failed(StudioError(f"Generation failed: {type(exc).__name__}: {exc}")))
        finally:
            with self._lock:
                self._active.pop(id(cancel), None)
                self._durations.append(time.perf_counter() - started)
                del self._durations[:-32]

    def _finished(self, event: Any, cancel: CancelToken) -> Finished | Failed:
        from engines import StopReason

        stats = event.stats
        if stats.stop_reason == StopReason.CANCELLED:
            return Failed(CancelledError("The request was cancelled."))
        if stats.stop_reason == StopReason.ERROR:
            return Failed(StudioError("Generation failed."))
        # usage counts the answer's tokens as the tokenizer reads its text: the end-of-sequence token is not
        # part of it
        completion = stats.generated_tokens - (1 if stats.stop_reason == StopReason.EOS else 0)
        reason = "stop" if stats.stop_reason in (StopReason.EOS, StopReason.STOP) else "length"
        return Finished(reason, stats.prompt_tokens, completion, event.placement, stats.decode_tokens_per_s,
                        stats.time_to_first_token_s)

    def _estimate(self, ahead: int) -> float:
        with self._lock:
            recent = self._durations[-8:]
        each = sum(recent) / len(recent) if recent else 2.0
        return each * max(1, ahead)


def shutting_down() -> StudioError:
    error = StudioError("The server is shutting down.")
    error.code = "shutting-down"
    return error


def open_backend(folder: Any, choice: Any, library: LibraryCards, max_waiting: int = 16) -> ServiceBackend:
    """The model opened through the chat service for a server (`responsive`: the engine child, so the event
    loop never waits on a token). Under strict mode a device that is not there is kept as the answer to
    every request (503) rather than a refusal to start."""
    from engines import DeviceUnavailableError, PlacementError, open_service

    try:
        service = open_service(folder, choice, responsive=True, max_waiting=max_waiting)
    except (DeviceUnavailableError, PlacementError) as exc:
        if not choice.strict:
            raise
        return ServiceBackend(None, library=library, model_id=folder.name, load_error=exc, max_waiting=max_waiting,
                              folder=folder)
    return ServiceBackend(service, library=library, max_waiting=max_waiting, folder=folder)
