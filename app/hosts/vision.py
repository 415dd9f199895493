"""The classifier's host: one open classifier per model x device choice, photos classified on its own thread.

Each operation is one host method that submits one function to the host's thread; requests run one at a time,
in order, and results come out as past-tense signals. Cancellation is a CancelToken the host sets directly.
The engines are imported inside the worker thread, on first use, so the main window never waits for ONNX Runtime.
How a model is opened is the opener the composition root passes (`open_library_classifier` in the app).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal

from app.hosts.jobs import Host, Job, JobContext, Worker
from engines import (
    CancelledError,
    CancelToken,
    Classification,
    DeviceChoice,
    Placement,
    loading_text,
    release_free_memory,
)

log = logging.getLogger(__name__)


class OpenClassifier(Protocol):
    """What the host asks of an open classifier (engines.Classifier is one)."""

    @property
    def placement(self) -> Placement: ...

    def classify(self, source: str | bytes, k: int = 5) -> Classification: ...

    def classify_many(
        self,
        paths: Sequence[str],
        k: int = 5,
        cancel: CancelToken | None = None,
        on_result: Callable[[Classification], None] | None = None,
    ) -> list[Classification]: ...


class ClassifierOpener(Protocol):
    """Opens the model in `folder` on `choice`, reporting progress ("Compiling for the NPU…")."""

    def __call__(self, folder: Path, choice: DeviceChoice, on_progress: Callable[[str], None]) -> OpenClassifier: ...


def open_library_classifier(folder: Path, choice: DeviceChoice, on_progress: Callable[[str], None]) -> OpenClassifier:
    """The model opened on `choice` through engines.open_classifier, exactly as the CLI opens it: the QDQ
    variant on a usable NPU, the compiled-model cache, verification and the one fallback path."""
    import engines
    from app import paths

    return engines.open_classifier(
        folder, choice, cache=paths.compiled_cache_dir(), on_progress=on_progress, library=paths.model_roots()
    )


class VisionWorker(Worker):
    """The vision host's thread state: one open classifier per model x device choice."""

    def __init__(self, opener: ClassifierOpener) -> None:
        super().__init__()
        self._open = opener
        self._classifiers: dict[tuple[str, DeviceChoice], OpenClassifier] = {}

    def classifier(
        self, folder: str, choice: DeviceChoice, on_loaded: Callable[[str, Placement], None] | None = None
    ) -> OpenClassifier:
        """The model in `folder` opened on `choice` (once: cached per model x device choice)."""
        key = (str(Path(folder).resolve()), choice)
        classifier = self._classifiers.get(key)
        if classifier is None:
            self.status.emit(loading_text(Path(folder).name, choice))
            started = time.perf_counter()
            classifier = self._open(Path(folder), choice, self.status.emit)
            self._classifiers[key] = classifier
            log.info("classifier %s ready on %s in %.2f s", folder, choice.describe(), time.perf_counter() - started)
            if on_loaded is not None:
                on_loaded(f"{Path(folder).name} · {classifier.placement.badge()}", classifier.placement)
        return classifier

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

    def __init__(self, opener: ClassifierOpener = open_library_classifier, parent: QObject | None = None) -> None:
        w = VisionWorker(opener)
        super().__init__(w, "vision-host", parent)
        self.worker = w

    def _classifier(self, context: JobContext, folder: str, choice: DeviceChoice) -> OpenClassifier:
        return self.worker.classifier(
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
            log.info("classified %d photo(s) on %s in %.0f ms", total, choice.describe(), summary["seconds"] * 1000)
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
