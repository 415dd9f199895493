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

from app.chat_host import ChatHost
from app.chat_process import loading_text
from app.jobs import SHUTDOWN_TIMEOUT_MS, Host, Job, JobContext, Worker, as_studio_error
from app.qtcompat import emit
from engines.errors import CancelledError
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
