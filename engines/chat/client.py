"""A conversation its caller keeps, answered by a chat service: what the CLI's `chat` holds.

The transcript lives here and goes with every request (`ChatRequest`, with this conversation's id, so
the engine keeps its generator and a new turn prefills only its own tokens). The same calls as an
in-process `Conversation`: send, regenerate, edit_last, continue_last, reset, set_system_prompt.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from engines.chat.requests import ChatEvent, ChatRequest, Failed, Finished, Text, Turn
from engines.chat.service import ChatService
from engines.chat.session import not_started
from engines.chat.types import ChatMessage, ChatOptions, StopReason
from engines.errors import CancelledError
from engines.types import CancelToken

__all__ = ["ServiceConversation"]

TextCallback = Callable[[str], None]
_ids = itertools.count(1)


class ServiceConversation:
    """A multi-turn chat over a ChatService; one call at a time."""

    def __init__(self, service: ChatService, system_prompt: str = "", options: ChatOptions | None = None) -> None:
        self.service = service
        self.system_prompt = system_prompt
        self.options = options or ChatOptions()
        self.id = next(_ids)
        self._messages: list[ChatMessage] = []

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        return tuple(self._messages)

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text

    def reset(self) -> None:
        self._messages.clear()

    def send(self, text: str, on_text: TextCallback | None = None, cancel: CancelToken | None = None) -> Finished:
        return self._ask(Turn.REPLY, text, on_text, cancel)

    def regenerate(self, on_text: TextCallback | None = None, cancel: CancelToken | None = None) -> Finished:
        return self._ask(Turn.REGENERATE, "", on_text, cancel)

    def edit_last(self, text: str, on_text: TextCallback | None = None, cancel: CancelToken | None = None) -> Finished:
        return self._ask(Turn.EDIT, text, on_text, cancel)

    def continue_last(self, on_text: TextCallback | None = None, cancel: CancelToken | None = None) -> Finished:
        return self._ask(Turn.CONTINUE, "", on_text, cancel)

    def close(self) -> None:
        self.service.forget(self.id)

    def _ask(self, turn: Turn, text: str, on_text: TextCallback | None, cancel: CancelToken | None) -> Finished:
        messages = [*self._messages, ChatMessage("user", text)] if turn == Turn.REPLY else self._messages
        request = ChatRequest(tuple(messages), self.system_prompt, self.options, turn=turn,
                              text=text if turn == Turn.EDIT else "", conversation=self.id, cancel=cancel)  # fmt: skip
        answered, _ = request.answered()
        failed: list[Failed] = []

        def on_event(event: ChatEvent) -> None:
            if isinstance(event, Text) and on_text is not None:
                on_text(event.text)
            elif isinstance(event, Failed):
                failed.append(event)

        try:
            done = self.service.generate(request, on_event)
        except CancelledError:
            if cancel is None or not cancel.cancelled:
                raise
            # Stopped during a render (the engine was stopped): the question leaves the transcript too.
            return not_started(self.service.info, request)
        except Exception:
            if failed and failed[0].partial:  # the answer so far stays, as the user saw it
                self._messages = [*answered, ChatMessage("assistant", failed[0].partial, StopReason.ERROR)]
            raise
        self._messages = [*answered, ChatMessage("assistant", done.text, done.stop_reason)]
        return done
