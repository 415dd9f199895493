"""The chat service with the model in the bounded engine child: for models that are not ours, and for
processes that must stay responsive while tokens are generated (engines/chat/opening.py's rule).

Why a child: onnxruntime-genai 0.18 holds the GIL for the whole of `generate_next_token` (10-25 ms a
token on two cores), so in a thread every token would freeze the caller's other threads (the app's UI);
in its own process the model runs on its own interpreter and only text comes back. A native crash in a
device driver or a hostile chat template ends the child, not the caller.

`EngineProcess` is the parent's end: it starts the child (engines/child.py: a lean subprocess on POSIX,
spawn on Windows and frozen builds) and sends it requests from any number of threads at once, each with
a key; a reader thread hands each reply and event to the call with that key, and each caller keeps its
call's deadlines (engines/chat/watch.py) while it waits. The child makes several answers at once
(engines/chat/scheduler.py); a caller's Stop reaches the child as a cancel for its key. The child reports
the start and end of each chat template render; a render that runs past its bound is stopped (the child
is killed), and the child bounds its own memory for a model that is not ours (engines/chat/bounds.py).
Before such a model's first load the parent tries it once; a Stop the child does not answer, and a token
that does not come in time from such a model, kill the child. A killed child fails every call it had;
the next request starts a new child, which first loads the model again (`Reloaded`), unless the model
itself was the reason (then the service says it has no model).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engines import child
from engines.chat import bounds, watch
from engines.chat.prepared import prepare
from engines.chat.requests import (
    ChatEvent,
    ChatRequest,
    EventSink,
    Failed,
    Finished,
    ModelInfo,
    PromptSize,
    Reloaded,
    Started,
    Status,
    Text,
)
from engines.chat.service import MAX_WAITING, ChatService
from engines.errors import CancelledError, GenerationError, StudioError
from engines.types import CancelToken, DeviceChoice

__all__ = ["BoundedChat", "EngineProcess"]

log = logging.getLogger(__name__)

Reply = Finished | Failed | tuple[Any, ...]  # the terminal answer to one request
_TERMINAL = ("loaded", "counted", "measured", "ok")
_NEEDS_MODEL = ("answer", "measure")  # what a restarted child loads the model again for


def _never() -> bool:
    return False


@dataclass
class _Gone:
    """The child ended (or was killed) while this call waited: why."""

    error: StudioError


@dataclass
class _Call:
    key: int
    process: Any  # the child it was sent to
    events: queue.SimpleQueue[Any] = field(default_factory=queue.SimpleQueue)


class EngineProcess:
    """The chat engine child: started on first use, started again after it ended, stopped on close."""

    POLL_S = 0.02
    QUIT_WAIT_S = 3.0

    def __init__(self, stop_grace: float | None = None) -> None:
        self.stop_grace = watch.stop_grace() if stop_grace is None else stop_grace
        self._process: Any = None
        self._conn: Any = None
        self._lock = threading.RLock()  # the child, its connection and the calls
        self._send_lock = threading.Lock()
        self._start_lock = threading.Lock()  # one caller starts (and reloads) a child at a time
        self._calls: dict[int, _Call] = {}
        self._keys = itertools.count(1)
        self._killed: tuple[Any, StudioError] | None = None  # a child killed on purpose, and what its calls hear
        self._rendering = False
        self._read_out: deque[Any] = deque(maxlen=4)  # the last children whose reader has seen their end
        self.last_load: tuple[str, DeviceChoice] | None = None  # what a restarted child loads again

    @property
    def alive(self) -> bool:
        process = self._process
        return process is not None and process.is_alive()

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def _start(self) -> None:
        from engines.models import trial

        # Named, not imported: this process never loads the engine's own code (nor onnxruntime-genai).
        process, conn = child.start("engines.chat.engine_child:serve", (trial.settings(),), name="npu-studio-chat")
        with self._lock:
            self._process, self._conn, self._rendering = process, conn, False
        threading.Thread(target=self._read, args=(process, conn), name="npu-studio-chat-reader", daemon=True).start()
        log.info("chat engine process started (pid %s)", process.pid)

    def load(self, folder: str, choice: DeviceChoice, on_event: EventSink, cancel: CancelToken | None,
             abandon: Callable[[], bool] = _never) -> Reply:  # fmt: skip
        """Try an untrusted model once (a bounded trial, Stop and closing end it), then load it in the child."""
        self.last_load = None  # until the model passed its trial
        try:
            watch.try_first(folder, lambda text: on_event(Status(text)),
                            lambda: bool(cancel is not None and cancel.cancelled) or abandon())  # fmt: skip
        except StudioError as exc:
            return Failed(exc)
        self.last_load = (folder, choice)
        return self.request(("load", folder, choice, prepare(folder)), on_event, cancel, abandon)

    def request(self, message: tuple[Any, ...], on_event: EventSink, cancel: CancelToken | None,
                abandon: Callable[[], bool] = _never) -> Reply:  # fmt: skip
        """Send one request (its operation, then its arguments) and pump its events to `on_event` until the
        terminal one, which is returned. Other threads may send theirs meanwhile. `abandon()` true (the
        caller is closing) kills a child that does not finish promptly after the cancel. The deadlines
        (render, Stop, token) are engines/chat/watch.py's."""
        with self._start_lock:
            if not self.alive:
                self._start()
                if message[0] in _NEEDS_MODEL and self.last_load is not None:  # a restarted child has no model
                    folder, choice = self.last_load
                    reloaded = self._call(("load", folder, choice, prepare(folder)), on_event, cancel, abandon)
                    if not isinstance(reloaded, tuple):
                        return reloaded  # why the model no longer loads, rather than "no model"
                    on_event(Reloaded(reloaded[1]))
        return self._call(message, on_event, cancel, abandon)

    def _call(self, message: tuple[Any, ...], on_event: EventSink, cancel: CancelToken | None,
              abandon: Callable[[], bool]) -> Reply:  # fmt: skip
        op = message[0]
        with self._lock:
            process, conn = self._process, self._conn
            ended = any(process is gone for gone in self._read_out)  # before this call was made: nobody reads it
            call = _Call(next(self._keys), process)
            if not ended:
                self._calls[call.key] = call
        if ended:
            return Failed(self._gone_error(process))
        folder = self.last_load[0] if self.last_load is not None else ""
        deadlines = watch.Watch(op, watch.token_bound(folder) if folder else None, self.stop_grace)
        told_to_stop = False
        try:
            try:
                self._send(conn, (op, call.key, *message[1:]))
            except (OSError, ValueError, AttributeError):
                return Failed(self._gone_error(process))
            while True:
                cancelled = cancel is not None and cancel.cancelled
                abandoned = abandon()
                if (cancelled or abandoned) and not told_to_stop:
                    told_to_stop = True
                    with contextlib.suppress(OSError, ValueError):
                        self._send(conn, ("cancel", call.key))
                verdict = deadlines.check(told_to_stop, abandoned)
                if verdict is not None:
                    self._kill(process, verdict.error)
                    if verdict.forget:
                        self.last_load = None  # not loaded again behind the user's back
                    log.info("chat engine stopped: %s", verdict.error.message)
                    return Failed(verdict.error)
                try:
                    item = call.events.get(timeout=self.POLL_S)
                except queue.Empty:
                    continue
                if isinstance(item, _Gone):
                    return Failed(item.error)
                if isinstance(item, Finished | Failed) or (isinstance(item, tuple) and item[0] in _TERMINAL):
                    return item
                if isinstance(item, tuple):  # a render began or ended (the child's, whoever it is for)
                    deadlines.saw(item)
                    continue
                deadlines.saw(("text",) if isinstance(item, Text) else
                              ("started",) if isinstance(item, Started) else ("event",))  # fmt: skip
                on_event(item)
        finally:
            with self._lock:
                self._calls.pop(call.key, None)

    def _send(self, conn: Any, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            conn.send(message)

    def _read(self, process: Any, conn: Any) -> None:
        """The reader thread of one child: its replies to their calls, its reports, then its end."""
        while True:
            try:
                if not conn.poll(self.POLL_S):
                    if not process.is_alive():
                        break
                    continue
                item: Any = conn.recv()
            except (EOFError, OSError):
                break
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int):
                with self._lock:
                    call = self._calls.get(item[0])
                if call is not None:
                    call.events.put(item[1])
                continue
            if isinstance(item, tuple) and item and item[0] == "log":
                _, level, name, text = item
                logging.getLogger(name).log(level, "[chat engine] %s", text)
            elif isinstance(item, tuple) and item and item[0] in ("rendering", "rendered"):
                with self._lock:
                    self._rendering = item[0] == "rendering"
                    calls = [c for c in self._calls.values() if c.process is process]
                for call in calls:
                    call.events.put(item)
        self._ended(process)

    def _ended(self, process: Any) -> None:
        """The child ended: every call still waiting for it hears why."""
        with self._lock:
            self._read_out.append(process)
            current = self._process is process
            rendering = self._rendering if current else False
            calls = [c for c in self._calls.values() if c.process is process]
        error = self._gone_error(process, rendering)
        if current:
            with self._lock:
                self._process = None
            if rendering:
                self.last_load = None  # the model's template did it: do not load it again unasked
            (log.info if rendering else log.warning)("chat engine process ended unexpectedly (exit code %s)",
                                                     process.exitcode)  # fmt: skip
        for call in calls:
            call.events.put(_Gone(error))

    def _gone_error(self, process: Any, rendering: bool = False) -> StudioError:
        with self._lock:
            killed = self._killed
        if killed is not None and killed[0] is process:
            return killed[1]
        code = None
        if process is not None:
            process.join(1.0)  # reap it, for the exit code
            code = process.exitcode
        return bounds.died_error(code, rendering)

    def _kill(self, process: Any, why: StudioError) -> None:
        """A deadline of one call passed: the child goes; the other calls it had hear that it was restarted."""
        with self._lock:
            if self._process is not process:
                return
            self._killed = (process, GenerationError(
                f"The chat engine was restarted while answering ({why.message.rstrip('.')}).",
                "Send the message again."))  # fmt: skip
        self.kill()

    def kill(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.join(self.QUIT_WAIT_S)

    def close(self) -> None:
        """Ask the child to quit; kill it if it does not. Calls still waiting hear that the model was closed."""
        with self._lock:
            process, conn = self._process, self._conn
            self._process = None
            self._killed = (process, CancelledError("The chat model was closed."))
        if process is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._send(conn, ("quit",))
        process.join(self.QUIT_WAIT_S)
        if process.is_alive():
            log.warning("chat engine process did not quit; killing it")
            process.kill()
            process.join(self.QUIT_WAIT_S)
        with contextlib.suppress(OSError):
            conn.close()


class BoundedChat(ChatService):
    """A chat model loaded in the chat engine child."""

    def __init__(self, engine: EngineProcess, info: ModelInfo, *, abandon: Callable[[], bool] = _never,
                 max_waiting: int = MAX_WAITING) -> None:  # fmt: skip
        super().__init__(info, max_waiting=max_waiting)
        self.engine = engine
        self._abandon = abandon
        self._forgotten: set[int] = set()
        self._forget_lock = threading.Lock()

    @classmethod
    def load(
        cls,
        folder: str | os.PathLike[str],
        choice: DeviceChoice,
        *,
        on_event: Callable[[ChatEvent], None] | None = None,
        cancel: CancelToken | None = None,
        abandon: Callable[[], bool] | None = None,
        max_waiting: int = MAX_WAITING,
        engine: EngineProcess | None = None,
    ) -> BoundedChat:
        """Start the child and load the model there; the load's failure raises (the child is stopped)."""
        engine = engine or EngineProcess()
        abandon = abandon or _never
        try:
            reply = engine.load(str(folder), choice, on_event or (lambda event: None), cancel, abandon)
        except BaseException:
            engine.kill()
            raise
        if isinstance(reply, Failed):
            engine.kill()
            raise reply.error
        if not isinstance(reply, tuple) or reply[0] != "loaded":
            engine.kill()
            raise StudioError(f"The chat engine answered a load with {reply!r}.")
        return cls(engine, reply[1], abandon=abandon, max_waiting=max_waiting)

    @property
    def loaded(self) -> bool:
        return self.engine.last_load is not None

    def _noted(self, event: ChatEvent) -> None:
        if isinstance(event, Reloaded):  # a restarted engine loaded the model again
            self._info = event.info

    def _run(self, request: ChatRequest, sink: EventSink) -> Finished | Failed:
        self._send_forgotten()

        def relay(event: ChatEvent) -> None:
            self._noted(event)
            sink(event)

        reply = self.engine.request(("answer", request.without_cancel()), relay, request.cancel, self._abandon)
        if not isinstance(reply, Finished | Failed):
            reply = Failed(StudioError(f"The chat engine answered a turn with {reply[0]!r}."))
        sink(reply)
        return reply

    def measure(self, request: ChatRequest) -> PromptSize:
        from engines.chat.session import no_model_error

        if not self.loaded:
            raise no_model_error()
        reply = self.engine.request(("measure", request.without_cancel()), self._noted, None, self._abandon)
        if isinstance(reply, Failed):
            raise reply.error
        if isinstance(reply, tuple) and reply[0] == "measured":
            return reply[1]
        raise StudioError(f"The chat engine answered a measure with {reply!r}.")

    def count_tokens(self, text: str) -> int | None:
        if not self.engine.alive:
            return None
        reply = self.engine.request(("count", text), lambda event: None, None, self._abandon)
        return reply[1] if isinstance(reply, tuple) and reply[0] == "counted" else None

    def forget(self, conversation: int) -> None:
        with self._forget_lock:
            self._forgotten.add(conversation)  # sent before the next request: never a wait here

    def _send_forgotten(self) -> None:
        with self._forget_lock:
            forgotten, self._forgotten = self._forgotten, set()
        for conversation in forgotten:
            if self.engine.alive:
                self.engine.request(("forget", conversation), lambda event: None, None, self._abandon)

    def close(self) -> None:
        self.engine.close()
