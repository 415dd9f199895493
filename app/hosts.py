"""Engine hosts: one worker QObject per engine, moved to its own QThread.

Requests go in through queued signals (the worker runs them one at a time, in order); results come
out as past-tense signals. Every exception in a worker becomes `failed(error)` with a StudioError the
UI can show. Cancellation is a CancelToken the host sets directly (the worker is busy, so a queued
request would arrive too late). The engines are imported inside the worker thread, on first use, so
that the main window never waits for ONNX Runtime.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app.chat_process import (
    ChatProcess,
    ChatSession,
    History,
    error_from_payload,
    in_process_requested,
    loading_text,
)
from app.jobs import SHUTDOWN_TIMEOUT_MS, Host, Job, JobContext, Worker, as_studio_error, import_serialized
from app.qtcompat import emit
from engines.errors import CancelledError, StudioError
from engines.types import CancelToken, Classification, DeviceChoice

log = logging.getLogger(__name__)

__all__ = ["SHUTDOWN_TIMEOUT_MS", "ChatHost", "DevicesHost", "Host", "VisionHost", "Worker", "as_studio_error"]


# --------------------------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------------------------


class DevicesWorker(Worker):
    devices_found = Signal(object)  # engines.runtime.devices.DiscoveryReport
    download_progress = Signal(str, float)  # EP name, 0..1
    downloaded = Signal(object)  # list of engines.runtime.catalog.PrepareResult

    def __init__(self) -> None:
        super().__init__()
        self.cancel_download = threading.Event()  # set from the GUI thread

    @Slot(list)
    def download_eps(self, names: list[str]) -> None:
        """Windows ML's EP download, asked for by the user (the view asked for consent first); then the
        devices are discovered again so the new EPs are registered and listed."""

        def job() -> None:
            from engines.runtime.catalog import download_eps
            from engines.runtime.devices import discover

            self.cancel_download.clear()
            emit(self.status, "Downloading execution providers from Windows Update…")
            results = download_eps(
                names, consent=True, cancel=self.cancel_download,
                on_progress=lambda ep, value: emit(self.download_progress, ep, value),
            )
            emit(self.downloaded, results)
            emit(self.devices_found, discover())

        self.run_job("execution provider download", job)


class DevicesHost(Host):
    worker: DevicesWorker
    devices_found = Signal(object)
    download_progress = Signal(str, float)
    downloaded = Signal(object)
    RELAYED = ("devices_found", "download_progress", "downloaded")
    _download = Signal(list)

    def __init__(self, parent: QObject | None = None) -> None:
        worker = DevicesWorker()
        super().__init__(worker, "devices-host", parent)
        self.worker = worker
        self._download.connect(self.worker.download_eps)

    def discover(self) -> Job:
        """Look for devices (one operation on the generic runner: app/jobs.py)."""

        def find(context: JobContext) -> Any:
            context.status("Loading ONNX Runtime and looking for devices…")
            from engines.runtime.devices import discover

            return discover()

        job = self.submit("device discovery", find)
        job.returned.connect(self.devices_found)
        return job

    def download_eps(self, names: list[str]) -> None:
        self.start()
        emit(self._download, list(names))

    def cancel_download(self) -> None:
        self.worker.cancel_download.set()

    def shutdown(self, timeout_ms: int = SHUTDOWN_TIMEOUT_MS) -> bool:
        self.worker.cancel_download.set()  # a download in progress is cancelled, not waited for
        return super().shutdown(timeout_ms)


# --------------------------------------------------------------------------------------------
# Vision
# --------------------------------------------------------------------------------------------


class VisionWorker(Worker):
    model_loaded = Signal(str, object)  # description, Placement
    started = Signal(int)  # number of photos
    classified = Signal(object)  # Classification
    progress = Signal(int, int)  # done, total
    finished = Signal(object)  # summary dict
    cancelled = Signal(int)  # photos done before the cancel

    def __init__(self, classifier_factory: Callable[[Path, DeviceChoice], Any] | None = None) -> None:
        super().__init__()
        self._factory = classifier_factory  # tests: a fake engine per device choice
        self._classifiers: dict[tuple[str, DeviceChoice], Any] = {}  # one per model x device choice

    def _classifier(self, folder: str, choice: DeviceChoice) -> Any:
        """The model opened on `choice` through engines.open_classifier, exactly as the CLI opens it: the
        QDQ variant on a usable NPU, the compiled-model cache, verification and the one fallback path."""
        key = (str(Path(folder).resolve()), choice)
        classifier = self._classifiers.get(key)
        if classifier is None:
            emit(self.status, loading_text(Path(folder).name, choice))
            started = time.perf_counter()
            classifier = self._open(Path(folder), choice)
            self._classifiers[key] = classifier
            log.info("classifier %s ready on %s in %.2f s", folder, choice.describe(), time.perf_counter() - started)
            emit(self.model_loaded, self._describe(classifier, folder), classifier.placement)
        return classifier

    def _open(self, folder: Path, choice: DeviceChoice) -> Any:
        import engines
        from app import paths
        from engines.api import classifier_over
        from engines.models.lookup import locate_model

        if self._factory is not None:
            factory = self._factory
            return classifier_over(lambda where: factory(folder, where), choice, locate_model(folder))
        return engines.open_classifier(
            folder,
            choice,
            cache=paths.compiled_cache_dir(),
            on_progress=lambda text: emit(self.status, text),
            library=paths.model_roots(),
        )

    @staticmethod
    def _describe(classifier: Any, folder: str) -> str:
        name = getattr(getattr(classifier, "spec", None), "name", "") or Path(folder).name
        return f"{name} · {classifier.placement.badge()}"

    @property
    def session_count(self) -> int:
        return len(self._classifiers)

    @Slot(str, object)
    def load(self, folder: str, choice: DeviceChoice) -> None:
        self.run_job("classifier load", lambda: self._classifier(folder, choice))

    @Slot(object, str, object, int, object)
    def classify(self, paths: list[str], folder: str, choice: DeviceChoice, k: int, cancel: CancelToken) -> None:
        def job() -> None:
            classifier = self._classifier(folder, choice)
            total = len(paths)
            emit(self.started, total)
            done = 0
            started = time.perf_counter()

            def on_result(result: Classification) -> None:
                nonlocal done
                done += 1
                emit(self.classified, result)
                emit(self.progress, done, total)

            try:
                results = classifier.classify_many(paths, k=k, cancel=cancel, on_result=on_result)
            except CancelledError:
                emit(self.cancelled, done)
                return
            emit(
                self.finished,
                {
                    "count": len(results),
                    "errors": sum(1 for r in results if r.error),
                    "seconds": time.perf_counter() - started,
                },
            )

        self.run_job("classification", job)

    @Slot(object, str, str, object, int)
    def classify_bytes(self, data: bytes, name: str, folder: str, choice: DeviceChoice, k: int) -> None:
        def job() -> None:
            classifier = self._classifier(folder, choice)
            emit(self.started, 1)
            started = time.perf_counter()
            result = classifier.classify(data, k=k)
            emit(self.classified, result)
            emit(self.progress, 1, 1)
            emit(self.finished, {"count": 1, "errors": 0, "seconds": time.perf_counter() - started, "name": name})

        self.run_job("classification", job)


class VisionHost(Host):
    worker: VisionWorker
    model_loaded = Signal(str, object)
    started = Signal(int)
    classified = Signal(object)
    progress = Signal(int, int)
    finished = Signal(object)
    cancelled = Signal(int)
    RELAYED = ("model_loaded", "started", "classified", "progress", "finished", "cancelled")
    _load = Signal(str, object)
    _classify = Signal(object, str, object, int, object)
    _classify_bytes = Signal(object, str, str, object, int)

    def __init__(
        self, classifier_factory: Callable[[Path, DeviceChoice], Any] | None = None, parent: QObject | None = None
    ) -> None:
        w = VisionWorker(classifier_factory)
        super().__init__(w, "vision-host", parent)
        self.worker = w
        self._load.connect(w.load)
        self._classify.connect(w.classify)
        self._classify_bytes.connect(w.classify_bytes)

    def load(self, folder: str | Path, choice: DeviceChoice) -> None:
        """Create the session ahead of time (cached per model x device choice)."""
        self.start()
        emit(self._load, str(folder), choice)

    def classify(self, paths: list[str], folder: str | Path, choice: DeviceChoice, k: int = 5) -> None:
        self.start()
        emit(self._classify, list(paths), str(folder), choice, k, self.new_token())

    def classify_bytes(self, data: bytes, name: str, folder: str | Path, choice: DeviceChoice, k: int = 5) -> None:
        self.start()
        self.new_token()
        emit(self._classify_bytes, bytes(data), name, str(folder), choice, k)


# --------------------------------------------------------------------------------------------
# Chat
# --------------------------------------------------------------------------------------------


class ChatWorker(Worker):
    """Runs chat requests; the engine itself lives in a child process (see app.chat_process) unless a
    loader is injected (tests) or NPU_STUDIO_CHAT_IN_PROCESS=1."""

    model_loaded = Signal(object)  # model_info dict
    generation_started = Signal(int)  # conversation id
    text_generated = Signal(str)  # coalesced pieces of the answer
    generation_finished = Signal(object)  # GenerationStats.as_dict() + model identity and final text
    cancelled = Signal(object)  # same as finished, stop_reason "cancelled"
    tokens_counted = Signal(str, int)  # a draft and its token count with the loaded model's tokenizer

    def __init__(self, loader: Callable[[Path, DeviceChoice], Any] | None = None) -> None:
        super().__init__()
        in_process = loader is not None or in_process_requested()
        self._session = ChatSession(loader) if in_process else None
        self._process = None if in_process else ChatProcess()
        self._ep = ""  # the EP the loaded chat model runs on
        self.updates = 0  # text_generated emissions (tests and benchmarks)

    @property
    def in_process(self) -> bool:
        return self._session is not None

    def _publish(self, piece: str) -> None:
        self.updates += 1
        emit(self.text_generated, piece)

    def _remote(self, message: tuple[Any, ...], cancel: CancelToken | None = None) -> Any:
        """Run one request in the child; relay its events; return the terminal event's payload."""
        assert self._process is not None

        def on_event(event: tuple[Any, ...]) -> None:
            kind = event[0]
            if kind == "status":
                emit(self.status, event[1])
            elif kind == "started":
                emit(self.generation_started, event[1])
            elif kind == "text":
                self._publish(event[1])

        kind, *payload = self._process.request(message, on_event, cancel, self.closing.is_set)
        if kind == "failed":
            raise error_from_payload(payload[0])
        return payload[0] if payload else None

    @Slot(str, object)
    def load(self, folder: str, choice: DeviceChoice) -> None:
        def job() -> None:
            if self._session is not None:
                import_serialized("onnxruntime_genai")
                info = self._session.load(folder, choice, lambda text: emit(self.status, text))
            else:
                info = self._remote(("load", folder, choice))
            self._ep = str(info.get("ep", "") or "")
            emit(self.model_loaded, info)

        self.run_job("chat model load", job)

    @Slot(str, int, str, object, str, object, object)
    def generate(
        self,
        kind: str,
        conversation_id: int,
        text: str,
        history: History,
        system_prompt: str,
        overrides: dict[str, Any],
        cancel: CancelToken,
    ) -> None:
        """kind: send | regenerate | edit | continue."""

        def job() -> None:
            try:
                data = answer()
            except StudioError as exc:
                # The one fallback path, on this side of the pipe too: the error's fields (not its
                # words) say whether the device failed; such a device is not planned again this run.
                from engines.runtime.fallback import note_failure

                if exc.device_failure and self._ep:
                    note_failure(exc, self._ep)
                raise
            emit(self.cancelled if data.get("stop_reason") == "cancelled" else self.generation_finished, data)

        def answer() -> dict[str, Any]:
            if self._session is not None:
                return self._session.generate(
                    kind,
                    conversation_id,
                    text,
                    history,
                    system_prompt,
                    overrides,
                    on_started=lambda i: emit(self.generation_started, i),
                    on_text=self._publish,
                    cancel=cancel,
                )
            message = ("generate", kind, conversation_id, text, list(history), system_prompt, dict(overrides))
            return dict(self._remote(message, cancel))

        self.run_job("chat generation", job)

    @Slot(str)
    def count(self, text: str) -> None:
        """Count a draft's tokens. Best effort: no model, or a failure, gives no count (the view keeps
        its estimate), never an error banner."""
        if self.closing.is_set():
            return
        try:
            if self._session is not None:
                tokens = self._session.count_tokens(text)
            elif self._process is not None and self._process.alive:
                tokens = self._remote(("count", text))
            else:
                tokens = None
        except Exception as exc:  # a count is a hint; the send path reports real problems
            log.debug("token count failed: %s", exc)
            return
        if isinstance(tokens, int):
            emit(self.tokens_counted, text, tokens)

    @Slot(int)
    def forget(self, conversation_id: int) -> None:
        def job() -> None:
            if self._session is not None:
                self._session.forget(conversation_id)
            elif self._process is not None and self._process.alive:
                self._remote(("forget", conversation_id))

        self.run_job("closing a conversation", job)

    def dispose(self) -> None:
        """After the thread stopped: end the engine (and its process)."""
        if self._session is not None:
            self._session.close()
        if self._process is not None:
            self._process.close()


class ChatHost(Host):
    worker: ChatWorker
    model_loaded = Signal(object)
    generation_started = Signal(int)
    text_generated = Signal(str)
    generation_finished = Signal(object)
    cancelled = Signal(object)
    tokens_counted = Signal(str, int)
    RELAYED = (
        "model_loaded",
        "generation_started",
        "text_generated",
        "generation_finished",
        "cancelled",
        "tokens_counted",
    )
    _load = Signal(str, object)
    _generate = Signal(str, int, str, object, str, object, object)
    _forget = Signal(int)
    _count = Signal(str)

    def __init__(
        self, loader: Callable[[Path, DeviceChoice], Any] | None = None, parent: QObject | None = None
    ) -> None:
        w = ChatWorker(loader)
        super().__init__(w, "chat-host", parent)
        self.worker = w
        self._load.connect(w.load)
        self._generate.connect(w.generate)
        self._forget.connect(w.forget)
        self._count.connect(w.count)

    def load(self, folder: str | Path, choice: DeviceChoice) -> None:
        self.start()
        emit(self._load, str(folder), choice)

    def generate(
        self,
        kind: str,
        conversation_id: int,
        text: str,
        history: History,
        system_prompt: str,
        options: dict[str, Any],
    ) -> None:
        self.start()
        emit(self._generate, kind, conversation_id, text, list(history), system_prompt, dict(options), self.new_token())

    def send(
        self,
        conversation_id: int,
        text: str,
        history: History,
        system_prompt: str = "",
        options: dict[str, Any] | None = None,
    ) -> None:
        self.generate("send", conversation_id, text, history, system_prompt, options or {})

    def forget(self, conversation_id: int) -> None:
        if self.qthread.isRunning():
            emit(self._forget, conversation_id)

    def count_tokens(self, text: str) -> None:
        """Count a draft with the loaded model's tokenizer (answered by `tokens_counted`)."""
        if self.qthread.isRunning():
            emit(self._count, text)
