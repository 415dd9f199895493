"""Plain chat data that crosses boundaries (engines -> app -> ui): options, messages, stats.

No onnxruntime here, on purpose: the UI imports these without pulling a runtime in.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from engines.errors import GenerationError
from engines.types import short_ep_name


class StopReason(StrEnum):
    EOS = "eos"  # the model ended its answer
    LENGTH = "length"  # max_new_tokens reached
    CANCELLED = "cancelled"
    CONTEXT = "context"  # the context window is full
    ERROR = "error"


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
        if problems:
            raise GenerationError("Invalid chat options: " + "; ".join(problems) + ".")

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
