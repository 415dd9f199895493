"""The chat engine child's main loop: the requests of the parent (engines/chat/bounded.py), several answers
at once (engines/chat/scheduler.py), events back over the pipe.

Requests are tuples that carry the parent's key for the call: ("load", key, folder, choice, prepared),
("answer", key, ChatRequest), ("cancel", key), ("measure", key, ChatRequest), ("count", key, text),
("forget", key, conversation id), ("quit",). Every reply is `(key, payload)`: a turn's own events
(`Waiting`, `Started`, `Text`, then `Finished` or `Failed`: engines/chat/requests.py), ("loaded", ModelInfo),
("measured", PromptSize), ("counted", n), ("ok",), `Status` notices, or `Failed` for any request that could
not be done. The child's own reports are tuples with no key: ("rendering", characters) / ("rendered", 0)
around each chat template render (the parent bounds their time), ("log", level, name, message).

Between two steps of the answers being made the loop reads whatever the parent sent (a new answer starts
at the next step; a cancel stops its answer at its next token; a measure is answered at once); with nothing
to answer it waits for the parent.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from engines.chat.requests import ChatEvent, Failed, Finished, Status
from engines.errors import GenerationError, StudioError
from engines.types import CancelToken

__all__ = ["serve"]

log = logging.getLogger(__name__)


class _PipeLogHandler(logging.Handler):
    def __init__(self, conn: Any) -> None:
        super().__init__(logging.INFO)
        self._conn = conn

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._conn.send(("log", record.levelno, record.name, record.getMessage()))


class _Child:
    """The loaded model, its scheduler and the cancel tokens of the answers it has."""

    def __init__(self, conn: Any) -> None:
        from engines.chat.scheduler import Scheduler
        from engines.chat.session import ChatSession

        self.conn = conn
        self.session: ChatSession | None = None
        self.scheduler: Scheduler | None = None
        self.tokens: dict[int, CancelToken] = {}

    @property
    def idle(self) -> bool:
        return self.scheduler is None or self.scheduler.idle

    def reply(self, key: int, payload: Any) -> None:
        self.conn.send((key, payload))

    def sink(self, key: int) -> Any:
        def send(event: ChatEvent) -> None:
            if isinstance(event, Finished | Failed):
                self.tokens.pop(key, None)
            self.conn.send((key, event))

        return send

    def handle(self, request: tuple[Any, ...]) -> bool:
        """Do one request; False for quit."""
        op = request[0]
        if op == "quit":
            self.unload()
            return False
        key = int(request[1])
        try:
            if op == "load":
                self.load(key, *request[2:])
            elif op == "answer":
                scheduler = self._loaded()
                token = self.tokens[key] = CancelToken()
                scheduler.add(replace(request[2], cancel=token), self.sink(key))
            elif op == "cancel":
                stopped = self.tokens.get(key)
                if stopped is not None:
                    stopped.cancel()
            elif op == "measure":
                self._loaded()
                assert self.session is not None
                self.reply(key, ("measured", self.session.measure(request[2])))
            elif op == "count":
                counted = self.session.count_tokens(request[2]) if self.session is not None else None
                self.reply(key, ("counted", counted))
            elif op == "forget":
                if self.session is not None:
                    self.session.forget(request[2])
                self.reply(key, ("ok",))
            else:
                raise GenerationError(f"Unknown request '{op}'.")
        except Exception as exc:
            if not isinstance(exc, StudioError):
                log.exception("chat %s failed", op)
                exc = StudioError(f"Unexpected error: {type(exc).__name__}: {exc}")
            self.reply(key, Failed(exc, str(getattr(exc, "partial_text", "") or ""), getattr(exc, "stats", None)))
        return True

    def load(self, key: int, folder: str, choice: Any, prepared: Any) -> None:
        """Load a model (prepared: what the parent checked already), in place of the one loaded."""
        from engines.chat import bounds
        from engines.chat.scheduler import Scheduler
        from engines.chat.session import ChatSession
        from engines.loading import loading_text
        from engines.memory import release_free_memory, release_mapped_pages
        from engines.models import trial

        self.unload()
        bounds.lift_memory_limit()
        if not trial.is_trusted(folder):
            bounds.limit_memory(Path(folder))
        self.reply(key, Status(loading_text(Path(folder).name, choice)))
        session = ChatSession.load(folder, choice, prepared)
        release_free_memory()  # the load's temporary buffers, not kept while the child idles
        release_mapped_pages(folder)  # the weights file's pages read once, while prepacking
        self.session, self.scheduler = session, Scheduler(session, session.info.slots)
        self.reply(key, ("loaded", session.info))

    def unload(self) -> None:
        if self.scheduler is not None:
            self.scheduler.close(GenerationError("The chat model was unloaded."))
        if self.session is not None:
            self.session.close()
        self.session = self.scheduler = None
        self.tokens.clear()

    def _loaded(self) -> Any:
        from engines.chat.session import no_model_error

        if self.scheduler is None:
            raise no_model_error()
        return self.scheduler


def serve(conn: Any, trial_settings: dict[str, Any]) -> None:
    """The child's main loop. `trial_settings`: the parent's trusted roots and verdict file
    (engines.models.trial.settings); the child itself tries nothing, its parent did."""
    root = logging.getLogger()
    root.handlers[:] = [_PipeLogHandler(conn)]
    root.setLevel(logging.INFO)
    from engines.chat import bounds
    from engines.chat.generation import observe_renders
    from engines.models import trial

    bounds.ignore_interrupts()
    trial.configure(**trial_settings, enabled=False)
    observe_renders(lambda phase, characters: conn.send((phase, characters)))
    child = _Child(conn)
    try:
        while True:
            if child.idle or conn.poll(0):
                request = conn.recv()  # waits for the parent only when there is nothing to answer
                if not child.handle(request):
                    return
                continue  # read everything the parent sent before the next step
            assert child.scheduler is not None
            child.scheduler.round()
    except (EOFError, OSError):
        return  # the parent is gone
