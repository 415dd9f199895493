"""Plain chat data that crosses boundaries (engines -> app -> ui): options, messages, stats.

No onnxruntime here, on purpose: the UI imports these without pulling a runtime in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from engines.errors import GenerationError
from engines.types import short_ep_name


class StopReason(StrEnum):
    EOS = "eos"  # the model ended its answer
    STOP = "stop"  # the answer reached one of the request's stop strings
    LENGTH = "length"  # max_new_tokens reached
    CANCELLED = "cancelled"
    CONTEXT = "context"  # the context window is full
    ERROR = "error"


# Prompt-lookup decoding (onnxruntime-genai's n-gram speculative decoding): the last NGRAM - 1 tokens are looked
# up in the conversation so far, and the DRAFT tokens that followed them there are verified by the model in one
# step. Chosen by tests/bench/bench_chat_speculative.py on the demo model (see its header for the sweep).
PROMPT_LOOKUP_NGRAM = 3
PROMPT_LOOKUP_DRAFT = 4

# onnxruntime-genai takes its search options as C ints and doubles: a larger number, or NaN/infinity
# (which no comparison catches), would reach it and fail with binding internals or sample nonsense.
_INT_MAX = 2**31 - 1
_FLOAT_MAX = 1e6


def _whole(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= _INT_MAX


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= _FLOAT_MAX
    )


@dataclass(frozen=True)
class ChatOptions:
    """Sampling and length options. Defaults suit a small (135M) model: greedy, with a repetition
    penalty, since small models repeat themselves without one."""

    max_new_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 40
    repetition_penalty: float = 1.1
    do_sample: bool = False
    seed: int | None = None
    context_window: int | None = None  # tokens a conversation may hold; None: the model's default
    # Prompt-lookup decoding: drafts copied from the conversation, verified by the model, so a greedy answer comes
    # sooner where it repeats its input (edits, summaries, code). It applies to greedy answers without a
    # repetition penalty (`uses_prompt_lookup`); models whose graph computes only the last position's logits
    # cannot verify drafts and decode one token at a time. The answer is the model's greedy answer: token for
    # token the same on a float model; on an int4 one (ONNX Runtime's MatMulNBits sums one row and several rows
    # in different orders, ~1e-6 apart) it can take the other of two nearly tied tokens (margins under ~0.2 seen).
    prompt_lookup: bool = False

    def __post_init__(self) -> None:
        problems = []
        if not _whole(self.max_new_tokens, 1):
            problems.append("max_new_tokens must be at least 1 (a whole number)")
        if not _positive(self.temperature):
            problems.append(f"temperature must be greater than 0 (a finite number up to {_FLOAT_MAX:g})")
        if not _positive(self.top_p) or self.top_p > 1:
            problems.append("top_p must be in (0, 1]")
        if not _whole(self.top_k, 1):
            problems.append(f"top_k must be at least 1 (a whole number up to {_INT_MAX:,})")
        if not _positive(self.repetition_penalty):
            problems.append(
                f"repetition_penalty must be greater than 0 (1.0 means none; a finite number up to {_FLOAT_MAX:g})"
            )
        if self.seed is not None and not _whole(self.seed, 0):
            problems.append(f"seed must be a whole number from 0 to {_INT_MAX:,}")
        if self.context_window is not None and not _whole(self.context_window, 2):
            problems.append("context_window must be at least 2 tokens (a whole number)")
        if not isinstance(self.prompt_lookup, bool):
            problems.append("prompt_lookup must be true or false")
        if problems:
            raise GenerationError("Invalid chat options: " + "; ".join(problems) + ".")

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, Any]) -> ChatOptions:
        """The defaults with `overrides` (a settings dict, the view's generation panel) applied."""
        unknown = sorted(set(overrides) - set(cls.__dataclass_fields__))
        if unknown:
            raise GenerationError(f"Unknown generation setting(s): {', '.join(unknown)}.", "Reset the chat settings.")
        return cls(**overrides)

    def search_options(self, max_length: int) -> dict[str, Any]:
        """Keyword arguments for `og.GeneratorParams.set_search_options`."""
        options: dict[str, Any] = {
            "max_length": max_length,
            "do_sample": self.do_sample,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "repetition_penalty": self.repetition_penalty,
        }
        if self.seed is not None:
            options["random_seed"] = self.seed
        return options

    @property
    def uses_prompt_lookup(self) -> bool:
        """Prompt lookup is asked for and keeps the answer exactly what one token per step gives: greedy, no
        repetition penalty. (With a penalty, onnxruntime-genai 0.18's n-gram path departs from the one-token
        path once a new turn is appended to a generator that already answered; sampled answers would differ
        from the same seed's.)"""
        return self.prompt_lookup and not self.do_sample and self.repetition_penalty == 1.0

    def speculative_options(self) -> dict[str, Any] | None:
        """Keyword arguments for `og.GeneratorParams.set_speculative_options`, or None (one token per step)."""
        if not self.uses_prompt_lookup:
            return None
        return {"ngram_size": PROMPT_LOOKUP_NGRAM, "max_draft_tokens": PROMPT_LOOKUP_DRAFT}

    def same_generator(self, other: ChatOptions) -> bool:
        """True when only max_new_tokens differs: the generator (and its KV cache) can stay."""
        return replace(self, max_new_tokens=other.max_new_tokens) == other


@dataclass(frozen=True)
class GenerationStats:
    prompt_tokens: int  # tokens of the conversation the answer was conditioned on
    prefill_tokens: int  # of those, the ones processed for this turn (the rest were cached)
    generated_tokens: int
    time_to_first_token_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    total_s: float
    ep: str
    device: str
    stop_reason: StopReason
    dropped_turns: int = 0  # oldest turns that left the context for this answer
    fell_back: bool = False
    fallback_reason: str = ""
    context_used: int = 0
    context_length: int = 0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stop_reason"] = self.stop_reason.value
        return data

    def summary(self) -> str:
        """One line for a status bar or the CLI."""
        parts = [
            f"{self.generated_tokens} tokens",
            f"{self.decode_tokens_per_s:.1f} tok/s",
            f"first token {self.time_to_first_token_s * 1000:.0f} ms",
            f"prompt {self.prompt_tokens} ({self.prefill_tokens} new, {self.prefill_tokens_per_s:.0f} tok/s)",
            f"{short_ep_name(self.ep)}",
            f"stop: {self.stop_reason.value}",
            f"context {self.context_used}/{self.context_length}",
        ]
        if self.dropped_turns:
            parts.append(f"{self.dropped_turns} oldest turn(s) dropped")
        if self.fell_back:
            parts.append(f"fell back: {self.fallback_reason}")
        return " · ".join(parts)


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "user" or "assistant"
    content: str
    stop_reason: StopReason | None = None  # answers only


@dataclass(frozen=True)
class Answer:
    tokens: tuple[int, ...]  # generated, including a final end-of-sequence token
    text: str
    stop_reason: StopReason
    first_token_at: float | None
    finished_at: float
