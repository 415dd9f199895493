"""Local chat over onnxruntime-genai: multi-turn without re-prefill, UTF-8-safe streaming, cancel, stats.

A `ChatModel` (`engines.chat.loaded`) keeps one model and one tokenizer;
`ChatModel.new_conversation(...)` gives a `Conversation` with its own `og.Generator`.
Each turn renders the whole history with the model's chat template (`apply_chat_template`, never a
hand-written one). When the rendering starts with the text the generator already holds (the previous
prompt plus the answer it generated), only the new text is encoded and appended: a new turn prefills
its own tokens, and the model keeps its own tokens for its past answers. Otherwise (edit, regenerate,
a new system prompt, dropped turns) the whole rendering is encoded and the generator keeps the longest
common prefix (`rewind_to`) and appends the rest. When a turn would not fit
the context window, the oldest turns leave the context (the system prompt stays) and the caller is told.

A conversation is used by one thread at a time (a second caller gets a GenerationError); cancel is a
thread-safe token checked between `generate_next_token` steps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from engines.chat.generation import (
    HeldSequence,
    Steps,
    TextCallback,
    answer_steps,
    check_messages,
    check_text,
    common_prefix_length,
    render_prompt,
    run_steps,
    turn_starts,
)
from engines.chat.model import genai
from engines.chat.requests import ChatRequest, Guidance, Turn
from engines.chat.types import Answer, ChatMessage, ChatOptions, GenerationStats, StopReason
from engines.errors import ContextOverflowError, GenerationError, StudioError
from engines.runtime.fallback import note_failure
from engines.types import CancelToken

if TYPE_CHECKING:
    from engines.chat.loaded import ChatModel

__all__ = ["Conversation", "GenerationFailedError"]

log = logging.getLogger(__name__)


class GenerationFailedError(GenerationError):
    """Generation failed part-way. The conversation keeps the partial answer (stop reason ERROR);
    `partial_text` and `stats` say what was generated before the failure."""

    def __init__(self, message: str, hint: str, partial_text: str, stats: GenerationStats) -> None:
        super().__init__(message, hint)
        self.partial_text = partial_text
        self.stats = stats


class Conversation:
    """A multi-turn chat with one generator. Not for concurrent use: one call at a time."""

    def __init__(self, model: ChatModel, system_prompt: str, options: ChatOptions) -> None:
        check_text(system_prompt, "The system prompt")
        self._model = model
        self._system_prompt = system_prompt
        self._options = options
        self._messages: list[ChatMessage] = []
        self._context_start = 0  # index of the first message still in the context
        self._generator: Any = None
        self._held = HeldSequence()  # what the generator holds
        self._guidance: Guidance | None = None  # the grammar the generator was built with
        self._lock = threading.Lock()

    # -- state -----------------------------------------------------------------------------

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        """The whole transcript, including turns that left the context."""
        return tuple(self._messages)

    @property
    def context_messages(self) -> tuple[ChatMessage, ...]:
        """The messages the model still sees (after the system prompt)."""
        return tuple(self._messages[self._context_start :])

    @property
    def system_prompt(self) -> str:
        return self._system_prompt

    @property
    def options(self) -> ChatOptions:
        return self._options

    @property
    def context_used(self) -> int:
        return len(self._held.tokens)

    @property
    def context_length(self) -> int:
        return self._model.context_window(self._options)

    def set_system_prompt(self, text: str) -> None:
        """Takes effect on the next answer (the history is re-read under the new prompt)."""
        check_text(text, "The system prompt")
        with self._exclusive():
            self._system_prompt = text

    def set_options(self, options: ChatOptions) -> None:
        with self._exclusive():
            if not options.same_generator(self._options):
                self._drop_generator()
            self._options = options

    def reset(self) -> None:
        """Forget the history (the system prompt stays)."""
        with self._exclusive():
            self._messages.clear()
            self._context_start = 0

    def restore(self, messages: Sequence[ChatMessage]) -> None:
        """Resume a stored conversation: its turns become the history, and the next turn prefills them
        once (later turns append only their own tokens again)."""
        for message in messages:
            if message.role not in ("user", "assistant"):
                raise GenerationError(
                    f"A stored message has the role '{message.role}'; only user and assistant turns resume.",
                    "Start a new conversation.",
                )
        with self._exclusive():
            self._drop_generator()
            self._messages = list(messages)
            self._context_start = 0

    def close(self) -> None:
        with self._exclusive():
            self._drop_generator()

    # -- turns -----------------------------------------------------------------------------

    def answer_steps(
        self,
        messages: Sequence[ChatMessage],
        on_text: TextCallback | None = None,
        cancel: CancelToken | None = None,
        *,
        prefix: str = "",
        stop: Sequence[str] = (),
        guidance: Guidance | None = None,
        drop_oldest: bool = True,
    ) -> Steps[GenerationStats]:
        """Answer the last (user) message of `messages`, which become this conversation's transcript, one
        step at a time (the engine steps several answers in turn; `run_steps` runs one to its end): the
        first step reads the prompt and makes the first token, each next one makes one more token. The
        conversation is busy from the first step to the last. The generator keeps what it holds of the
        messages: a transcript that goes on from the last one prefills only its new turn. `prefix`: the
        start of the answer, which the model goes on from (continue). `stop`: the answer ends before the
        first of these. `guidance`: the answer follows that grammar (its generator is built for this answer
        alone). `drop_oldest`: a conversation longer than the window loses its oldest turns (the app's
        chat); False refuses it instead (ContextOverflowError with both counts: a caller that sent the whole
        conversation expects it read whole)."""
        messages = list(messages)
        if not messages or messages[-1].role != "user":
            raise GenerationError("There is no question to answer.", "Send a message first.")
        check_messages(messages)
        with self._exclusive():
            if messages[: self._context_start] != self._messages[: self._context_start]:
                self._context_start = 0  # another conversation: what left the context before says nothing
            return (yield from self._respond(messages, on_text, cancel, prefix=prefix, stop=stop, guidance=guidance,
                                             drop_oldest=drop_oldest))  # fmt: skip

    @property
    def busy(self) -> bool:
        """An answer is being made (its steps are under way)."""
        return self._lock.locked()

    def send(
        self, text: str, on_text: TextCallback | None = None, cancel: CancelToken | None = None
    ) -> GenerationStats:
        """Answer a new user message, streaming the answer's text to `on_text`."""
        return self._turn(Turn.REPLY, text, on_text, cancel)

    def regenerate(self, on_text: TextCallback | None = None, cancel: CancelToken | None = None) -> GenerationStats:
        """Answer the last user message again (the last answer is replaced)."""
        return self._turn(Turn.REGENERATE, "", on_text, cancel)

    def edit_last(
        self, text: str, on_text: TextCallback | None = None, cancel: CancelToken | None = None
    ) -> GenerationStats:
        """Replace the last user message (and its answer) and answer it."""
        return self._turn(Turn.EDIT, text, on_text, cancel)

    def continue_last(self, on_text: TextCallback | None = None, cancel: CancelToken | None = None) -> GenerationStats:
        """Write more of the last answer (one that stopped at the length limit, or was stopped): the
        model goes on from its last token, and the new text is added to that answer."""
        return self._turn(Turn.CONTINUE, "", on_text, cancel)

    # -- internals -------------------------------------------------------------------------

    def _turn(self, turn: Turn, text: str, on_text: TextCallback | None, cancel: CancelToken | None) -> GenerationStats:
        """One turn on this conversation's transcript: what is answered, and from what start, by the same
        rules as a service request of that kind (`ChatRequest.answered`)."""
        with self._exclusive():
            history = (*self._messages, ChatMessage("user", text)) if turn == Turn.REPLY else tuple(self._messages)
            messages, prefix = ChatRequest(history, turn=turn, text=text).answered()
            return run_steps(self._respond(list(messages), on_text, cancel, prefix=prefix))

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise GenerationError(
                "This conversation is busy with another answer.", "Wait for it to finish or cancel it first."
            )
        try:
            yield
        finally:
            self._lock.release()

    def _drop_generator(self) -> None:
        self._generator = None
        self._held = HeldSequence()
        self._guidance = None

    def _encode(self, messages: Sequence[ChatMessage], prefix: str = "") -> tuple[list[int], str]:
        """The prompt's tokens and text (`prefix`: the start of the answer, when continuing one). Where
        the text continues a turn boundary the generator holds, the held tokens are reused as they are
        and only the rest is encoded."""
        literal = getattr(self._model, "literal", None)
        text = render_prompt(self._model.tokenizer, self._system_prompt, messages, literal)
        text += literal(prefix) if literal is not None else prefix
        mark = self._held.longest_mark(text) if self._generator is not None else None
        if mark is None:
            return self._model.encode(text), text
        text_length, token_count = mark
        rest = self._model.encode(text[text_length:], continuation=True) if len(text) > text_length else []
        return self._held.tokens[:token_count] + rest, text

    def _fit(
        self, messages: list[ChatMessage], prefix: str = "", drop_oldest: bool = True
    ) -> tuple[int, list[int], str, int, int]:
        """(first message in context, prompt tokens, prompt text, new-token budget, turns dropped) so
        that the prompt and the answer fit the window. Drops the oldest turns first (unless not
        `drop_oldest`); caps the answer only when the last message is all that is left (or all are kept)."""
        window = self.context_length
        wanted = self._options.max_new_tokens
        start = min(self._context_start, turn_starts(messages)[-1])
        dropped = 0
        while True:
            tokens, text = self._encode(messages[start:], prefix)
            room = window - len(tokens)
            if room >= wanted:
                return start, tokens, text, wanted, dropped
            later = [i for i in turn_starts(messages) if i > start] if drop_oldest else []
            if later:
                start = later[0]
                dropped += 1
                continue
            if room >= 1:
                return start, tokens, text, room, dropped
            if not drop_oldest and len(turn_starts(messages)) > 1:
                raise ContextOverflowError(
                    f"The conversation is too long for the model's context window ({len(tokens)} tokens with the "
                    f"system prompt; the window holds {window}).",
                    "Send fewer or shorter messages.",
                    prompt_tokens=len(tokens), context_length=window,
                )
            raise ContextOverflowError(
                f"This message is too long for the model's context window ({len(tokens)} tokens with the "
                f"system prompt; the window holds {window}).",
                "Shorten the message or the system prompt.",
                prompt_tokens=len(tokens), context_length=window,
            )

    def _sync(self, tokens: list[int], text: str, guidance: Guidance | None = None) -> int:
        """Make the generator hold exactly `tokens`, appending only what it lacks (after a rewind to
        the longest common prefix). Returns how many tokens were prefilled. A guided answer, or the
        first answer after one, gets a new generator: a grammar is part of the generator."""
        generator = self._generator
        held = self._held
        if guidance is not None or self._guidance is not None:
            generator = None
        if generator is not None and generator.token_count() != len(held.tokens):
            log.warning(
                "generator out of step (%d vs %d tokens); rebuilding", generator.token_count(), len(held.tokens)
            )
            generator = None
        # At least one token is always appended: generating right after a rewind needs fresh logits.
        common = min(common_prefix_length(held.tokens, tokens), len(tokens) - 1) if generator is not None else 0
        if generator is None or common == 0:
            self._generator = None
            self._held = held = HeldSequence()
            generator = self._new_generator(guidance)
            common = 0
        elif common < len(held.tokens):
            generator.rewind_to(common)
        held.truncate(common)
        self._generator = generator
        generator.append_tokens(tokens[common:])
        held.set_prompt(tokens, text)
        return len(tokens) - common

    def _new_generator(self, guidance: Guidance | None) -> Any:
        og = genai()
        params = og.GeneratorParams(self._model.model)
        params.set_search_options(**self._options.search_options(self.context_length))
        speculative = self._options.speculative_options() if self._model.prompt_lookup is not False else None
        if speculative is not None:
            params.set_speculative_options(**speculative)
        self._guidance = guidance
        try:
            if guidance is not None:
                params.set_guidance(*guidance.for_genai())
            generator = og.Generator(self._model.model, params)
        except Exception as exc:  # a grammar is compiled when the generator is made
            if speculative is not None and "N-gram decoding" in str(exc):
                # A graph that computes only the last position's logits (a pruned LM head) cannot verify
                # drafts: this model decodes one token at a time, and the log says so once.
                log.info("prompt lookup is off for %s: %s", self._model.folder.name, exc)
                self._model.prompt_lookup = False
                return self._new_generator(guidance)
            if guidance is None:
                raise
            lines = [line.strip() for line in str(exc).removeprefix("Error creating grammar:").splitlines()]
            said = " ".join([lines[0], *(line for line in lines[1:] if line.startswith("error:"))] if lines else [])
            raise GenerationError(
                f"The {guidance.kind.value.replace('_', ' ')} guidance could not be used: {said.strip()[:300]}",
                "Check the schema, regular expression or grammar.",
            ) from exc
        if speculative is not None:
            self._model.prompt_lookup = True
        return generator

    def _respond(
        self,
        messages: list[ChatMessage],
        on_text: TextCallback | None,
        cancel: CancelToken | None,
        prefix: str = "",
        stop: Sequence[str] = (),
        guidance: Guidance | None = None,
        drop_oldest: bool = True,
    ) -> Steps[GenerationStats]:
        started = time.perf_counter()
        model = self._model
        start, prompt, prompt_text, budget, dropped = self._fit(messages, prefix, drop_oldest)
        capped = budget < self._options.max_new_tokens
        if cancel is not None and cancel.cancelled:
            answer = Answer((), "", StopReason.CANCELLED, None, time.perf_counter())
            prefill, prefill_started = 0, answer.finished_at
        else:
            pieces: list[str] = []
            answer_tokens: list[int] = []
            first_token_at: list[float] = []

            def collect(piece: str) -> None:
                if not first_token_at:
                    first_token_at.append(time.perf_counter())
                pieces.append(piece)
                if on_text is not None:
                    on_text(piece)

            prefill, prefill_started = 0, time.perf_counter()
            try:
                prefill = self._sync(prompt, prompt_text, guidance)
                answer = yield from answer_steps(
                    self._generator,
                    model.tokenizer,
                    max_new_tokens=budget,
                    eos_token_ids=model.eos_token_ids,
                    on_text=collect,
                    cancel=cancel,
                    tokens=answer_tokens,
                    stop=stop,
                )
                sequence = [int(t) for t in self._generator.get_sequence(0)]
                generated = sequence[len(prompt) :]
                exact = sequence[: len(prompt)] == prompt and str(model.tokenizer.decode(generated)) == answer.text
            except StudioError:
                raise
            except Exception as exc:
                # The partial answer stays in the transcript (the user saw it); the next turn starts a
                # fresh generator from the rendered conversation.
                self._drop_generator()
                partial = "".join(pieces)
                self._messages = [*messages, ChatMessage("assistant", prefix + partial, StopReason.ERROR)]
                self._context_start = start
                # The one fallback path: a device failure marks the device unusable for this run, and
                # the error keeps its code, device_lost and native message as fields.
                error = note_failure(exc, model.ep).error
                failed = Answer(
                    tuple(answer_tokens),
                    partial,
                    StopReason.ERROR,
                    first_token_at[0] if first_token_at else None,
                    time.perf_counter(),
                )
                stats = _stats(self, prompt, prefill, failed, StopReason.ERROR, dropped, started, prefill_started)
                raise GenerationFailedError(
                    f"Generation failed: {error.message}", error.hint, partial, stats
                ).with_diagnosis(error) from exc
            # A stream holding back an incomplete UTF-8 character leaves the answer's text inexact.
            self._held.add_answer(sequence, answer.text if exact else None)
        reason = answer.stop_reason
        if reason == StopReason.LENGTH and capped:
            reason = StopReason.CONTEXT
        elif reason == StopReason.CONTEXT and self._guidance is not None and self.context_used < self.context_length:
            reason = StopReason.EOS  # the grammar was complete: the generator was done before the window was full
        self._messages = [*messages, ChatMessage("assistant", prefix + answer.text, reason)]
        self._context_start = start
        if dropped:
            log.info("context full: %d oldest turn(s) left the context", dropped)
        return _stats(self, prompt, prefill, answer, reason, dropped, started, prefill_started)


def _stats(
    conversation: Conversation,
    prompt: list[int],
    prefill: int,
    answer: Answer,
    reason: StopReason,
    dropped: int,
    started: float,
    prefill_started: float,
) -> GenerationStats:
    model = conversation._model
    first = answer.first_token_at
    generated = len(answer.tokens)
    prefill_s = (first - prefill_started) if first is not None else 0.0
    decode_s = answer.finished_at - first if first is not None else 0.0
    return GenerationStats(
        prompt_tokens=len(prompt),
        prefill_tokens=prefill,
        generated_tokens=generated,
        time_to_first_token_s=(first - started) if first is not None else 0.0,
        prefill_tokens_per_s=prefill / prefill_s if prefill and prefill_s > 0 else 0.0,
        decode_tokens_per_s=(generated - 1) / decode_s if generated > 1 and decode_s > 0 else 0.0,
        total_s=answer.finished_at - started,
        ep=model.ep,
        device=model.device,
        stop_reason=reason,
        dropped_turns=dropped,
        fell_back=model.plan.fell_back,
        fallback_reason=model.plan.reason,
        context_used=conversation.context_used,
        context_length=conversation.context_length,
    )
