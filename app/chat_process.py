"""The chat engine behind the chat host, in this process or in a child process (no Qt here).

Why a child process: onnxruntime-genai 0.18 holds the GIL for the whole of `generate_next_token`
(10-25 ms a token on two cores). Run in a thread, every token freezes the UI thread for that long;
in its own process the model runs on its own interpreter and the UI only receives text. It also means
a native crash in a device driver ends the child, not the app.

`ChatSession` (app/chat_session.py) is the engine work itself (model, conversations, history, options, stats), used
directly in-process (tests with fake engines) and inside the child. `ChatProcess` is the parent's end:
it starts the child (engines/child.py: a lean subprocess on POSIX, spawn on Windows), sends one request
at a time over a pipe and hands the events back; a cancel token set in the parent reaches the child
through a shared flag. The child reports the start and
end of each chat template render; the parent stops a render that runs past its bound, and the child
bounds its own memory for a model that is not ours (app/chat_bounds.py). Before such a model's first
load the parent tries it once; a Stop the child does not answer, and a token that does not come in time
from such a model, kill the child (app/chat_watch.py). The CLI uses it too, for such models.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app import chat_bounds, chat_watch
from app.chat_session import (
    MAX_UI_UPDATES_PER_SECOND,
    ChatSession,
    History,
    Loader,
    TextCoalescer,
    error_from_payload,
    error_payload,
    loading_text,
)
from engines import child
from engines.chat.prepared import prepare
from engines.errors import GenerationError, StudioError
from engines.types import CancelToken, DeviceChoice

log = logging.getLogger(__name__)

# The engine work itself (ChatSession, the text coalescer, error payloads) is app/chat_session.py;
# its names are importable from here as well, next to the process that runs it.
__all__ = [
    "MAX_UI_UPDATES_PER_SECOND", "ChatProcess", "ChatSession", "History", "Loader", "TextCoalescer",
    "error_from_payload", "error_payload", "in_process_requested", "loading_text", "serve",
]

Event = tuple[Any, ...]  # ("status", text) | ("loaded", info) | ("started", id) | ("text", piece) | ...
TERMINAL = {"loaded", "finished", "failed", "ok", "counted"}


# --------------------------------------------------------------------------------------------
# The child process
# --------------------------------------------------------------------------------------------


class _EventToken:
    """A CancelToken look-alike over the shared flag (engines/child.py) the parent sets."""

    def __init__(self, event: Any) -> None:
        self._event = event

    @property
    def cancelled(self) -> bool:
        return bool(self._event.is_set())


class _PipeLogHandler(logging.Handler):
    def __init__(self, conn: Any) -> None:
        super().__init__(logging.INFO)
        self._conn = conn

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._conn.send(("log", record.levelno, record.name, record.getMessage()))


def serve(conn: Any, cancel_event: Any) -> None:
    """The child's main loop: one request at a time, events back over `conn`."""
    root = logging.getLogger()
    root.handlers[:] = [_PipeLogHandler(conn)]
    root.setLevel(logging.INFO)
    from app import chat_bounds, model_trials
    from app.memory import release_free_memory, release_mapped_pages
    from engines.chat.generation import observe_renders
    from engines.models import trial

    chat_bounds.ignore_interrupts()
    model_trials.configure(in_child=True)
    observe_renders(lambda phase, characters: conn.send((phase, characters)))
    session = ChatSession()
    token = _EventToken(cancel_event)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        op = request[0]
        if op == "quit":
            session.close()
            return
        try:
            if op == "load":
                _, folder, choice, *prepared = request  # prepared: what the parent checked already
                chat_bounds.lift_memory_limit()
                if not trial.is_trusted(folder):
                    chat_bounds.limit_memory(Path(folder))
                info = session.load(folder, choice, lambda t: conn.send(("status", t)), *prepared[:1])
                release_free_memory()  # the load's temporary buffers, not kept while the child idles
                release_mapped_pages(folder)  # the weights file's pages read once, while prepacking
                conn.send(("loaded", info))
            elif op == "generate":
                _, kind, conversation_id, text, history, system_prompt, overrides = request
                stats = session.generate(
                    kind,
                    conversation_id,
                    text,
                    history,
                    system_prompt,
                    overrides,
                    on_started=lambda i: conn.send(("started", i)),
                    on_text=lambda piece: conn.send(("text", piece)),
                    cancel=token,
                )
                conn.send(("finished", stats))
            elif op == "forget":
                session.forget(request[1])
                conn.send(("ok",))
            elif op == "count":
                conn.send(("counted", session.count_tokens(request[1])))
            else:
                conn.send(("failed", error_payload(GenerationError(f"Unknown request '{op}'."))))
        except Exception as exc:
            if not isinstance(exc, StudioError):
                log.exception("chat %s failed", op)
            conn.send(("failed", error_payload(exc)))


# --------------------------------------------------------------------------------------------
# The parent's end
# --------------------------------------------------------------------------------------------


class ChatProcess:
    """Starts the child on first use, restarts it after a crash, stops it on close."""

    POLL_S = 0.02
    QUIT_WAIT_S = 3.0

    def __init__(self, stop_grace: float | None = None) -> None:
        self.stop_grace = chat_watch.stop_grace() if stop_grace is None else stop_grace
        self._process: Any = None
        self._conn: Any = None
        self._cancel = child.cancel_flag()
        self.last_load: tuple[str, DeviceChoice] | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def _start(self) -> None:
        self._process, self._conn = child.start(serve, (self._cancel,), name="npu-studio-chat")
        log.info("chat engine process started (pid %s)", self._process.pid)

    def request(
        self,
        message: tuple[Any, ...],
        on_event: Callable[[Event], None],
        cancel: CancelToken | None,
        abandon: Callable[[], bool],
    ) -> Event:
        """Send one request and pump its events until the terminal one, which is returned. `cancel`
        is forwarded to the child; `abandon()` true (the app is closing) kills a child that does not
        finish promptly after the cancel. The deadlines (trial, render, Stop, token) are app/chat_watch.py's."""
        if not self.alive:
            self._start()
            if message[0] == "generate" and self.last_load is not None:  # a restarted child has no model
                reloaded = self.request(("load", *self.last_load), on_event, cancel, abandon)
                if reloaded[0] != "loaded":
                    return reloaded  # why the model no longer loads, rather than "no model"
                on_event(("reloaded", reloaded[1]))
        if message[0] == "load":
            self.last_load = None  # until the model passed its trial
            try:
                chat_watch.try_first(
                    message[1],
                    lambda text: on_event(("status", text)),
                    lambda: bool(cancel is not None and cancel.cancelled) or abandon(),
                )
            except StudioError as exc:
                return ("failed", error_payload(exc))
            self.last_load = (message[1], message[2])
            message = (*message[:3], prepare(message[1]))  # the folder check and devices, done here
        self._cancel.clear()
        if cancel is not None and cancel.cancelled:
            self._cancel.set()
        self._conn.send(message)
        folder = self.last_load[0] if self.last_load is not None else ""
        watch = chat_watch.Watch(message[0], chat_watch.token_bound(folder) if folder else None, self.stop_grace)
        while True:
            if cancel is not None and cancel.cancelled and not self._cancel.is_set():
                self._cancel.set()
            abandoned = abandon()
            if abandoned:
                self._cancel.set()
            verdict = watch.check(self._cancel.is_set(), abandoned)
            if verdict is not None:
                self.kill()
                if verdict.forget:
                    self.last_load = None  # not loaded again behind the user's back
                log.info("chat engine stopped: %s", verdict.error.message)
                return ("failed", error_payload(verdict.error))
            try:
                ready = self._conn.poll(self.POLL_S)
                event: Event = self._conn.recv() if ready else ()
            except (EOFError, OSError):
                return ("failed", error_payload(self._died(watch.rendering)))
            if not event:
                if not self.alive:
                    return ("failed", error_payload(self._died(watch.rendering)))
                continue
            watch.saw(event)
            if event[0] in ("rendering", "rendered"):
                continue
            if event[0] == "log":
                _, level, name, text = event
                logging.getLogger(name).log(level, "[chat engine] %s", text)
                continue
            if event[0] in TERMINAL:
                return event
            on_event(event)

    def _died(self, rendering: bool = False) -> StudioError:
        code = None
        if self._process is not None:
            self._process.join(1.0)  # reap it, for the exit code
            code = self._process.exitcode
        self._process = None
        if rendering:
            self.last_load = None  # the model's template did it: do not load it again unasked
        (log.info if rendering else log.warning)("chat engine process ended unexpectedly (exit code %s)", code)
        return chat_bounds.died_error(code, rendering)

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join(self.QUIT_WAIT_S)
        self._process = None

    def close(self) -> None:
        """Ask the child to quit; kill it if it does not."""
        if self._process is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._conn.send(("quit",))
        self._process.join(self.QUIT_WAIT_S)
        if self._process.is_alive():
            log.warning("chat engine process did not quit; killing it")
            self.kill()
        self._process = None
        self._conn.close()


def in_process_requested() -> bool:
    """NPU_STUDIO_CHAT_IN_PROCESS=1 keeps the chat engine in the host thread (debugging)."""
    return os.environ.get("NPU_STUDIO_CHAT_IN_PROCESS") == "1"
