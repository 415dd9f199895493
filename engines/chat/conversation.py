"""Local chat over onnxruntime-genai: multi-turn without re-prefill, UTF-8-safe streaming, cancel, stats.

`ChatModel.load(folder, choice)` validates the folder, configures the providers and keeps one model and
one tokenizer. `ChatModel.new_conversation(...)` gives a `Conversation` with its own `og.Generator`.
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

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engines.chat.model import (
    ModelFolder,
    ProviderPlan,
    chat_devices,
    genai,
    load_native_model,
    plan_providers,
    validate_model_folder,
)
from engines.chat.types import Answer, ChatMessage, ChatOptions, GenerationStats, StopReason
from engines.errors import ContextOverflowError, GenerationError, ModelError, StudioError
from engines.models import trial
from engines.runtime.fallback import note_failure
from engines.types import CancelToken, DeviceChoice, Placement, short_ep_name

__all__ = [
    "Answer",
    "ChatMessage",
    "ChatModel",
    "ChatOptions",
    "Conversation",
    "GenerationFailedError",
    "GenerationStats",
    "HeldSequence",
    "StopReason",
    "common_prefix_length",
    "generate_answer",
    "observe_renders",
    "render_prompt",
    "turn_starts",
]

log = logging.getLogger(__name__)

TextCallback = Callable[[str], None]
Clock = Callable[[], float]


# --------------------------------------------------------------------------------------------
# Plain functions (no state): the generation loop, templating, prefixes
# --------------------------------------------------------------------------------------------


def generate_answer(
    generator: Any,
    tokenizer: Any,
    *,
    max_new_tokens: int,
    eos_token_ids: frozenset[int],
    on_text: TextCallback | None = None,
    cancel: CancelToken | None = None,
    clock: Clock = time.perf_counter,
    tokens: list[int] | None = None,
) -> Answer:
    """Generate up to `max_new_tokens` from a generator that holds the prompt, streaming text through a
    `TokenizerStream` (which holds back incomplete UTF-8 sequences) and checking `cancel` before each
    step. End-of-sequence tokens are not decoded into the text. `tokens`, when given, collects the
    generated ids as they come (the caller still has them if a step raises)."""
    stream = tokenizer.create_stream()
    tokens = tokens if tokens is not None else []
    pieces: list[str] = []
    first: float | None = None
    reason = StopReason.LENGTH
    while True:
        if cancel is not None and cancel.cancelled:
            reason = StopReason.CANCELLED
            break
        if len(tokens) >= max_new_tokens:
            reason = StopReason.LENGTH
            break
        if generator.is_done():
            reason = StopReason.CONTEXT
            break
        generator.generate_next_token()
        token = int(generator.get_next_tokens()[0])
        tokens.append(token)
        if first is None:
            first = clock()
        if token in eos_token_ids:
            reason = StopReason.EOS
            break
        piece = stream.decode(token)
        if piece:
            pieces.append(piece)
            if on_text is not None:
                on_text(piece)
    return Answer(tuple(tokens), "".join(pieces), reason, first, clock())


RenderObserver = Callable[[str, int], None]
_render_observer: list[RenderObserver] = []


def observe_renders(observer: RenderObserver | None) -> None:
    """`observer("rendering", characters)` before and `observer("rendered", 0)` after every render of a
    chat template in this process. The chat engine's child process reports them to its parent, which
    bounds the time a (native, uninterruptible) render of an untrusted template may take."""
    _render_observer[:] = [observer] if observer is not None else []


def render_prompt(tokenizer: Any, system_prompt: str, messages: Sequence[ChatMessage]) -> str:
    """The conversation through the model's own chat template, ready for the assistant's answer."""
    turns = [{"role": "system", "content": system_prompt}] if system_prompt else []
    turns += [{"role": m.role, "content": m.content} for m in messages]
    payload = json.dumps(turns, ensure_ascii=False)
    observer = _render_observer[0] if _render_observer else None
    if observer is not None:
        observer("rendering", len(payload))
    try:
        return str(tokenizer.apply_chat_template(payload, add_generation_prompt=True))
    except Exception as exc:
        if isinstance(exc, MemoryError) or "bad_alloc" in str(exc):
            raise ModelError(
                "The model's chat template ran out of memory while rendering this conversation; this model "
                "folder is unsafe.",
                "Use a model from a source you trust; its template allocates without bound.",
            ) from exc
        if "chat template" in str(exc).lower():
            raise ModelError(
                "The model has no usable chat template.",
                "Add the model's chat_template.jinja to its folder; NPU Studio does not guess templates.",
            ) from exc
        raise GenerationError(f"The chat template failed on this conversation: {exc}") from exc
    finally:
        if observer is not None:
            observer("rendered", 0)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def turn_starts(messages: Sequence[ChatMessage]) -> list[int]:
    """Indexes of the user messages: where each turn starts."""
    return [i for i, m in enumerate(messages) if m.role == "user"]


# --------------------------------------------------------------------------------------------
# Model and conversation
# --------------------------------------------------------------------------------------------


class GenerationFailedError(GenerationError):
    """Generation failed part-way. The conversation keeps the partial answer (stop reason ERROR);
    `partial_text` and `stats` say what was generated before the failure."""

    def __init__(self, message: str, hint: str, partial_text: str, stats: GenerationStats) -> None:
        super().__init__(message, hint)
        self.partial_text = partial_text
        self.stats = stats


class ChatModel:
    """One onnxruntime-genai model and tokenizer, loaded once; conversations share them."""

    def __init__(self, folder: ModelFolder, plan: ProviderPlan, model: Any, tokenizer: Any) -> None:
        self.folder = folder
        self.plan = plan
        self.model = model
        self.tokenizer = tokenizer
        self.device = str(getattr(model, "device_type", "") or "")
        eos = {int(t) for t in getattr(tokenizer, "eos_token_ids", ()) or ()}
        self.eos_token_ids = frozenset(eos)
        self._bos = _adds_bos(tokenizer)
        self.memory_notice = ""  # set when the model may not fit comfortably in free RAM

    def encode(self, text: str, continuation: bool = False) -> list[int]:
        """Token ids of `text`; a continuation gets no beginning-of-sequence token."""
        # Characters the tokenizer cannot map come back as -1, which the model would read as its last
        # vocabulary entry (ONNX Gather wraps negative indices): leave them out instead.
        ids = [int(t) for t in self.tokenizer.encode(text) if t >= 0]
        if continuation and self._bos is not None and ids[:1] == [self._bos]:
            ids = ids[1:]
        return ids

    @classmethod
    def load(
        cls,
        folder: str | Path,
        choice: DeviceChoice | None = None,
        *,
        available: frozenset[str] | None = None,
        check_memory: bool = True,
    ) -> ChatModel:
        """Validate the folder, check it fits in memory, configure the providers, load model and tokenizer,
        check the template. A model that cannot fit in this machine's RAM is refused before loading."""
        from engines.models.library import MAY_BE_SLOW, WONT_FIT, estimate_fit

        choice = choice or DeviceChoice()
        info = validate_model_folder(folder)
        fit = estimate_fit(Path(info.path))
        if check_memory and fit.verdict == WONT_FIT:
            raise ModelError(
                f"{info.name} needs more memory than this machine has: {fit.message()}",
                "Choose a smaller model (an int4 variant) or a shorter context.",
            )
        # Before onnxruntime-genai runs the model or its template in this process: once, in a bounded child.
        trial.ensure_tried(info.path, trial.CHAT)
        plan = plan_providers(info, choice, chat_devices(available))
        og = genai()
        model, plan = load_native_model(og, info, plan, strict=choice.strict)
        try:
            tokenizer = og.Tokenizer(model)
        except Exception as exc:
            raise ModelError(
                f"The tokenizer in {info.path} could not be loaded: {exc}",
                "Copy tokenizer.json and tokenizer_config.json from the model's source again.",
            ) from exc
        loaded = cls(info, plan, model, tokenizer)
        loaded.memory_notice = fit.message() if fit.verdict == MAY_BE_SLOW else ""
        render_prompt(tokenizer, "", [ChatMessage("user", "Hi")])  # a missing template fails here, not mid-chat
        if plan.fell_back:
            log.info("chat model %s runs on the CPU: %s", info.name, plan.reason)
        log.info("loaded chat model %s on %s (%s)", info.name, plan.ep, loaded.device)
        return loaded

    @property
    def ep(self) -> str:
        return self.plan.ep

    @property
    def placement(self) -> Placement:
        return self.plan.placement()

    def context_window(self, options: ChatOptions) -> int:
        wanted = options.context_window or self.folder.default_max_length
        return min(wanted, self.folder.context_length)

    def new_conversation(self, system_prompt: str = "", options: ChatOptions | None = None) -> Conversation:
        return Conversation(self, system_prompt, options or ChatOptions())

    def describe(self) -> str:
        where = short_ep_name(self.ep)
        if self.plan.fell_back:
            where += f" (fell back: {self.plan.reason})"
        return f"{self.folder.name} on {where}"


def _adds_bos(tokenizer: Any) -> int | None:
    """The BOS id when the tokenizer puts one in front of any text it encodes, else None."""
    bos = getattr(tokenizer, "bos_token_id", None)
    try:
        probe = [int(t) for t in tokenizer.encode("a")]
    except Exception:
        return None
    return int(bos) if bos is not None and probe[:1] == [int(bos)] else None


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

    def send(
        self, text: str, on_text: TextCallback | None = None, cancel: CancelToken | None = None
    ) -> GenerationStats:
        """Answer a new user message, streaming the answer's text to `on_text`."""
        with self._exclusive():
            return self._respond([*self._messages, ChatMessage("user", _message_text(text))], on_text, cancel)

    def regenerate(self, on_text: TextCallback | None = None, cancel: CancelToken | None = None) -> GenerationStats:
        """Answer the last user message again (the last answer is replaced)."""
        with self._exclusive():
            starts = turn_starts(self._messages)
            if not starts:
                raise GenerationError("There is no answer to regenerate yet.", "Send a message first.")
            return self._respond(self._messages[: starts[-1] + 1], on_text, cancel)

    def edit_last(
        self, text: str, on_text: TextCallback | None = None, cancel: CancelToken | None = None
    ) -> GenerationStats:
        """Replace the last user message (and its answer) and answer it."""
        with self._exclusive():
            starts = turn_starts(self._messages)
            if not starts:
                raise GenerationError("There is no message to edit yet.", "Send a message first.")
            kept = self._messages[: starts[-1]]
            return self._respond([*kept, ChatMessage("user", _message_text(text))], on_text, cancel)

    def continue_last(self, on_text: TextCallback | None = None, cancel: CancelToken | None = None) -> GenerationStats:
        """Write more of the last answer (one that stopped at the length limit, or was stopped): the
        model goes on from its last token, and the new text is added to that answer."""
        with self._exclusive():
            if not self._messages or self._messages[-1].role != "assistant":
                raise GenerationError("There is no answer to continue.", "Send a message first.")
            return self._respond(self._messages[:-1], on_text, cancel, prefix=self._messages[-1].content)

    # -- internals -------------------------------------------------------------------------

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

    def _encode(self, messages: Sequence[ChatMessage], prefix: str = "") -> tuple[list[int], str]:
        """The prompt's tokens and text (`prefix`: the start of the answer, when continuing one). Where
        the text continues a turn boundary the generator holds, the held tokens are reused as they are
        and only the rest is encoded."""
        text = render_prompt(self._model.tokenizer, self._system_prompt, messages) + prefix
        mark = self._held.longest_mark(text) if self._generator is not None else None
        if mark is None:
            return self._model.encode(text), text
        text_length, token_count = mark
        rest = self._model.encode(text[text_length:], continuation=True) if len(text) > text_length else []
        return self._held.tokens[:token_count] + rest, text

    def _fit(self, messages: list[ChatMessage], prefix: str = "") -> tuple[int, list[int], str, int, int]:
        """(first message in context, prompt tokens, prompt text, new-token budget, turns dropped) so
        that the prompt and the answer fit the window. Drops the oldest turns first; caps the answer
        only when the last message is all that is left."""
        window = self.context_length
        wanted = self._options.max_new_tokens
        start = min(self._context_start, turn_starts(messages)[-1])
        dropped = 0
        while True:
            tokens, text = self._encode(messages[start:], prefix)
            room = window - len(tokens)
            if room >= wanted:
                return start, tokens, text, wanted, dropped
            later = [i for i in turn_starts(messages) if i > start]
            if later:
                start = later[0]
                dropped += 1
                continue
            if room >= 1:
                return start, tokens, text, room, dropped
            raise ContextOverflowError(
                f"This message is too long for the model's context window ({len(tokens)} tokens with the "
                f"system prompt; the window holds {window}).",
                "Shorten the message or the system prompt.",
            )

    def _sync(self, tokens: list[int], text: str) -> int:
        """Make the generator hold exactly `tokens`, appending only what it lacks (after a rewind to
        the longest common prefix). Returns how many tokens were prefilled."""
        generator = self._generator
        held = self._held
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
            og = genai()
            params = og.GeneratorParams(self._model.model)
            params.set_search_options(**self._options.search_options(self.context_length))
            generator = og.Generator(self._model.model, params)
            common = 0
        elif common < len(held.tokens):
            generator.rewind_to(common)
        held.truncate(common)
        self._generator = generator
        generator.append_tokens(tokens[common:])
        held.set_prompt(tokens, text)
        return len(tokens) - common

    def _respond(
        self,
        messages: list[ChatMessage],
        on_text: TextCallback | None,
        cancel: CancelToken | None,
        prefix: str = "",
    ) -> GenerationStats:
        started = time.perf_counter()
        model = self._model
        start, prompt, prompt_text, budget, dropped = self._fit(messages, prefix)
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
                prefill = self._sync(prompt, prompt_text)
                answer = generate_answer(
                    self._generator,
                    model.tokenizer,
                    max_new_tokens=budget,
                    eos_token_ids=model.eos_token_ids,
                    on_text=collect,
                    cancel=cancel,
                    tokens=answer_tokens,
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
        self._messages = [*messages, ChatMessage("assistant", prefix + answer.text, reason)]
        self._context_start = start
        if dropped:
            log.info("context full: %d oldest turn(s) left the context", dropped)
        return _stats(self, prompt, prefill, answer, reason, dropped, started, prefill_started)


class HeldSequence:
    """What a generator holds: its tokens, and marks (text length, token count) at turn boundaries
    where a prefix of the held text is exactly a prefix of the tokens."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.text = ""
        self.marks: list[tuple[int, int]] = []

    def longest_mark(self, text: str) -> tuple[int, int] | None:
        """The last mark whose text `text` starts with."""
        for text_length, token_count in reversed(self.marks):
            if text.startswith(self.text[:text_length]):
                return text_length, token_count
        return None

    def truncate(self, token_count: int) -> None:
        """Keep the first `token_count` tokens (after a rewind) and the marks within them."""
        self.tokens = self.tokens[:token_count]
        self.marks = [m for m in self.marks if m[1] <= token_count]
        self.text = self.text[: self.marks[-1][0]] if self.marks else ""

    def set_prompt(self, tokens: list[int], text: str) -> None:
        """The generator now holds `tokens`, which stand for `text`."""
        self.marks = [m for m in self.marks if text.startswith(self.text[: m[0]])]
        self.tokens = list(tokens)
        self.text = text
        self.marks.append((len(text), len(tokens)))

    def add_answer(self, sequence: list[int], answer_text: str | None) -> None:
        """The sequence after an answer; `answer_text` None when the text is not known exactly."""
        self.tokens = list(sequence)
        if answer_text is not None:
            self.text += answer_text
            self.marks.append((len(self.text), len(self.tokens)))


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


def _message_text(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise GenerationError("The message is empty.", "Type something to send.")
    check_text(text, "The message")
    return text


def check_text(text: str, what: str) -> None:
    """Refuse text the tokenizer would misread: a NUL ends a C string early (the model would silently
    see only what comes before it), and a lone surrogate is a byte that was not UTF-8 (from a terminal
    or file in another encoding), which the tokenizer cannot take at all."""
    nul = text.find("\x00")
    if nul >= 0:
        raise GenerationError(
            f"{what} contains a NUL character (at character {nul + 1}); the model would read only the text "
            "before it.",
            "Remove the NUL character and send it again.",
        )
    for index, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            shown = f"byte 0x{ord(char) - 0xDC00:02x}" if "\udc80" <= char <= "\udcff" else f"U+{ord(char):04X}"
            raise GenerationError(
                f"{what} is not valid UTF-8 text ({shown} at character {index + 1}).",
                "Send it as UTF-8: check the encoding of the terminal or file it came from.",
            )
