"""What a caller sends the chat service and what it hears back: plain, typed, picklable data.

One `ChatRequest` carries a whole turn: the conversation (its messages and system prompt), what to do
with it (`Turn`: reply, regenerate, edit the last question, continue the last answer), sampling and
limits (`ChatOptions`), stop strings, constrained decoding (`Guidance`), an optional conversation id
(stateful: the engine keeps that conversation's generator, so a new turn prefills only its own tokens)
and a cancel token. Stateless callers (an OpenAI-style request carries the whole message list) leave
the id out and get the same answer.

The answer comes back as events, in this order: `Waiting` (zero or more: other turns are ahead),
`Started`, `Text` (coalesced pieces), then exactly one of `Finished` (the text, the stats, where it ran,
exact token usage) or `Failed` (the error with its StudioError fields, and the answer so far). `Status`
and `Reloaded` are notices of the engine itself (loading, a restarted engine that loaded the model
again). Every event pickles as it is, so it crosses the chat engine child's pipe intact (`Failed`
through `StudioError.as_dict`).

No onnxruntime here, on purpose: the UI and the server's request parsing use these without a runtime.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from engines.chat.generation import check_messages, check_text, message_text, turn_starts
from engines.chat.types import ChatMessage, ChatOptions, GenerationStats, StopReason
from engines.errors import GenerationError, StudioError, error_from_dict
from engines.types import CancelToken, Placement

__all__ = [
    "ChatEvent",
    "ChatRequest",
    "EventSink",
    "Failed",
    "Finished",
    "Guidance",
    "GuidanceKind",
    "ModelInfo",
    "PromptSize",
    "Reloaded",
    "Started",
    "Status",
    "Text",
    "Turn",
    "Usage",
    "Waiting",
]

MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 256  # characters of one stop string
MAX_GRAMMAR = 256 * 1024  # characters of a schema, regex or grammar


class Turn(StrEnum):
    REPLY = "reply"  # answer the conversation as given: its last message is the user's
    REGENERATE = "regenerate"  # answer the last user message again (what came after it is replaced)
    EDIT = "edit"  # replace the last user message (and its answer) with `text`, and answer it
    CONTINUE = "continue"  # write more of the last answer, from its last token


class GuidanceKind(StrEnum):
    """onnxruntime-genai's constrained decoding (`GeneratorParams.set_guidance(kind, grammar)`)."""

    JSON_SCHEMA = "json_schema"
    REGEX = "regex"
    LARK = "lark_grammar"


@dataclass(frozen=True)
class Guidance:
    """The answer must match `grammar`: a JSON schema (as JSON text), a regular expression or a Lark grammar."""

    kind: GuidanceKind
    grammar: str

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", GuidanceKind(self.kind))
        except ValueError:
            kinds = ", ".join(k.value for k in GuidanceKind)
            raise GenerationError(f"Unknown guidance kind '{self.kind}'.", f"Use one of: {kinds}.") from None
        if not isinstance(self.grammar, str) or not self.grammar.strip():
            raise GenerationError("The guidance grammar is empty.", "Give a JSON schema, a regex or a Lark grammar.")
        if len(self.grammar) > MAX_GRAMMAR:
            raise GenerationError(
                f"The guidance grammar is too long ({len(self.grammar):,} characters; at most {MAX_GRAMMAR:,})."
            )
        check_text(self.grammar, "The guidance grammar")
        if self.kind == GuidanceKind.JSON_SCHEMA:
            try:
                schema = json.loads(self.grammar)
            except (ValueError, RecursionError) as exc:
                raise GenerationError(f"The JSON schema is not valid JSON: {exc}") from None
            if not isinstance(schema, dict | bool):
                raise GenerationError("The JSON schema must be a JSON object.")

    def for_genai(self) -> tuple[str, str]:
        """(kind, grammar) for `set_guidance`. A JSON schema that says nothing about whitespace gets
        compact JSON: with llguidance's default (any whitespace between tokens) the 135M demo model wrote
        spaces and newlines until its length limit (300 tokens, cut off, not valid JSON) where compact
        JSON took 89 tokens and parsed."""
        if self.kind != GuidanceKind.JSON_SCHEMA:
            return self.kind.value, self.grammar
        schema = json.loads(self.grammar)
        if isinstance(schema, dict) and "x-guidance" not in schema:
            schema = {**schema, "x-guidance": {"whitespace_flexible": False}}
        return self.kind.value, json.dumps(schema)

    @classmethod
    def json_schema(cls, schema: dict[str, Any] | bool) -> Guidance:
        return cls(GuidanceKind.JSON_SCHEMA, json.dumps(schema))


@dataclass(frozen=True)
class ChatRequest:
    """One turn for the chat service. Invalid requests are refused here, before they wait for a turn."""

    messages: tuple[ChatMessage, ...] = ()  # user and assistant turns, oldest first
    system_prompt: str = ""  # "" : the model's own default
    options: ChatOptions = field(default_factory=ChatOptions)  # sampling and limits
    stop: tuple[str, ...] = ()  # the answer ends before the first of these (not included in it)
    guidance: Guidance | None = None
    turn: Turn = Turn.REPLY
    text: str = ""  # Turn.EDIT: the new user message
    conversation: int | None = None  # stateful: the engine keeps this conversation's generator
    cancel: CancelToken | None = field(default=None, compare=False, repr=False)
    # A conversation longer than the window: its oldest turns leave the context (the app's chat, which shows
    # it), or (False) it is refused with both counts (a client that sent the whole conversation for one answer)
    drop_oldest: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "turn", Turn(self.turn))
        if not isinstance(self.options, ChatOptions):
            raise GenerationError("The chat request's options are not ChatOptions.")
        check_text(self.system_prompt, "The system prompt")
        for index, message in enumerate(self.messages):
            if message.role not in ("user", "assistant"):
                raise GenerationError(
                    f"Message {index + 1} has the role '{message.role}'; a conversation holds user and assistant "
                    "messages (the system prompt is given apart).",
                )
        check_messages(self.messages)
        if len(self.stop) > MAX_STOP_STRINGS:
            raise GenerationError(f"Too many stop strings ({len(self.stop)}; at most {MAX_STOP_STRINGS}).")
        for stop in self.stop:
            if not isinstance(stop, str) or not stop or len(stop) > MAX_STOP_LENGTH:
                raise GenerationError(f"A stop string must be 1 to {MAX_STOP_LENGTH} characters long.")
            check_text(stop, "A stop string")
        if self.conversation is not None and (isinstance(self.conversation, bool) or not isinstance(
                self.conversation, int)):  # fmt: skip
            raise GenerationError("The conversation id must be a whole number.")
        self.answered()  # the turn fits the conversation (a question to answer, an answer to continue)

    def answered(self) -> tuple[tuple[ChatMessage, ...], str]:
        """The messages the answer is for (ending with the user's question) and, for a continue, the start
        of the answer the model goes on from."""
        messages = self.messages
        if self.turn == Turn.REPLY:
            if not messages or messages[-1].role != "user":
                raise GenerationError("There is no question to answer: the last message is not the user's.",
                                      "End the conversation with a user message.")  # fmt: skip
            message_text(messages[-1].content)
            return messages, ""
        if self.turn == Turn.CONTINUE:
            if not messages or messages[-1].role != "assistant" or not turn_starts(messages):
                raise GenerationError("There is no answer to continue.", "Send a message first.")
            return messages[:-1], messages[-1].content
        starts = turn_starts(messages)
        if self.turn == Turn.REGENERATE:
            if not starts:
                raise GenerationError("There is no answer to regenerate yet.", "Send a message first.")
            return messages[: starts[-1] + 1], ""
        if not starts:
            raise GenerationError("There is no message to edit yet.", "Send a message first.")
        return (*messages[: starts[-1]], ChatMessage("user", message_text(self.text))), ""

    def without_cancel(self) -> ChatRequest:
        """This request as it crosses a process boundary (the cancel token stays with the caller)."""
        return ChatRequest(self.messages, self.system_prompt, self.options, self.stop, self.guidance, self.turn,
                           self.text, self.conversation, drop_oldest=self.drop_oldest)  # fmt: skip

    @classmethod
    def send(cls, history: Sequence[ChatMessage], text: str, **fields: Any) -> ChatRequest:
        """A new user message after `history`."""
        return cls((*history, ChatMessage("user", message_text(text))), **fields)

    @classmethod
    def from_roles(cls, messages: Sequence[tuple[str, str]], **fields: Any) -> ChatRequest:
        """A request from (role, text) pairs as an OpenAI-style client sends them: system messages before
        the first other message become the system prompt (joined by blank lines); a system message later
        on is refused, since the model's template puts the system prompt first."""
        system: list[str] = []
        turns: list[ChatMessage] = []
        for index, (role, text) in enumerate(messages):
            if role in ("system", "developer"):
                if turns:
                    raise GenerationError(
                        f"Message {index + 1} is a system message after the conversation started; the model reads "
                        "the system prompt only before the first message.",
                        "Put every system message first.",
                    )
                system.append(text)
                continue
            turns.append(ChatMessage(role, text))
        if system:
            fields["system_prompt"] = "\n\n".join(system)
        return cls(tuple(turns), **fields)


# --------------------------------------------------------------------------------------------
# What a loaded model is, and the events of one turn
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    """A loaded chat model, as the views, the CLI and the server show it."""

    name: str
    folder: str
    description: str
    ep: str
    device: str
    placement: Placement
    context_length: int
    memory_notice: str = ""
    load_seconds: float = 0.0
    default_options: ChatOptions = field(default_factory=ChatOptions)
    slots: int = 1  # answers the engine makes at once (stepped in turn); more wait in line

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the views and the store (the default options as a dict)."""
        return {
            "name": self.name,
            "folder": self.folder,
            "description": self.description,
            "ep": self.ep,
            "device": self.device,
            "placement": self.placement,
            "context_length": self.context_length,
            "memory_notice": self.memory_notice,
            "load_seconds": self.load_seconds,
            "default_options": asdict(self.default_options),
            "slots": self.slots,
        }


@dataclass(frozen=True)
class PromptSize:
    """A request's prompt as the model reads it: its exact token count (the model's own tokenizer, the whole
    conversation through its chat template) and the window it must fit in with the answer."""

    prompt_tokens: int
    context_length: int

    @property
    def room(self) -> int:
        """Tokens left for the answer (0 or less: the prompt alone fills the window)."""
        return self.context_length - self.prompt_tokens


@dataclass(frozen=True)
class Usage:
    """Exact token counts from the model's own tokenizer."""

    prompt_tokens: int  # the conversation the answer was conditioned on (cached tokens included)
    completion_tokens: int  # every token the model generated (a final end-of-sequence token included)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Waiting:
    """The turn waits: `ahead` turns (the one being answered included) come first."""

    ahead: int


@dataclass(frozen=True)
class Started:
    """The engine took the turn (its prompt is being read)."""

    conversation: int | None
    model: str


@dataclass(frozen=True)
class Text:
    """A piece of the answer (pieces are coalesced to at most ~60 a second)."""

    text: str


@dataclass(frozen=True)
class Finished:
    """The answer: its whole text (a continued answer with its earlier part), stats, placement, usage."""

    text: str
    stats: GenerationStats
    placement: Placement
    model: str
    conversation: int | None = None

    @property
    def stop_reason(self) -> StopReason:
        return self.stats.stop_reason

    @property
    def usage(self) -> Usage:
        return Usage(self.stats.prompt_tokens, self.stats.generated_tokens)

    def as_dict(self) -> dict[str, Any]:
        """The stats with the model's name and the final text (what the views and the store keep)."""
        return self.stats.as_dict() | {"model": self.model, "text": self.text}


@dataclass(frozen=True)
class Failed:
    """The turn failed: the error (with its code, device_lost and native message) and the answer so far."""

    error: StudioError
    partial: str = ""
    stats: GenerationStats | None = None

    def __reduce__(self) -> tuple[Callable[..., Failed], tuple[Any, ...]]:
        # An exception pickles through its constructor's arguments; a StudioError keeps its fields as data.
        return _failed, (self.error.as_dict(), self.partial, self.stats)


def _failed(error: dict[str, object], partial: str, stats: GenerationStats | None) -> Failed:
    return Failed(error_from_dict(error), partial, stats)


@dataclass(frozen=True)
class Status:
    """What the engine is busy with (loading a model, trying one, loading it again), for a status line."""

    text: str


@dataclass(frozen=True)
class Reloaded:
    """The engine was restarted (it crashed or was stopped) and loaded the model again before answering."""

    info: ModelInfo


ChatEvent = Waiting | Started | Text | Finished | Failed | Status | Reloaded
EventSink = Callable[[ChatEvent], None]
