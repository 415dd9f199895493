"""The chat engine behind the chat host, in this process or in a child process (no Qt here).

Why a child process: onnxruntime-genai 0.18 holds the GIL for the whole of `generate_next_token`
(10-25 ms a token on two cores). Run in a thread, every token freezes the UI thread for that long;
in its own process the model runs on its own interpreter and the UI only receives text. It also means
a native crash in a device driver ends the child, not the app.

`ChatSession` is the engine work itself (model, conversations, history, options, stats), used
directly in-process (tests with fake engines) and inside the child. `ChatProcess` is the parent's end:
it starts the child (spawn), sends one request at a time over a pipe and hands the events back; a
cancel token set in the parent reaches the child through a shared event.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engines import errors
from engines.errors import GenerationError, StudioError
from engines.types import CancelToken, DeviceChoice, DeviceType

log = logging.getLogger(__name__)

MAX_UI_UPDATES_PER_SECOND = 60
History = list[tuple[str, str]]  # (role, text) of the turns the engine should hold before a request
Loader = Callable[[Path, DeviceChoice], Any]
Event = tuple[Any, ...]  # ("status", text) | ("loaded", info) | ("started", id) | ("text", piece) | ...
TERMINAL = {"loaded", "finished", "failed", "ok", "counted"}


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

    def load(self, folder: str, choice: DeviceChoice, on_status: Callable[[str], None]) -> dict[str, Any]:
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

            model = engines.open_chat(folder, choice)
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


# --------------------------------------------------------------------------------------------
# The child process
# --------------------------------------------------------------------------------------------


class _EventToken:
    """A CancelToken look-alike over a multiprocessing event set by the parent."""

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
    from app import model_trials
    from app.memory import release_free_memory

    model_trials.configure(in_child=True)
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
                _, folder, choice = request
                info = session.load(folder, choice, lambda t: conn.send(("status", t)))
                release_free_memory()  # the load's temporary buffers, not kept while the child idles
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

    def __init__(self) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Any = None
        self._cancel = self._ctx.Event()
        self.last_load: tuple[str, DeviceChoice] | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._process = self._ctx.Process(target=serve, args=(child, self._cancel), name="npu-studio-chat", daemon=True)
        self._process.start()
        child.close()
        self._conn = parent
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
        finish promptly after the cancel."""
        if not self.alive:
            self._start()
            if message[0] == "generate" and self.last_load is not None:  # a restarted child has no model
                self.request(("load", *self.last_load), on_event, None, abandon)
        if message[0] == "load":
            self.last_load = (message[1], message[2])
        self._cancel.clear()
        if cancel is not None and cancel.cancelled:
            self._cancel.set()
        self._conn.send(message)
        abandon_deadline: float | None = None
        while True:
            if cancel is not None and cancel.cancelled and not self._cancel.is_set():
                self._cancel.set()
            if abandon():
                self._cancel.set()
                abandon_deadline = abandon_deadline or time.monotonic() + 1.0
                if time.monotonic() > abandon_deadline:
                    self.kill()
                    return ("failed", error_payload(errors.CancelledError("Closed while the chat engine was busy.")))
            try:
                ready = self._conn.poll(self.POLL_S)
                event: Event = self._conn.recv() if ready else ()
            except (EOFError, OSError):
                return ("failed", error_payload(self._died()))
            if not event:
                if not self.alive:
                    return ("failed", error_payload(self._died()))
                continue
            if event[0] == "log":
                _, level, name, text = event
                logging.getLogger(name).log(level, "[chat engine] %s", text)
                continue
            if event[0] in TERMINAL:
                return event
            on_event(event)

    def _died(self) -> StudioError:
        code = None
        if self._process is not None:
            self._process.join(1.0)  # reap it, for the exit code
            code = self._process.exitcode
        self._process = None
        log.warning("chat engine process ended unexpectedly (exit code %s)", code)
        return GenerationError(
            f"The chat engine stopped unexpectedly (exit code {code}).",
            "Send the message again to restart it; if it keeps happening, choose the CPU.",
        )

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
