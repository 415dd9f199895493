"""uvicorn on a socket bound here (so a port in use is one clear line naming it, and `--port 0` knows the
port it got), as the main loop of `npu-studio serve` or on a thread of the app.

Shutdown is staged: new connections stop, in-flight answers end with an error event (streams) or a 503,
the backend cancels what runs and fails what waits, and only then does the loop end.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.server.api import ServerContext, Timeouts, build_app
from app.server.guard import Access, host_names, is_loopback
from engines import StudioError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 6780
    api_key: str = ""
    cors_origins: tuple[str, ...] = ()
    max_connections: int = 32


class ServerStartError(StudioError):
    code = "serve"


def check_exposure(host: str, api_key: str) -> None:
    """Loopback needs nothing; any other address needs an API key (anyone on the network could use the
    model otherwise)."""
    if not is_loopback(host) and not api_key:
        raise ServerStartError(
            f"Refusing to listen on {host} without an API key: anyone who can reach this machine could use it.",
            "Give one with --api-key KEY or the NPU_STUDIO_API_KEY environment variable, or keep the default "
            "--host 127.0.0.1.",
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if hasattr(socket, "SO_EXCLUSIVEADDRUSE"):  # Windows: no other process may share the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1)) or "in use" in str(exc).lower():
            raise ServerStartError(
                f"Port {port} on {host} is already in use.",
                "Stop the program using it, or pick another port with --port N (0 picks a free one).",
            ) from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise ServerStartError(f"Not allowed to listen on {host}:{port}.", "Pick a port above 1023.") from None
        raise ServerStartError(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.",
                               "Check the --host address.") from None
    sock.setblocking(False)
    return sock


def url_of(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _bounded_protocol(header_timeout: float) -> type[H11Protocol]:
    class BoundedH11(H11Protocol):
        """uvicorn's HTTP/1.1 protocol with a deadline for a request's headers: a client that connects and
        sends them slowly (or never) is dropped instead of holding a connection slot."""

        _deadline: asyncio.TimerHandle | None = None
        _cycle_seen: Any = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._cycle_seen = self.cycle
            self._deadline = self.loop.call_later(header_timeout, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            waiting = self.cycle is self._cycle_seen and (self.cycle is None or self.cycle.response_complete)
            if waiting and not self.transport.is_closing():
                with contextlib.suppress(h11.LocalProtocolError):
                    self.conn.send(h11.ConnectionClosed())
                self.transport.close()

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return BoundedH11


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, context: ServerContext, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self.context = context
        self.on_stop = on_stop

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.context.begin_shutdown()
        await asyncio.sleep(0)  # let the streams see it before their connections are asked to close
        await super().shutdown(sockets)
        self.on_stop()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # Our own handlers (main thread only): Ctrl+C / SIGTERM stop the server once; a second Ctrl+C forces.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGBREAK] if hasattr(signal, "SIGBREAK") else [])

        def stop(signum: int, frame: object) -> None:
            if self.should_exit:
                self.force_exit = True
            self.should_exit = True
            self.stopped_by = self.stopped_by or signal.Signals(signum).name

        previous = {sig: signal.signal(sig, stop) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    stopped_by = ""


class RunningServer:
    """One server: bound at construction, served by `run()` (blocking) or `start()` (a thread)."""

    def __init__(self, context: ServerContext, options: ServeOptions, sock: socket.socket | None = None) -> None:
        """`sock`: bound already (`bind`), so that a port in use is said before a model loads."""
        check_exposure(options.host, options.api_key)
        self.context = context
        self.options = options
        self.socket = sock if sock is not None else bind(options.host, options.port)
        self.port = int(self.socket.getsockname()[1])
        self.url = url_of(options.host, self.port)
        allowed = host_names(options.host)
        access = Access(options.api_key, options.cors_origins, allowed)
        timeouts: Timeouts = context.timeouts
        config = uvicorn.Config(
            build_app(context, access),
            http=_bounded_protocol(timeouts.header_s),
            ws="none",
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            proxy_headers=False,
            limit_concurrency=options.max_connections,
            timeout_keep_alive=timeouts.keep_alive_s,
            timeout_graceful_shutdown=15,  # streams end with an error event: a token away, longer on a busy machine
            h11_max_incomplete_event_size=16 * 1024,
        )
        self._stopped = threading.Event()
        self.server = _Server(config, context, self._stopped.set)
        self._thread: threading.Thread | None = None

    def run(self) -> str:
        """Serve until stopped (Ctrl+C, SIGTERM, `stop()`); returns the signal's name that stopped it."""
        try:
            asyncio.run(self.server.serve(sockets=[self.socket]))
        finally:
            self._close()
        return self.server.stopped_by

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="npu-studio-server", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self.server.force_exit = True
                self._thread.join(timeout)

    @property
    def started(self) -> bool:
        return bool(self.server.started)

    def _close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.close()
        self.context.backend.close()
