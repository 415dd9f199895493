"""The chat service: a loaded chat model that answers turns, with one interface and two implementations.

    service = engines.open_chat("smollm2-135m-instruct", "cpu", library=["assets/models"])
    done = service.generate(ChatRequest.send([], "What is the capital of France?"), on_event=print)
    print(done.text, done.usage, done.placement.badge())

`ChatService` is what every door calls (the CLI's `chat`, the app's Chat view through its host, the
server): `generate(request, on_event)` answers one `ChatRequest` (engines/chat/requests.py), blocking the
calling thread, and returns its `Finished` event; every event, the last one included (`Finished` or
`Failed`), goes to `on_event` on the calling thread. A failure raises its StudioError. Turns from several
callers (threads) share the one model: the engine makes up to `info.slots` answers at once, a token each
in turn, and the rest wait in a fair line (engines/chat/scheduler.py: `Waiting` events, a stopped turn
leaves the line). The line is bounded: a turn that finds it full is refused at once (`BusyError`: a
server answers 429). A cancel token stops a generation within one token and keeps the answer so far.
`measure(request)` counts a request's whole prompt with the model's own tokenizer, between two tokens of
whatever is being answered, so a caller can refuse what does not fit before it queues.

The two implementations: `LocalChat` runs the model in this process (engines/chat/local.py);
`BoundedChat` runs it in the bounded engine child (engines/chat/bounded.py), where a model's template
and graph are bounded in time and memory and a crash is an error, not this process's end.
`engines.chat.opening.runs_in_child` is the one rule that picks between them.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable

from engines.chat.requests import ChatEvent, ChatRequest, EventSink, Failed, Finished, ModelInfo, PromptSize, Status
from engines.errors import BusyError, StudioError

__all__ = ["MAX_WAITING", "ChatService", "status"]

log = logging.getLogger(__name__)

MAX_WAITING = 16  # turns that may wait behind the ones being answered


class ChatService(ABC):
    """A loaded chat model that answers turns, in this process or in the bounded engine child."""

    def __init__(self, info: ModelInfo, *, max_waiting: int = MAX_WAITING) -> None:
        self._info = info
        self.max_waiting = max_waiting
        self._in_flight = 0  # turns answering or waiting
        self._count_lock = threading.Lock()

    @property
    def info(self) -> ModelInfo:
        """The loaded model: name, folder, placement, context length, default options, answers at once."""
        return self._info

    @property
    def loaded(self) -> bool:
        """False once the engine dropped the model (it hung, or its template proved unsafe)."""
        return True

    @property
    def waiting(self) -> int:
        """Turns waiting behind the ones being answered."""
        with self._count_lock:
            return max(0, self._in_flight - self._info.slots)

    @property
    def in_flight(self) -> int:
        """Turns being answered or waiting."""
        with self._count_lock:
            return self._in_flight

    def generate(self, request: ChatRequest, on_event: EventSink | None = None) -> Finished:
        """Answer `request`, blocking this thread while turns queued before it go first. Events go to
        `on_event` on this thread, the last one `Finished` (also returned) or `Failed` (its error is
        raised). Stopped while waiting, the turn ends `Finished` with nothing generated (stop reason
        "cancelled")."""
        sink = on_event or _ignore
        with self._count_lock:
            waiting = self._in_flight - self._info.slots
            if waiting >= self.max_waiting:
                error = BusyError(
                    f"The chat model is busy: {self._in_flight} requests are being answered or waiting.",
                    "Try again in a moment.",
                )
                sink(Failed(error))
                raise error
            self._in_flight += 1
        try:
            outcome = self._run(request, sink)
        except Exception as exc:  # a bug: the caller still hears how the turn ended, then gets the exception
            sink(Failed(StudioError(f"Unexpected error: {type(exc).__name__}: {exc}")))
            raise
        finally:
            with self._count_lock:
                self._in_flight -= 1
        if isinstance(outcome, Failed):
            raise outcome.error
        return outcome

    @abstractmethod
    def _run(self, request: ChatRequest, sink: EventSink) -> Finished | Failed:
        """Queue `request` with the engine and relay its events to `sink` (on this thread) up to the terminal
        one, which is also returned."""

    @abstractmethod
    def measure(self, request: ChatRequest) -> PromptSize:
        """The prompt `request` makes (its whole conversation through the chat template, counted with the
        model's own tokenizer) and the window it must fit in. Answered between two tokens of whatever the
        engine is answering, never after it. A StudioError when the engine cannot (no model)."""

    @abstractmethod
    def count_tokens(self, text: str) -> int | None:
        """Tokens of `text` as a message read by this model (None: no answer now, e.g. no model)."""

    @abstractmethod
    def forget(self, conversation: int) -> None:
        """The caller is done with this conversation: its generator (and KV cache) may go."""

    @abstractmethod
    def close(self) -> None:
        """Release the model (and the engine child). The service answers nothing afterwards."""


def _ignore(event: ChatEvent) -> None:
    return None


def status(on_event: Callable[[ChatEvent], None] | None, text: str) -> None:
    """Tell `on_event` (when there is one) what a load is busy with."""
    if on_event is not None:
        on_event(Status(text))
