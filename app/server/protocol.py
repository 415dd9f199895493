"""What the HTTP layer and a chat backend exchange: one request record in, a stream of typed events out.

The backend runs generation on its own thread(s); `ChatBackend.submit` returns at once and the events
arrive through `on_event` from that thread, ending with exactly one `Finished` or `Failed`. The HTTP layer
never sees a conversation, a generator or a tokenizer: only this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from engines import CancelToken, Placement, StudioError


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant
    content: str


@dataclass(frozen=True)
class CompletionRequest:
    """One chat completion, every field already checked (app/server/requests.py)."""

    model: str
    messages: tuple[Message, ...]
    max_tokens: int | None = None  # None: what the context leaves
    temperature: float | None = None  # None: the model's default; 0: greedy
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    json_schema: str | None = None  # a JSON schema (as text) the answer must follow
    stream: bool = False
    include_usage: bool = False
    client: str = ""  # host:port of the caller, for the request log

    @property
    def greedy(self) -> bool:
        return self.temperature is None or self.temperature == 0


@dataclass(frozen=True)
class ModelCard:
    """A chat model of the library as `GET /v1/models` shows it."""

    id: str
    context_length: int
    device: str  # the device type it runs (or would run) on: NPU / GPU / CPU
    placement: Placement | None
    loaded: bool
    problem: str = ""  # why it cannot be served ("" when it can)
    source: str = ""  # where its EP comes from: built in / bundled plugin / Windows ML catalog


@dataclass(frozen=True)
class Waiting:
    ahead: int  # requests in front of this one


@dataclass(frozen=True)
class Started:
    prompt_tokens: int


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Finished:
    finish_reason: str  # "stop" | "length"
    prompt_tokens: int
    completion_tokens: int
    placement: Placement
    decode_tokens_per_s: float = 0.0
    time_to_first_token_s: float = 0.0


@dataclass(frozen=True)
class Failed:
    error: StudioError


Event = Waiting | Started | Text | Finished | Failed
EventSink = Callable[[Event], None]


class QueueFullError(StudioError):
    """The backend's queue is full; try again after `retry_after_s`."""

    code = "queue-full"

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message, "Try again in a moment.")
        self.retry_after_s = retry_after_s


class InvalidRequestError(StudioError):
    """The request is well formed but the model cannot take it as it is (the client's error: a 400)."""

    code = "invalid-request"


class PromptTooLongError(StudioError):
    code = "context-length"

    def __init__(self, prompt_tokens: int, context_length: int) -> None:
        super().__init__(
            f"The prompt is {prompt_tokens} tokens; this model's context holds {context_length} tokens "
            "(the prompt and the answer together).",
            "Send fewer or shorter messages.",
        )
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length


@dataclass
class Admission:
    """What `ChatBackend.admit` settled before a request is queued."""

    prompt_tokens: int
    max_tokens: int  # clamped to what the context leaves
    placement: Placement
    extra: dict[str, object] = field(default_factory=dict)


class ChatBackend(Protocol):
    """A loaded chat model that several callers share (the server, the app's chat)."""

    def models(self) -> list[ModelCard]:
        """Every chat model of the library; the loaded one marked."""
        ...

    def admit(self, request: CompletionRequest) -> Admission:
        """Check a request against the loaded model before it queues: the model is the loaded one
        (`StudioError` with code "model-not-found" otherwise), its prompt fits (`PromptTooLongError`),
        the device is the asked one under strict mode (`DeviceUnavailableError`)."""
        ...

    def submit(
        self, request: CompletionRequest, admission: Admission, on_event: EventSink, cancel: CancelToken
    ) -> None:
        """Queue the request (`QueueFullError` at once when full); events follow on `on_event` from the
        backend's thread, ending with one `Finished` or `Failed`. `cancel` stops it within one token."""
        ...

    def busy(self) -> int:
        """Requests running or queued now."""
        ...

    def close(self) -> None:
        """Cancel what runs, fail what waits, release the model."""
        ...
