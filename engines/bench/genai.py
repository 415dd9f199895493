"""Chat benchmark: the chat engine against a raw onnxruntime-genai loop, token by token.

Whole answers take about a second, and on a shared machine a second is long enough for a neighbour
to halve the speed of one answer and not the next. So decode speed is measured in *lockstep*: while
the engine answers (`Conversation.send`), each streamed piece of text is followed by one step of a raw
loop on a second generator of the same og.Model, which produces the same greedy tokens. Engine token,
raw token, engine token, ...: both see the same machine at the same moment, and the ratio of their
speeds holds steady to about 1 % where separate answers swing by 30 %.

`RawGenaiLoop` is the raw loop (the library's example loop: GeneratorParams, Generator,
append_tokens, then generate_next_token / get_next_tokens / TokenizerStream.decode); scripts use
`raw_genai_generate` for a whole raw answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engines.bench.data import ChatNumbers
from engines.bench.stats import median, rate_ratio
from engines.errors import CancelledError
from engines.types import CancelToken

Clock = Callable[[], float]


@dataclass(frozen=True)
class RawGeneration:
    """One whole answer from the raw loop. Timings follow the engine's GenerationStats: time to first
    token and prefill from `append_tokens` to the first token, decode over the tokens after it."""

    prompt_tokens: int
    tokens: tuple[int, ...]
    time_to_first_token_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    total_s: float


class RawGenaiLoop:
    """One raw onnxruntime-genai generator, stepped from outside."""

    def __init__(
        self,
        og: Any,
        model: Any,
        tokenizer: Any,
        search_options: Mapping[str, Any],
        eos_token_ids: Iterable[int] = (),
        clock: Clock = time.perf_counter,
    ) -> None:
        params = og.GeneratorParams(model)
        params.set_search_options(**dict(search_options))
        self._generator = og.Generator(model, params)
        self._stream = tokenizer.create_stream()
        self._eos = frozenset(int(t) for t in eos_token_ids)
        self._clock = clock
        self.tokens: list[int] = []
        self.text: list[str] = []
        self.done = False

    def _next(self) -> str:
        """One token: generate, read, decode (the piece may be empty: half a UTF-8 character)."""
        generator = self._generator
        if generator.is_done():
            self.done = True
            return ""
        generator.generate_next_token()
        token = int(generator.get_next_tokens()[0])
        self.tokens.append(token)
        if token in self._eos:
            self.done = True
            return ""
        piece = str(self._stream.decode(token))
        if piece:
            self.text.append(piece)
        return piece

    def prefill(self, prompt_tokens: Sequence[int]) -> float:
        """Append the prompt and produce the first token. Returns the seconds to the first token."""
        started = self._clock()
        self._generator.append_tokens(list(prompt_tokens))
        piece = self._next()
        first = self._clock()
        while not piece and not self.done:  # complete the first piece, untimed (the engine's does too)
            piece = self._next()
        return first - started

    def step_piece(self) -> tuple[float, int]:
        """Generate until the stream yields text (or the answer ends): (seconds, tokens generated)."""
        started = self._clock()
        before = len(self.tokens)
        while not self.done and not self._next():
            pass
        return self._clock() - started, len(self.tokens) - before


def raw_genai_generate(
    og: Any,
    model: Any,
    tokenizer: Any,
    prompt_tokens: Sequence[int],
    search_options: Mapping[str, Any],
    *,
    max_new_tokens: int,
    eos_token_ids: Iterable[int] = (),
    cancel: CancelToken | None = None,
    clock: Clock = time.perf_counter,
) -> RawGeneration:
    """A whole answer from the raw loop, up to `max_new_tokens` or the end of sequence."""
    loop = RawGenaiLoop(og, model, tokenizer, search_options, eos_token_ids, clock)
    started = clock()
    ttft = loop.prefill(prompt_tokens)
    first = started + ttft
    while not loop.done and len(loop.tokens) < max_new_tokens:
        if cancel is not None and cancel.cancelled:
            raise CancelledError("Benchmark cancelled.")
        loop._next()
    finished = clock()
    n = len(loop.tokens)
    decode_s = finished - first
    return RawGeneration(
        prompt_tokens=len(prompt_tokens),
        tokens=tuple(loop.tokens),
        time_to_first_token_s=ttft,
        prefill_tokens_per_s=len(prompt_tokens) / ttft if ttft > 0 else 0.0,
        decode_tokens_per_s=(n - 1) / decode_s if n > 1 and decode_s > 0 else 0.0,
        total_s=finished - started,
    )


def chat_prompt_tokens(tokenizer: Any, prompt: str) -> list[int]:
    """The prompt as the model's own chat template renders it, tokenized (raw genai calls)."""
    messages = json.dumps([{"role": "user", "content": prompt}], ensure_ascii=False)
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    return [int(t) for t in tokenizer.encode(text)]


@dataclass
class LockstepAnswer:
    """One engine answer with a raw loop stepped after each of its pieces."""

    stats: Any  # the engine's GenerationStats
    engine_s: list[float] = field(default_factory=list)  # per piece, from the second piece on
    raw_s: list[float] = field(default_factory=list)  # the raw loop's matching pieces
    tokens: list[int] = field(default_factory=list)  # tokens per matching piece (raw count)
    raw_ttft_s: float | None = None
    raw_prompt_tokens: int = 0
    same_text: bool = True

    def per_token_ms(self) -> list[float]:
        return [s * 1000 / max(1, n) for s, n in zip(self.engine_s, self.tokens, strict=True)]

    def raw_per_token_ms(self) -> list[float]:
        if not self.raw_s:  # the engine was timed alone
            return []
        return [s * 1000 / max(1, n) for s, n in zip(self.raw_s, self.tokens, strict=True)]


def lockstep_answer(
    conversation: Any,
    prompt: str,
    raw: RawGenaiLoop | None,
    raw_prompt: Sequence[int],
    *,
    cancel: CancelToken | None = None,
    clock: Clock = time.perf_counter,
) -> LockstepAnswer:
    """Let the engine answer `prompt` while `raw` (prefilled here, just before) steps once per piece.

    Engine piece k (k >= 2) is timed from the end of the callback of piece k-1 to the start of the
    callback of piece k: exactly the engine's own loop. Raw piece k is stepped inside callback k-1.
    Without `raw`, only the engine is timed."""
    result = LockstepAnswer(stats=None)
    raw_pieces: dict[int, tuple[float, int]] = {}
    engine_text: list[str] = []
    if raw is not None:
        result.raw_ttft_s = raw.prefill(raw_prompt)
        result.raw_prompt_tokens = len(raw_prompt)
    count = 0
    last_end: float | None = None
    engine_pieces: dict[int, float] = {}

    def on_text(piece: str) -> None:
        nonlocal count, last_end
        now = clock()
        count += 1
        engine_text.append(piece)
        if last_end is not None:
            engine_pieces[count] = now - last_end
        if raw is not None and not raw.done and not (cancel is not None and cancel.cancelled):
            raw_pieces[count + 1] = raw.step_piece()
        last_end = clock()

    result.stats = conversation.send(prompt, on_text=on_text, cancel=cancel)
    for k, seconds in sorted(engine_pieces.items()):
        if raw is None:
            result.engine_s.append(seconds)
            result.tokens.append(1)
        elif k in raw_pieces and raw_pieces[k][1] > 0:
            raw_seconds, tokens = raw_pieces[k]
            result.engine_s.append(seconds)
            result.raw_s.append(raw_seconds)
            result.tokens.append(tokens)
    if raw is not None:
        produced = "".join(engine_text)
        result.same_text = "".join(raw.text).startswith(produced) or produced.startswith("".join(raw.text))
    return result


def decode_rate(per_token_ms: Sequence[float]) -> float:
    """Tokens per second at the median time per token: one slow token (a neighbour's burst on a shared
    machine) moves a mean by a percent or two over a short answer, and a median not at all."""
    return 1000 / median(per_token_ms) if per_token_ms and median(per_token_ms) > 0 else 0.0


def chat_numbers(answers: Sequence[LockstepAnswer]) -> ChatNumbers:
    """Medians of the engine's first-token numbers; decode rates at the median time per token over every
    lockstep token of every answer, for the engine and the raw loop alike."""
    stats = [a.stats for a in answers]
    tokens = sum(sum(a.tokens) for a in answers)
    decode = decode_rate([ms for a in answers for ms in a.per_token_ms()])
    numbers: dict[str, Any] = {
        "rounds": len(answers),
        "prompt_tokens": int(stats[-1].prompt_tokens),
        "generated_tokens": int(stats[-1].generated_tokens),
        "time_to_first_token_ms": median([s.time_to_first_token_s * 1000 for s in stats]),
        "prefill_tokens_per_s": median([float(s.prefill_tokens_per_s) for s in stats]),
        "decode_tokens_per_s": decode,
        "decode_tokens": tokens,
    }
    ttfts = [a.raw_ttft_s for a in answers if a.raw_ttft_s is not None]
    raw_decode = decode_rate([ms for a in answers for ms in a.raw_per_token_ms()])
    if ttfts and raw_decode > 0:
        ttft = median(ttfts)
        numbers |= {
            "raw_time_to_first_token_ms": ttft * 1000,
            "raw_prefill_tokens_per_s": answers[-1].raw_prompt_tokens / ttft if ttft > 0 else 0.0,
            "raw_decode_tokens_per_s": raw_decode,
            "decode_ratio": rate_ratio(decode, raw_decode) if decode > 0 else None,
        }
    return ChatNumbers(**numbers)
