"""Fake engines at the host boundary: scripted chat answers and a deterministic classifier."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.types import CPU_EP, CancelToken, Classification, ClassScore, DeviceChoice, Placement


@dataclass(frozen=True)
class FakeStats:
    generated_tokens: int
    stop_reason: str
    context_used: int
    context_length: int = 2048
    ep: str = CPU_EP
    device: str = "CPU"

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": 10,
            "prefill_tokens": 10,
            "generated_tokens": self.generated_tokens,
            "time_to_first_token_s": 0.05,
            "prefill_tokens_per_s": 200.0,
            "decode_tokens_per_s": 100.0,
            "total_s": 0.2,
            "ep": self.ep,
            "device": self.device,
            "stop_reason": self.stop_reason,
            "dropped_turns": 0,
            "fell_back": False,
            "fallback_reason": "",
            "context_used": self.context_used,
            "context_length": self.context_length,
        }


@dataclass(frozen=True)
class FakeMessage:
    role: str
    content: str


@dataclass
class FakeConversation:
    """Answers with a scripted list of pieces, one every `delay` seconds, honouring cancel."""

    model: FakeChatModel
    system_prompt: str
    options: Any
    messages: list[FakeMessage] = field(default_factory=list)
    closed: bool = False

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text

    def set_options(self, options: Any) -> None:
        self.options = options

    def close(self) -> None:
        self.closed = True

    def _answer(
        self, on_text: Callable[[str], None] | None, cancel: CancelToken | None
    ) -> Generator[None, None, FakeStats]:
        if self.model.error is not None:
            raise self.model.error
        pieces: list[str] = []
        reason = self.model.stop_reason
        for piece in self.model.pieces:
            if cancel is not None and cancel.cancelled:
                reason = "cancelled"
                break
            if self.model.delay:
                time.sleep(self.model.delay)
            pieces.append(piece)
            if on_text is not None:
                on_text(piece)
            yield
        self.messages.append(FakeMessage("assistant", "".join(pieces)))
        return FakeStats(len(pieces), reason, context_used=sum(len(m.content) for m in self.messages))

    def answer_steps(
        self,
        messages: list[Any],
        on_text: Any = None,
        cancel: CancelToken | None = None,
        *,
        prefix: str = "",
        stop: Any = (),
        guidance: Any = None,
        drop_oldest: bool = True,
    ) -> Generator[None, None, FakeStats]:
        """What the chat service asks of a conversation, a piece per step: answer the last user message of
        `messages` (`prefix`: go on from the answer's start). The request is logged as the turn it is, told
        apart from the transcript this conversation held before: send, regenerate, edit or continue."""
        before = [(m.role, m.content) for m in self.messages]
        asked = [(m.role, m.content) for m in messages]
        if prefix:
            kind, text = "continue", ""
        elif before and len(asked) <= len(before) and asked == before[: len(asked)]:
            kind, text = "regenerate", ""
        elif before and len(asked) <= len(before) and asked[:-1] == before[: len(asked) - 1]:
            kind, text = "edit", asked[-1][1]
        else:
            kind, text = "send", asked[-1][1]
        self.model.requests.append((kind, text, asked[:-1] if kind in ("send", "edit") else before))
        self.model.answered += 1
        self.messages = [FakeMessage(role, content) for role, content in asked]
        stats = yield from self._answer(on_text, cancel)
        if prefix:
            self.messages[-1] = FakeMessage("assistant", prefix + self.messages[-1].content)
        return stats


@dataclass
class FakeChatModel:
    pieces: list[str] = field(default_factory=lambda: ["Hello", ", ", "**world**", "!"])
    delay: float = 0.0
    error: BaseException | None = None
    stop_reason: str = "eos"  # "length": every answer ends at the length limit
    requests: list[tuple[str, str, list[tuple[str, str]]]] = field(default_factory=list)
    answered: int = 0
    conversations: int = 0  # conversations made (each with its own generator in a real model)
    ep: str = CPU_EP
    device: str = "CPU"

    @property
    def placement(self) -> Placement:
        return Placement("Automatic", (CPU_EP,), (CPU_EP,))

    def context_window(self, options: Any) -> int:
        return 2048

    def prompt_tokens(self, system_prompt: str, messages: list[Any], prefix: str = "") -> int:
        """A stand-in count: one token per word of the prompt."""
        return len(" ".join([system_prompt, *(m.content for m in messages), prefix]).split())

    def describe(self) -> str:
        return "fake on CPU"

    def new_conversation(self, system_prompt: str = "", options: Any = None) -> FakeConversation:
        self.conversations += 1
        return FakeConversation(self, system_prompt, options)


class FakeClassifier:
    """Slow, deterministic classifier for tests that need a batch to be in progress."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.placement = Placement("Automatic", (CPU_EP,), (CPU_EP,), ((CPU_EP, 12),))
        self.calls = 0

    def _result(self, path: str) -> Classification:
        return Classification(
            str(path), (ClassScore(0, "tabby", 0.9), ClassScore(1, "lynx", 0.1)), 1.0, 1.0, self.placement
        )

    def classify(self, source: Any, k: int = 5) -> Classification:
        self.calls += 1
        return self._result("<bytes>" if isinstance(source, bytes) else str(source))

    def classify_many(
        self,
        paths: list[str],
        k: int = 5,
        cancel: CancelToken | None = None,
        on_result: Any = None,
        on_index: Any = None,
    ) -> list[Classification]:
        from engines.errors import CancelledError

        out = []
        for path in paths:
            if cancel is not None and cancel.cancelled:
                raise CancelledError("Classification cancelled.")
            if self.delay:
                time.sleep(self.delay)
            self.calls += 1
            result = self._result(path)
            if on_result is not None:
                on_result(result)
            if on_index is not None:
                on_index(len(out), result)
            out.append(result)
        return out


def loader_for(model: FakeChatModel) -> Callable[[Path, DeviceChoice], FakeChatModel]:
    def load(folder: Path, choice: DeviceChoice) -> FakeChatModel:
        return model

    return load


def opener_for(make: Callable[[Path, DeviceChoice], Any]) -> Callable[[Path, DeviceChoice, Callable[[str], None]], Any]:
    """A classifier opener (app.hosts.vision.ClassifierOpener) over a fake engine made per device choice,
    through the engines' own fallback path (engines.api.classifier_over), as the real opener is."""

    def open_classifier(folder: Path, choice: DeviceChoice, on_progress: Callable[[str], None]) -> Any:
        from engines.api import classifier_over
        from engines.models.lookup import locate_model

        return classifier_over(lambda where: make(folder, where), choice, locate_model(folder))

    return open_classifier


def shown_scores(bars: Any) -> list[tuple[str, str]]:
    """(label, percentage) of each row a ProbabilityBars shows: the whole labels, as the model gave them."""
    return [(lbl.full_text(), val.text()) for lbl, val in zip(bars.labels, bars.values, strict=True) if val.text()]


def shows_photo(drop_zone: Any) -> bool:
    """Whether a DropZone shows a photo (not its 56 px placeholder glyph)."""
    shown = drop_zone.image.pixmap()
    return shown is not None and not shown.isNull() and max(shown.width(), shown.height()) > 56
