"""The stateless parts of a chat turn: the generation loop, the chat template, token prefixes, what a
generator holds, and the check that refuses text the tokenizer would misread.

`engines.chat.conversation` builds multi-turn conversations on these; they hold no model and no state
of their own, so they are tested with scripted generators and tokenizers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar, cast

from engines.chat.types import Answer, ChatMessage, StopReason
from engines.errors import GenerationError, ModelError
from engines.types import CancelToken

__all__ = [
    "Clock",
    "HeldSequence",
    "Steps",
    "StopScanner",
    "TextCallback",
    "answer_steps",
    "check_messages",
    "check_text",
    "common_prefix_length",
    "message_text",
    "observe_renders",
    "render_prompt",
    "run_steps",
    "turn_starts",
]

TextCallback = Callable[[str], None]
Clock = Callable[[], float]
T = TypeVar("T")


Steps = Generator[None, None, T]  # one step per next(): a token (the first also prefills); the value at the end


def run_steps(steps: Generator[None, None, T]) -> T:
    """Drive `steps` to its end and return its value (one caller alone: no other turn in between)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(T, done.value)


def answer_steps(
    generator: Any,
    tokenizer: Any,
    *,
    max_new_tokens: int,
    eos_token_ids: frozenset[int],
    on_text: TextCallback | None = None,
    cancel: CancelToken | None = None,
    clock: Clock = time.perf_counter,
    tokens: list[int] | None = None,
    stop: Sequence[str] = (),
) -> Steps[Answer]:
    """Generate up to `max_new_tokens` from a generator that holds the prompt, one token per step (the
    engine steps other answers in between), streaming text through a `TokenizerStream` (which holds back
    incomplete UTF-8 sequences) and checking `cancel` before each token. End-of-sequence tokens are not
    decoded into the text. `tokens`, when given, collects the generated ids as they come (the caller
    still has them if a step raises). The answer ends before the first of the `stop` strings (text that
    may begin one is held back until it is known not to)."""
    stream = tokenizer.create_stream()
    scanner = StopScanner(stop)
    tokens = tokens if tokens is not None else []
    pieces: list[str] = []
    first: float | None = None
    reason = StopReason.LENGTH

    def emit(piece: str) -> None:
        if piece:
            pieces.append(piece)
            if on_text is not None:
                on_text(piece)

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
            emit(scanner.push(piece))
            if scanner.stopped:
                reason = StopReason.STOP
                break
        yield
    emit(scanner.flush())
    return Answer(tuple(tokens), "".join(pieces), reason, first, clock())


class StopScanner:
    """Finds the first stop string in streamed text. `push` returns the text that is safe to show now:
    everything before a stop string, less a tail that may still become one."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def push(self, piece: str) -> str:
        if not self._stops or self.stopped:
            return piece if not self.stopped else ""
        text = self._held + piece
        found = [i for i in (text.find(s) for s in self._stops) if i >= 0]
        if found:
            self.stopped = True
            self._held = ""
            return text[: min(found)]
        keep = max((_overlap(text, stop) for stop in self._stops), default=0)
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What was held back, once the answer ended without a stop string."""
        held, self._held = self._held, ""
        return held


def _overlap(text: str, stop: str) -> int:
    """The length of the longest end of `text` that is a beginning of `stop` (shorter than `stop`)."""
    for length in range(min(len(stop) - 1, len(text)), 0, -1):
        if text.endswith(stop[:length]):
            return length
    return 0


RenderObserver = Callable[[str, int], None]
_render_observer: list[RenderObserver] = []


def observe_renders(observer: RenderObserver | None) -> None:
    """`observer("rendering", characters)` before and `observer("rendered", 0)` after every render of a
    chat template in this process. The chat engine's child process reports them to its parent, which
    bounds the time a (native, uninterruptible) render of an untrusted template may take."""
    _render_observer[:] = [observer] if observer is not None else []


def render_prompt(
    tokenizer: Any,
    system_prompt: str,
    messages: Sequence[ChatMessage],
    literal: Callable[[str], str] | None = None,
) -> str:
    """The conversation through the model's own chat template, ready for the assistant's answer.
    `literal` keeps each message's text from forming control tokens (engines/chat/control_tokens.py)."""
    text = literal or (lambda content: content)
    turns = [{"role": "system", "content": text(system_prompt)}] if system_prompt else []
    turns += [{"role": m.role, "content": text(m.content)} for m in messages]
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


def message_text(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise GenerationError("The message is empty.", "Type something to send.")
    check_text(text, "The message")
    return text


def check_messages(messages: Sequence[ChatMessage]) -> None:
    """Every message's text passes `check_text` (the last one is "the message" the user just wrote)."""
    for index, message in enumerate(messages):
        last = index == len(messages) - 1
        check_text(message.content, "The message" if last else f"Message {index + 1} of the conversation")


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
