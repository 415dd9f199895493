"""A backend's events, sent from its own thread, as an async stream on the server's event loop.

Leaving the `async for` early (the client went away, the server is closing) sets the request's cancel
token, which the backend checks before every token: its generation stops within one token.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from app.server.protocol import Admission, ChatBackend, CompletionRequest, Event, Failed, Finished
from engines import CancelToken


class EventStream:
    """`async for event in EventStream(...)` until the terminal `Finished` / `Failed` (included)."""

    def __init__(self, backend: ChatBackend, request: CompletionRequest, admission: Admission) -> None:
        self.cancel = CancelToken()
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._ended = False
        backend.submit(request, admission, self._from_thread, self.cancel)  # QueueFullError raises here

    def _from_thread(self, event: Event) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.cancel.cancel()

    async def events(self) -> AsyncIterator[Event]:
        try:
            while True:
                event = await self._queue.get()
                yield event
                if isinstance(event, Finished | Failed):
                    self._ended = True
                    return
        finally:
            if not self._ended:
                self.cancel.cancel()

    def stop(self) -> None:
        self.cancel.cancel()
