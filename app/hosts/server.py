"""The app's server: `npu-studio serve`'s server (app/server) inside the app, driven by the Server view. A host
like every other (app/hosts/jobs.py): starting and stopping are jobs on its own QThread; uvicorn then serves on a
thread of its own; what happens comes back as signals in the GUI thread.

One loaded model for the window and the clients outside: the server answers with the chat host's service
(`ChatHost.service`), so a chat in the window and a request from outside are answers of the same engine.
Started before the chat host has a model, the server has the chat host load the window's model (never a
copy of its own) and requests wait for it; when the window's model changes, the server follows. Only
without a chat host (a test, a tool) does the server open the model itself.

Closing: the server stops before the chat host (gui.py's staged shutdown), in-flight streams end with an
error event, and no thread of it is left.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app import paths
from app.hosts.chat import ChatHost
from app.hosts.jobs import SHUTDOWN_TIMEOUT_MS, Host, Job, JobContext, Worker
from engines import ChatService, DeviceChoice, StudioError

if TYPE_CHECKING:
    from app.server.backend import ServiceBackend
    from app.server.runner import RunningServer

log = logging.getLogger(__name__)


class ServerWorker(Worker):
    """The host thread's state: the running server and its backend (None when stopped)."""

    def __init__(self) -> None:
        super().__init__()
        self.server: RunningServer | None = None
        self.backend: ServiceBackend | None = None
        self.lock = threading.Lock()  # server and backend are read from the GUI thread too

    def take(self) -> tuple[RunningServer | None, ServiceBackend | None]:
        with self.lock:
            server, backend = self.server, self.backend
            self.server = self.backend = None
        return server, backend

    def dispose(self) -> None:
        """After the thread stopped: stop serving (in-flight answers end with an error event)."""
        server, _ = self.take()
        if server is not None:
            server.stop()


class ServerHost(Host):
    worker: ServerWorker
    started = Signal(str)  # the URL
    stopped = Signal(str)  # why ("" when asked to)
    model_ready = Signal(str, object)  # model name ("" for none), Placement
    record = Signal(object)  # (time, client, model, device, prompt, completion, tok/s, status)

    def __init__(
        self,
        folder: Path,
        choice: DeviceChoice,
        shared: ChatHost | None = None,
        load_model: Callable[[], None] | None = None,
        parent: QObject | None = None,
    ) -> None:
        """`shared`: the app's chat host, whose loaded service the server answers with; `load_model` has it load
        the window's model when it has none. Without a chat host the server opens `folder` on `choice`."""
        worker = ServerWorker()
        super().__init__(worker, "server-host", parent)
        self.worker = worker
        self.folder = folder
        self.choice = choice
        self.shared = shared
        self.load_model = load_model
        self.url = ""
        if shared is not None:
            shared.follow(self._follow)

    @property
    def running(self) -> bool:
        return self.worker.server is not None

    def busy(self) -> int:
        """Requests being answered or waiting now."""
        backend = self.worker.backend
        return int(backend.busy()) if backend is not None else 0

    def serve(self, port: int, api_key: str) -> Job:
        """Serve on 127.0.0.1:`port` (0: a free one), with `api_key` ("" for none)."""
        shared = self.shared
        if shared is not None and shared.service is None and not shared.loading and self.load_model is not None:
            self.load_model()  # the server answers with the window's model: the chat host loads it, once, for both

        def run(context: JobContext) -> None:
            self._serve(context, port, api_key)

        return self.submit("server start", run, report_errors=False)

    def stop(self) -> Job:
        """Stop serving: in-flight answers end with an error event. The chat host keeps its model."""

        def run(context: JobContext) -> None:
            server, _ = self.worker.take()
            if server is not None:
                server.stop()
            self.url = ""
            context.send(self.stopped, "")

        return self.submit("server stop", run)

    def cancel(self) -> None:
        """The app is closing: in-flight answers end now (with an error event), new requests are refused."""
        super().cancel()
        server = self.worker.server
        if server is not None:
            server.context.begin_shutdown()

    def shutdown(self, timeout_ms: int = SHUTDOWN_TIMEOUT_MS) -> bool:
        self.cancel()
        return super().shutdown(timeout_ms)

    # -- in the host's thread ------------------------------------------------------------------------

    def _serve(self, context: JobContext, port: int, api_key: str) -> None:
        from app.server.api import RequestRecord, ServerContext
        from app.server.backend import ServiceBackend, open_backend
        from app.server.library import LibraryCards
        from app.server.runner import RunningServer, ServeOptions, bind

        if self.worker.server is not None:
            context.send(self.started, self.url)
            return
        try:
            sock = bind("127.0.0.1", port)
            library = LibraryCards(paths.model_roots(), self.choice)
            shared = self.shared
            try:
                if shared is not None:
                    backend = ServiceBackend(shared.service, library=library, owns_service=False,
                                             folder=self.folder, expecting=lambda: shared.loading)  # fmt: skip
                else:
                    backend = open_backend(self.folder, self.choice, library)
            except BaseException:
                sock.close()
                raise

            def on_record(r: RequestRecord) -> None:
                context.send(self.record, (r.time, r.client, r.model, r.device, r.prompt_tokens,
                                           r.completion_tokens, r.tokens_per_s, r.status))  # fmt: skip

            server = RunningServer(ServerContext(backend, on_record=[on_record]),
                                   ServeOptions("127.0.0.1", port, api_key), sock)  # fmt: skip
        except StudioError as exc:
            context.send(self.stopped, exc.user_text())
            return
        except Exception as exc:
            log.exception("the server did not start")
            context.send(self.stopped, f"The server did not start: {type(exc).__name__}: {exc}")
            return
        with self.worker.lock:
            self.worker.server, self.worker.backend = server, backend
            if shared is not None and shared.service is not backend.service:
                backend.use(shared.service)  # the chat host's model changed while the server started
        server.start()
        self.url = server.url
        service = backend.service
        context.send(self.model_ready, backend.model_id, service.info.placement if service is not None else None)
        context.send(self.started, server.url)

    # -- in the chat host's thread -------------------------------------------------------------------

    def _follow(self, service: ChatService | None) -> None:
        """The chat host loaded another model (or none, while it loads): the running server answers with it
        from now on, whatever the GUI thread is doing."""
        with self.worker.lock:
            backend = self.worker.backend
            if backend is None or backend.owns_service:
                return
            backend.use(service)  # None: requests wait for the next one while the chat host loads
        self.model_ready.emit(*_served(service))


def _served(service: ChatService | None) -> tuple[str, Any]:
    return (service.info.name, service.info.placement) if service is not None else ("", None)


def server_host(
    settings: Any, chat: ChatHost | None = None, load_model: Callable[[], None] | None = None
) -> ServerHost:
    """The host that serves the chat host's loaded model (`chat`; `load_model` loads the window's model into
    it), or without one the chat model of the settings on the app's default device."""
    from app.commands.chat import chat_model_folder

    try:
        folder = chat_model_folder(settings.chat_model)
    except StudioError:
        folder = paths.bundled_models_dir() / "smollm2-135m-instruct"
    return ServerHost(folder, DeviceChoice.parse(settings.device), chat, load_model)


def wire_server_view(view: Any, host: ServerHost, window: Any) -> None:
    """The Server view's intents to the host, the host's news to the view and the status bar."""
    view.start_requested.connect(host.serve)
    view.stop_requested.connect(host.stop)
    host.started.connect(view.set_running)
    host.started.connect(lambda url: window.set_serving(f"Serving at {url}"))
    host.stopped.connect(view.set_stopped)
    host.stopped.connect(lambda reason: window.set_serving(""))
    host.model_ready.connect(view.set_model)
    host.record.connect(view.add_record)


def wire_server_settings(view: Any, host: ServerHost | None, settings: Any, save: Any) -> None:
    """The Server place's settings: the port and key last used, and "Start with the app" (which starts it
    on the event loop's first turn, after the window is up)."""
    from PySide6.QtCore import QTimer

    view.show_settings(settings.serve_port, settings.serve_api_key, settings.serve_on_start)

    def remember(port: int, api_key: str) -> None:
        settings.serve_port, settings.serve_api_key = port, api_key
        save()

    def start_with_app(on: bool) -> None:
        settings.serve_on_start = on
        save()

    view.start_requested.connect(remember)
    view.start_with_app_changed.connect(start_with_app)
    if settings.serve_on_start:
        QTimer.singleShot(0, lambda: view.toggle.click())
