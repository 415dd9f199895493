"""Engine hosts: one worker thread per engine, one generic runner (app/jobs.py) to run jobs on it.

Each operation is one host method that submits one function to the host's thread; requests run one
at a time, in order, and results come out as past-tense signals. Every exception in a job becomes
`failed(error)` with a StudioError the UI can show. Cancellation is a CancelToken the host sets
directly (the thread is busy, so a queued request would arrive too late). The engines are imported
inside the worker thread, on first use, so that the main window never waits for ONNX Runtime.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.chat_host import ChatHost
from app.chat_session import loading_text
from app.jobs import SHUTDOWN_TIMEOUT_MS, Host, Job, JobContext, Worker, as_studio_error
from app.memory import release_free_memory
from app.qtcompat import emit
from engines.errors import CancelledError
from engines.types import Classification, DeviceChoice

log = logging.getLogger(__name__)

__all__ = ["SHUTDOWN_TIMEOUT_MS", "ChatHost", "DevicesHost", "Host", "VisionHost", "Worker", "as_studio_error"]


# --------------------------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------------------------


class DevicesWorker(Worker):
    def __init__(self) -> None:
        super().__init__()
        self.cancel_download = threading.Event()  # set from the GUI thread


class DevicesHost(Host):
    worker: DevicesWorker
    devices_found = Signal(object)  # engines.runtime.devices.DiscoveryReport
    download_progress = Signal(str, float)  # EP name, 0..1
    downloaded = Signal(object)  # list of engines.runtime.catalog.PrepareResult

    def __init__(self, parent: QObject | None = None) -> None:
        worker = DevicesWorker()
        super().__init__(worker, "devices-host", parent)
        self.worker = worker

    def discover(self) -> Job:
        """Look for devices (one operation on the generic runner: app/jobs.py)."""

        def find(context: JobContext) -> Any:
            context.status("Loading ONNX Runtime and looking for devices…")
            from engines.runtime.devices import discover

            return discover()

        job = self.submit("device discovery", find)
        job.returned.connect(self.devices_found)
        return job

    def download_eps(self, names: list[str]) -> Job:
        """Windows ML's EP download, asked for by the user (the view asked for consent first); then the
        devices are discovered again so the new EPs are registered and listed."""
        wanted = list(names)
        cancel = self.worker.cancel_download

        def download(context: JobContext) -> Any:
            from engines.runtime.catalog import download_eps
            from engines.runtime.devices import discover

            cancel.clear()
            context.status("Downloading execution providers from Windows Update…")
            results = download_eps(
                wanted, consent=True, cancel=cancel,
                on_progress=lambda ep, value: context.send(self.download_progress, ep, value),
            )
            context.send(self.downloaded, results)
            return discover()

        job = self.submit("execution provider download", download)
        job.returned.connect(self.devices_found)
        return job

    def cancel_download(self) -> None:
        self.worker.cancel_download.set()

    def shutdown(self, timeout_ms: int = SHUTDOWN_TIMEOUT_MS) -> bool:
        self.worker.cancel_download.set()  # a download in progress is cancelled, not waited for
        return super().shutdown(timeout_ms)


# --------------------------------------------------------------------------------------------
# Vision
# --------------------------------------------------------------------------------------------


class VisionWorker(Worker):
    """The vision host's thread state: one open classifier per model x device choice."""

    def __init__(self, classifier_factory: Callable[[Path, DeviceChoice], Any] | None = None) -> None:
        super().__init__()
        self._factory = classifier_factory  # tests: a fake engine per device choice
        self._classifiers: dict[tuple[str, DeviceChoice], Any] = {}  # one per model x device choice

    def _classifier(
        self, folder: str, choice: DeviceChoice, on_loaded: Callable[[str, Any], None] | None = None
    ) -> Any:
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
            if on_loaded is not None:
                on_loaded(self._describe(classifier, folder), classifier.placement)
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


class VisionHost(Host):
    worker: VisionWorker
    model_loaded = Signal(str, object)  # description, Placement
    started = Signal(int)  # number of photos
    classified = Signal(object)  # Classification
    progress = Signal(int, int)  # done, total
    finished = Signal(object)  # summary dict
    cancelled = Signal(int)  # photos done before the cancel

    def __init__(
        self, classifier_factory: Callable[[Path, DeviceChoice], Any] | None = None, parent: QObject | None = None
    ) -> None:
        w = VisionWorker(classifier_factory)
        super().__init__(w, "vision-host", parent)
        self.worker = w

    def _classifier(self, context: JobContext, folder: str, choice: DeviceChoice) -> Any:
        return self.worker._classifier(
            folder, choice, lambda text, placement: context.send(self.model_loaded, text, placement)
        )

    def load(self, folder: str | Path, choice: DeviceChoice) -> Job:
        """Create the session ahead of time (cached per model x device choice)."""
        where = str(folder)

        def open_classifier(context: JobContext) -> None:
            self._classifier(context, where, choice)
            release_free_memory()  # the load's temporary buffers, not kept while the app idles

        return self.submit("classifier load", open_classifier)

    def classify(self, paths: list[str], folder: str | Path, choice: DeviceChoice, k: int = 5) -> Job:
        photos, where = list(paths), str(folder)

        def run(context: JobContext) -> None:
            classifier = self._classifier(context, where, choice)
            total = len(photos)
            context.send(self.started, total)
            done = 0
            started = time.perf_counter()

            def on_result(result: Classification) -> None:
                nonlocal done
                done += 1
                context.send(self.classified, result)
                context.send(self.progress, done, total)

            try:
                results = classifier.classify_many(photos, k=k, cancel=context.cancel, on_result=on_result)
            except CancelledError:
                context.send(self.cancelled, done)
                return
            summary = {
                "count": len(results),
                "errors": sum(1 for r in results if r.error),
                "seconds": time.perf_counter() - started,
            }
            context.send(self.finished, summary)

        return self.submit("classification", run)

    def classify_bytes(self, data: bytes, name: str, folder: str | Path, choice: DeviceChoice, k: int = 5) -> Job:
        image, where = bytes(data), str(folder)

        def run(context: JobContext) -> None:
            classifier = self._classifier(context, where, choice)
            context.send(self.started, 1)
            started = time.perf_counter()
            result = classifier.classify(image, k=k)
            context.send(self.classified, result)
            context.send(self.progress, 1, 1)
            summary = {"count": 1, "errors": 0, "seconds": time.perf_counter() - started, "name": name}
            context.send(self.finished, summary)

        return self.submit("classification", run)
