"""The chat engine's work, wherever it runs (in the app's process for tests with fake engines, or in
the chat child process, app/chat_process.py): one model, its conversations, the history a request
seeds, generation options, and the text coalescing that keeps the UI at ~60 updates a second.
Errors cross the process pipe as payloads that keep their fields (code, device_lost, native message).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engines import errors
from engines.errors import GenerationError, StudioError
from engines.types import DeviceChoice, DeviceType

log = logging.getLogger(__name__)

MAX_UI_UPDATES_PER_SECOND = 60
History = list[tuple[str, str]]  # (role, text) of the turns the engine should hold before a request
Loader = Callable[[Path, DeviceChoice], Any]


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


def npu_present() -> bool | None:
    """Whether this machine has a usable NPU (None when discovery itself failed)."""
    try:
        from engines.runtime.devices import discover

        return any(d.usable and d.type == DeviceType.NPU for d in discover().devices)
    except Exception:
        return None


def loading_text(what: str, choice: DeviceChoice, has_npu: Callable[[], bool | None] = npu_present) -> str:
    """The status while a model loads. The first-run compile is promised only where an NPU exists."""
    if choice.wanted_type == DeviceType.NPU:
        found = has_npu()
        if found:
            return f"Preparing {what} for the NPU (the first run compiles it; this can take a while)…"
        if found is False:
            if choice.strict:
                return f"Checking {what} against the NPU (strict: there is no NPU on this machine)…"
            return f"Loading {what} on the CPU (there is no NPU on this machine)…"
    return f"Loading {what} ({choice.describe()})…"


def chat_options(overrides: dict[str, Any]) -> Any:
    from engines.chat.conversation import ChatOptions

    unknown = sorted(set(overrides) - set(ChatOptions.__dataclass_fields__))
    if unknown:
        raise GenerationError(f"Unknown generation setting(s): {', '.join(unknown)}.", "Reset the chat settings.")
    return ChatOptions(**overrides)


def model_info(model: Any, folder: str) -> dict[str, Any]:
    """What the UI and the store need to know about a loaded chat model (plain, picklable data)."""
    defaults = chat_options({})
    name = Path(folder).name
    return {
        "default_options": asdict(defaults),
        "name": name,
        "folder": str(folder),
        "description": model.describe() if hasattr(model, "describe") else name,
        "ep": getattr(model, "ep", ""),
        "device": getattr(model, "device", "") or "",
        "placement": model.placement,
        "context_length": int(model.context_window(defaults)) if hasattr(model, "context_window") else 0,
        "memory_notice": str(getattr(model, "memory_notice", "") or ""),
    }


def seed_history(conversation: Any, history: History) -> None:
    """Give a fresh engine conversation the turns of a stored conversation."""
    from engines.chat.conversation import ChatMessage, StopReason

    messages = [
        ChatMessage(role, text, StopReason.EOS if role == "assistant" else None)
        for role, text in history
        if role in ("user", "assistant")
    ]
    conversation.restore(messages)


def error_payload(exc: BaseException) -> dict[str, object]:
    """A StudioError (or anything else) as plain data that crosses the pipe, failure fields included
    (code, device_lost, device_failure, native message), so the app decides on them, not on words."""
    if isinstance(exc, StudioError):
        return exc.as_dict()
    return StudioError(f"Unexpected error: {type(exc).__name__}: {exc}").as_dict()


def error_from_payload(payload: dict[str, object]) -> StudioError:
    return errors.error_from_dict(payload)


class ChatSession:
    """One chat model and the conversations on it. Used by one thread at a time."""

    def __init__(self, loader: Loader | None = None) -> None:
        self._loader = loader
        self._model: Any = None
        self._key: tuple[str, DeviceChoice] | None = None
        self.info: dict[str, Any] = {}
        self._conversations: dict[int, Any] = {}

    def load(
        self, folder: str, choice: DeviceChoice, on_status: Callable[[str], None], prepared: Any = None
    ) -> dict[str, Any]:
        """`prepared`: engines.chat.prepared.Prepared from the process that started this one, or None."""
        key = (str(Path(folder).resolve()), choice)
        if key == self._key and self._model is not None:
            return self.info
        on_status(loading_text(Path(folder).name, choice))
        self.close()
        started = time.perf_counter()
        if self._loader is not None:
            model = self._loader(Path(folder), choice)
        else:
            import engines

            model = engines.open_chat(folder, choice, prepared=prepared)
        self._model, self._key = model, key
        self.info = model_info(model, folder) | {"load_seconds": time.perf_counter() - started}
        return self.info

    def _conversation(self, conversation_id: int, history: History, system_prompt: str, options: Any) -> Any:
        if self._model is None:
            raise GenerationError("No chat model is loaded.", "Pick a chat model that loads, then send again.")
        conversation = self._conversations.get(conversation_id)
        if conversation is None:
            self.close_conversations()  # one generator (and its KV cache) at a time
            conversation = self._model.new_conversation(system_prompt, options)
            self._conversations[conversation_id] = conversation
        if [(m.role, m.content) for m in conversation.messages] != list(history):
            seed_history(conversation, history)
        if conversation.system_prompt != system_prompt:
            conversation.set_system_prompt(system_prompt)
        conversation.set_options(options)
        return conversation

    def generate(
        self,
        kind: str,
        conversation_id: int,
        text: str,
        history: History,
        system_prompt: str,
        overrides: dict[str, Any],
        *,
        on_started: Callable[[int], None],
        on_text: Callable[[str], None],
        cancel: Any,
    ) -> dict[str, Any]:
        """kind: send | regenerate | edit | continue. Returns GenerationStats.as_dict() + model and the
        final text (for continue: the whole answer, the earlier part included)."""
        options = chat_options(overrides)
        conversation = self._conversation(conversation_id, history, system_prompt, options)
        on_started(conversation_id)
        coalescer = TextCoalescer(on_text)
        try:
            if kind == "send":
                stats = conversation.send(text, coalescer.push, cancel)
            elif kind == "regenerate":
                stats = conversation.regenerate(coalescer.push, cancel)
            elif kind == "edit":
                stats = conversation.edit_last(text, coalescer.push, cancel)
            elif kind == "continue":
                stats = conversation.continue_last(coalescer.push, cancel)
            else:
                raise GenerationError(f"Unknown chat request '{kind}'.")
        finally:
            coalescer.flush()
        data = dict(stats.as_dict())
        data["model"] = self.info.get("name", "")
        data["text"] = conversation.messages[-1].content if conversation.messages else ""
        return data

    def count_tokens(self, text: str) -> int | None:
        """Tokens of `text` with the loaded model's tokenizer (None: no model, or it cannot say)."""
        encode = getattr(self._model, "encode", None)
        return len(encode(text)) if callable(encode) else None

    def forget(self, conversation_id: int) -> None:
        conversation = self._conversations.pop(conversation_id, None)
        close = getattr(conversation, "close", None)
        if callable(close):
            close()

    def close_conversations(self) -> None:
        for conversation_id in list(self._conversations):
            self.forget(conversation_id)

    def close(self) -> None:
        self.close_conversations()
        self._model = None
        self._key = None
