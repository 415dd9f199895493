"""`npu-studio chat` with a model that is not ours: the engine runs in the app's chat child process.

The model's chat template renders every turn natively, and a hostile one may crash, hang or explode only
on some input (a word in a message, a long history). In the child (app/chat_process.py, app/chat_bounds.py)
a crash is an error here, a render is bounded in time and memory, and Ctrl+C stops an answer within one
token and a render at once. `RemoteChat` and `RemoteConversation` give the CLI the same calls it makes on
an in-process `ChatModel` and `Conversation`; the history lives here and is sent with each request.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.chat_process import ChatProcess, History, error_from_payload
from engines.chat.types import ChatMessage, ChatOptions, GenerationStats, StopReason
from engines.errors import CancelledError, GenerationError
from engines.types import CancelToken, DeviceChoice, Placement, short_ep_name

CONVERSATION_ID = 1
TextCallback = Any  # Callable[[str], None] | None


class _Folder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name


class _Plan:
    def __init__(self, placement: Placement) -> None:
        self.fell_back = bool(getattr(placement, "fell_back", False))
        self.reason = str(getattr(placement, "reason", "") or "")


class RemoteChat:
    """A chat model loaded in the chat child process (the calls the CLI makes on a ChatModel)."""

    def __init__(self, folder: Path, choice: DeviceChoice) -> None:
        self.engine = ChatProcess()
        try:
            info = self.request(("load", str(folder), choice), None)
        except BaseException:
            self.engine.kill()
            raise
        self.folder = _Folder(Path(folder))
        self.placement: Placement = info["placement"]
        self.plan = _Plan(self.placement)
        self.memory_notice = str(info.get("memory_notice", "") or "")
        self.ep = str(info.get("ep", "") or "")
        self._description = str(info.get("description", "") or self.folder.name)

    def describe(self) -> str:
        return self._description

    def new_conversation(self, system_prompt: str = "", options: ChatOptions | None = None) -> RemoteConversation:
        return RemoteConversation(self, system_prompt, options or ChatOptions())

    def request(self, message: tuple[Any, ...], on_text: TextCallback, cancel: CancelToken | None = None) -> Any:
        def on_event(event: tuple[Any, ...]) -> None:
            if event[0] == "text" and on_text is not None:
                on_text(event[1])

        kind, *payload = self.engine.request(message, on_event, cancel, lambda: False)
        if kind == "failed":
            raise error_from_payload(payload[0])
        return payload[0] if payload else None

    def close(self) -> None:
        self.engine.close()


class RemoteConversation:
    """A conversation whose turns are answered in the child (the calls the CLI makes on a Conversation)."""

    def __init__(self, model: RemoteChat, system_prompt: str, options: ChatOptions) -> None:
        self._model = model
        self._system_prompt = system_prompt
        self._overrides = {k: v for k, v in asdict(options).items() if v != getattr(ChatOptions(), k)}
        self._messages: list[ChatMessage] = []

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        return tuple(self._messages)

    def set_system_prompt(self, text: str) -> None:
        self._system_prompt = text

    def reset(self) -> None:
        self._messages.clear()

    def send(self, text: str, on_text: TextCallback = None, cancel: CancelToken | None = None) -> GenerationStats:
        return self._ask("send", text, self._messages, [*self._messages, ChatMessage("user", text)], on_text, cancel)

    def regenerate(self, on_text: TextCallback = None, cancel: CancelToken | None = None) -> GenerationStats:
        users = [i for i, m in enumerate(self._messages) if m.role == "user"]
        if not users:
            raise GenerationError("There is no answer to regenerate yet.", "Send a message first.")
        # The whole history goes along, so the engine's conversation matches it and rewinds to the question.
        return self._ask("regenerate", "", self._messages, self._messages[: users[-1] + 1], on_text, cancel)

    def _ask(
        self,
        kind: str,
        text: str,
        history_now: list[ChatMessage],
        asked: list[ChatMessage],
        on_text: TextCallback,
        cancel: CancelToken | None,
    ) -> GenerationStats:
        history: History = [(m.role, m.content) for m in history_now]
        message = ("generate", kind, CONVERSATION_ID, text, history, self._system_prompt, dict(self._overrides))
        try:
            data = self._model.request(message, on_text, cancel)
        except CancelledError:
            if cancel is None or not cancel.cancelled:
                raise
            data = None  # Ctrl+C during a render: the engine was stopped
        if data is None:  # the question leaves the history too: its render is what did not finish
            self._messages = list(history_now)
            return _cancelled_stats(self._model)
        stats = _stats_from(data)
        self._messages = [*asked, ChatMessage("assistant", str(data.get("text", "")), stats.stop_reason)]
        return stats


def _stats_from(data: dict[str, Any]) -> GenerationStats:
    fields = set(GenerationStats.__dataclass_fields__)
    values = {k: v for k, v in data.items() if k in fields}
    values["stop_reason"] = StopReason(values.get("stop_reason", StopReason.ERROR.value))
    return GenerationStats(**values)


def _cancelled_stats(model: RemoteChat) -> GenerationStats:
    return GenerationStats(0, 0, 0, 0.0, 0.0, 0.0, 0.0, model.ep, short_ep_name(model.ep), StopReason.CANCELLED)
