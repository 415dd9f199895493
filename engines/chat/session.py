"""The chat engine's work on one loaded model, wherever it runs: in this process (`LocalChat`) or in the
bounded engine child (`BoundedChat`, engines/chat/engine_child.py). Each `ChatRequest` becomes a `Turn`
that the engine steps (engines/chat/scheduler.py steps several in turn): its conversation's generator
(kept per conversation id, so a new turn prefills only its own tokens), the answer streamed as coalesced
`Text` events (at most ~60 a second, what a window can show), and a `Finished` event with the stats, the
placement and the exact token usage.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from engines.chat.generation import Steps
from engines.chat.requests import ChatRequest, EventSink, Finished, ModelInfo, PromptSize, Started, Text
from engines.chat.types import ChatOptions, GenerationStats, StopReason
from engines.errors import GenerationError
from engines.types import DeviceChoice, short_ep_name

__all__ = ["MAX_UI_UPDATES_PER_SECOND", "ChatSession", "Loader", "TextCoalescer", "Turn", "model_info",
           "not_started"]  # fmt: skip

log = logging.getLogger(__name__)

MAX_UI_UPDATES_PER_SECOND = 60
# Generators kept for conversations the caller names (the app's chat window): one, as a window shows one
# conversation at a time; one met again after another prefills once, then appends only its own turns again.
MAX_KEPT_CONVERSATIONS = 1
Loader = Callable[[Path, DeviceChoice], Any]  # a test seam: a model from (folder, choice)


class TextCoalescer:
    """Collects streamed text and emits it at most `rate` times a second (the rest on flush)."""

    def __init__(
        self,
        emit: Callable[[str], None],
        rate: int = MAX_UI_UPDATES_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._emit = emit
        self._interval = 1.0 / rate
        self._clock = clock
        self._pending: list[str] = []
        self._last = float("-inf")
        self.emitted = 0

    def push(self, text: str) -> None:
        self._pending.append(text)
        now = self._clock()
        if now - self._last >= self._interval:
            self._last = now
            self._send()

    def flush(self) -> None:
        if self._pending:
            self._last = self._clock()
            self._send()

    def _send(self) -> None:
        text = "".join(self._pending)
        self._pending.clear()
        if text:
            self.emitted += 1
            self._emit(text)


def model_info(model: Any, folder: str | Path, load_seconds: float = 0.0, slots: int = 1) -> ModelInfo:
    """What the views, the CLI and the server show of a loaded chat model."""
    defaults = ChatOptions()
    name = Path(folder).name
    where = getattr(getattr(model, "folder", None), "path", None) or folder  # the validated folder, when known
    return ModelInfo(
        name=name,
        folder=str(where),
        description=model.describe() if hasattr(model, "describe") else name,
        ep=str(getattr(model, "ep", "") or ""),
        device=str(getattr(model, "device", "") or ""),
        placement=model.placement,
        context_length=int(model.context_window(defaults)) if hasattr(model, "context_window") else 0,
        memory_notice=str(getattr(model, "memory_notice", "") or ""),
        load_seconds=load_seconds,
        default_options=defaults,
        slots=slots,
    )


def not_started(info: ModelInfo, request: ChatRequest) -> Finished:
    """How a turn that generated nothing ends (stopped while it waited): stop reason "cancelled", no new text."""
    from engines.chat.requests import Turn as Kind

    stats = GenerationStats(0, 0, 0, 0.0, 0.0, 0.0, 0.0, info.ep, info.device or short_ep_name(info.ep),
                            StopReason.CANCELLED, context_length=info.context_length)  # fmt: skip
    text = request.messages[-1].content if request.turn == Kind.CONTINUE and request.messages else ""
    return Finished(text, stats, info.placement, info.name, request.conversation)


def load_model(folder: str | Path, choice: DeviceChoice, prepared: Any = None, loader: Loader | None = None) -> Any:
    """The ChatModel for `folder` on `choice` in this process (`loader`: a test's own model)."""
    if loader is not None:
        return loader(Path(folder), choice)
    from engines.chat.loaded import ChatModel

    return ChatModel.load(folder, choice, prepared=prepared)


class Turn:
    """One request being answered: `step()` makes one more token (the first step also reads the prompt)
    and returns the `Finished` event once the answer is complete. A failure raises (a
    GenerationFailedError carries the answer so far and its stats)."""

    def __init__(self, session: ChatSession, request: ChatRequest, sink: EventSink) -> None:
        self.request = request
        self.sink = sink
        self._session = session
        self._conversation: Any = None
        self._steps: Steps[GenerationStats] | None = None
        self._coalescer = TextCoalescer(lambda text: sink(Text(text)))

    @property
    def cancelled(self) -> bool:
        return self.request.cancel is not None and self.request.cancel.cancelled

    def step(self) -> Finished | None:
        if self._steps is None:
            self._conversation = self._session.take(self.request)
            self.sink(Started(self.request.conversation, self._session.info.name))
            messages, prefix = self.request.answered()
            request = self.request
            self._steps = self._conversation.answer_steps(
                messages, self._coalescer.push, request.cancel, prefix=prefix, stop=request.stop,
                guidance=request.guidance, drop_oldest=request.drop_oldest,
            )  # fmt: skip
        try:
            next(self._steps)
            return None
        except StopIteration as done:
            stats: GenerationStats = done.value
        finally:
            steps = self._steps
            if isinstance(steps, Generator) and inspect.getgeneratorstate(steps) == inspect.GEN_CLOSED:  # ended
                self._coalescer.flush()
                self._session.give_back(self.request, self._conversation)
        messages = self._conversation.messages
        text = messages[-1].content if messages else ""
        return Finished(text, stats, self._session.info.placement, self._session.info.name, self.request.conversation)

    def abandon(self) -> None:
        """The engine stops without finishing this answer (it is closing)."""
        if self._steps is not None:
            self._steps.close()
            self._session.give_back(self.request, self._conversation)
            self._steps = None


class ChatSession:
    """One chat model and the generators of its conversations: several answers at once, each with its own
    generator, and as many kept between answers as the engine makes at once (`info.slots`, which the
    memory they hold was budgeted for, engines/chat/slots.py), of which one for a named conversation. A
    kept generator holds its conversation's prompt and answer: the next turn of that conversation,
    stateful (its id) or stateless (a client that sends the whole conversation again), prefills only its
    own new tokens."""

    def __init__(self, model: Any, info: ModelInfo) -> None:
        self.model = model
        self.info = info
        self._kept: list[tuple[int | None, Any]] = []  # idle (conversation id or None: stateless, conversation)
        self._busy: dict[int, int | None] = {}  # the conversation id of each conversation answering now, by id()
        self._answering: dict[int, Any] = {}  # the conversations answering now, by id()

    @classmethod
    def load(
        cls, folder: str | Path, choice: DeviceChoice, prepared: Any = None, loader: Loader | None = None
    ) -> ChatSession:
        from engines.chat.slots import slots_for

        started = time.perf_counter()
        model = load_model(folder, choice, prepared, loader)
        return cls(model, model_info(model, folder, time.perf_counter() - started, slots_for(folder)))

    def begin(self, request: ChatRequest, sink: EventSink) -> Turn:
        """A turn for `request`, to be stepped (`Turn.step`) until it returns its `Finished` event."""
        if self.model is None:
            raise no_model_error()
        return Turn(self, request, sink)

    def answer(self, request: ChatRequest, sink: EventSink) -> Finished:
        """Answer `request` with nothing else stepped in between: `Started` and `Text` events to `sink`; the
        `Finished` event is returned."""
        turn = self.begin(request, sink)
        while True:
            done = turn.step()
            if done is not None:
                return done

    def take(self, request: ChatRequest) -> Any:
        """The conversation that answers `request`: its own (by id); for a stateless request the kept stateless
        one that shares the most of its conversation (its generator holds that prefix); else a new one."""
        key = request.conversation
        if key is not None and key in self._busy.values():
            raise GenerationError("This conversation is busy with another answer.",
                                  "Wait for it to finish or cancel it first.")  # fmt: skip
        candidates = [i for i, (kept, _) in enumerate(self._kept) if kept == key]
        if key is None and candidates:
            # the most shared turns, then the most recent
            candidates = [max(candidates, key=lambda i: (_shared(self._kept[i][1], request), i))]
        conversation = self._kept.pop(candidates[-1])[1] if candidates else None
        if conversation is None:
            conversation = self.model.new_conversation(request.system_prompt, request.options)
        if conversation.system_prompt != request.system_prompt:
            conversation.set_system_prompt(request.system_prompt)
        conversation.set_options(request.options)
        self._busy[id(conversation)] = key
        self._answering[id(conversation)] = conversation
        return conversation

    def give_back(self, request: ChatRequest, conversation: Any) -> None:
        """An answer ended: its conversation is kept (the newest); the oldest kept beyond the limit goes."""
        if conversation is None or self._answering.pop(id(conversation), None) is None:
            return
        key = self._busy.pop(id(conversation))
        if self.model is None:  # closed meanwhile
            _close(conversation)
            return
        if key is not None:
            self.forget(key)
        self._kept.append((key, conversation))
        stateful = [entry for entry in self._kept if entry[0] is not None]
        for entry in stateful[:-MAX_KEPT_CONVERSATIONS]:  # the window's other conversations prefill again, once
            self._kept.remove(entry)
            _close(entry[1])
        while len(self._kept) > max(1, self.info.slots):
            _close(self._kept.pop(0)[1])

    def measure(self, request: ChatRequest) -> PromptSize:
        """The prompt `request` makes, counted with the model's own tokenizer as a new generator reads it,
        and the window it must fit in."""
        if self.model is None:
            raise no_model_error()
        messages, prefix = request.answered()
        tokens = int(self.model.prompt_tokens(request.system_prompt, messages, prefix))
        return PromptSize(tokens, int(self.model.context_window(request.options)))

    def count_tokens(self, text: str) -> int | None:
        """Tokens of `text` with the model's tokenizer, as a message of it would be read (None: it cannot say)."""
        count = getattr(self.model, "count_tokens", None)
        return int(count(text)) if callable(count) else None

    def forget(self, conversation_id: int | None) -> None:
        for kept in [entry for entry in self._kept if entry[0] == conversation_id]:
            self._kept.remove(kept)
            _close(kept[1])

    def close(self) -> None:
        for _, conversation in self._kept:
            _close(conversation)
        self._kept.clear()
        for conversation in list(self._answering.values()):
            _close(conversation)
        self._answering.clear()
        self._busy.clear()
        self.model = None


def _shared(conversation: Any, request: ChatRequest) -> int:
    """How much of `request`'s conversation `conversation` holds: its leading turns in common (and the same
    system prompt counts as one)."""
    held = [(m.role, m.content) for m in conversation.messages]
    asked = [(m.role, m.content) for m in request.messages]
    common = next((i for i, (a, b) in enumerate(zip(held, asked, strict=False)) if a != b), min(len(held), len(asked)))
    return common + (1 if conversation.system_prompt == request.system_prompt else 0)


def _close(conversation: Any) -> None:
    close = getattr(conversation, "close", None)
    if callable(close):
        with contextlib.suppress(GenerationError):  # still answering (a turn being abandoned): its generator goes
            close()


def no_model_error() -> GenerationError:
    return GenerationError("No chat model is loaded.", "Pick a chat model that loads, then send again.")
