"""The Benchmark view's host: benchmark runs, the model list and the run history, in a worker thread.

A run can take a minute and creates its own sessions, so it never touches the UI thread. Progress is
throttled (stage changes always go through; details at most ~20 times a second), each device's result
is sent as soon as it is measured, and a finished run is added to the history before it is announced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app import paths
from app.bench_history import BenchHistory
from app.jobs import Host, Worker
from engines.bench.data import CHAT, VISION, BenchConfig, BenchModel, BenchProgress
from engines.errors import CancelledError, StudioError
from engines.types import CancelToken

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.05
Runner = Callable[..., Any]  # engines.bench.runner.run_benchmark's signature


def list_bench_models(bundled_dir: Path | None = None, user_dir: Path | None = None) -> list[BenchModel]:
    """Usable classifiers and chat models of the library (bundled first, then the user's)."""
    from engines.models.library import KIND_CLASSIFIER, KIND_LLM, scan_library

    kinds = {KIND_CLASSIFIER: VISION, KIND_LLM: CHAT}
    entries = scan_library(
        bundled_dir if bundled_dir is not None else paths.bundled_models_dir(),
        user_dir if user_dir is not None else paths.user_models_dir(),
    )
    return [
        BenchModel(e.name, e.display_name, kinds[e.kind], e.folder) for e in entries if e.usable and e.kind in kinds
    ]


class _Throttle:
    def __init__(self, emit: Callable[[BenchProgress], None]) -> None:
        self._emit = emit
        self._last = 0.0
        self._stage = ""

    def __call__(self, progress: BenchProgress) -> None:
        now = time.monotonic()
        if progress.stage != self._stage or progress.fraction >= 1.0 or now - self._last >= PROGRESS_INTERVAL_S:
            self._stage = progress.stage
            self._last = now
            self._emit(progress)


class BenchWorker(Worker):
    progressed = Signal(object)  # BenchProgress
    result_ready = Signal(object)  # DeviceResult, as each device finishes
    finished = Signal(object)  # BenchRun (already in the history)
    cancelled = Signal()
    history_loaded = Signal(object)  # list[BenchRun], oldest first
    models_listed = Signal(object)  # list[BenchModel]

    def __init__(
        self,
        history: BenchHistory | None = None,
        runner: Runner | None = None,
        models: Callable[[], list[BenchModel]] | None = None,
    ) -> None:
        super().__init__()
        self._history = history
        self._runner = runner
        self._models = models or list_bench_models

    @property
    def history(self) -> BenchHistory:
        if self._history is None:
            self._history = BenchHistory()
        return self._history

    @Slot(object, object)
    def run(self, config: BenchConfig, cancel: CancelToken) -> None:
        def job() -> None:
            self.status.emit("Benchmarking…")
            runner = self._runner
            if runner is None:
                from engines.bench.runner import run_benchmark

                runner = run_benchmark
            try:
                result = runner(
                    config, on_progress=_Throttle(self.progressed.emit), on_result=self.result_ready.emit, cancel=cancel
                )
            except CancelledError:
                self.cancelled.emit()
                return
            saved: StudioError | None = None
            try:
                self.history.append(result)
            except StudioError as exc:
                saved = exc
            self.finished.emit(result)
            if saved is not None:
                self.failed.emit(saved)

        self.run_job("benchmark", job)

    @Slot()
    def load_history(self) -> None:
        self.run_job("benchmark history", lambda: self.history_loaded.emit(self.history.runs()))

    @Slot()
    def clear_history(self) -> None:
        def job() -> None:
            self.history.clear()
            self.history_loaded.emit([])

        self.run_job("clearing the benchmark history", job)

    @Slot()
    def list_models(self) -> None:
        self.run_job("listing models", lambda: self.models_listed.emit(self._models()))


class BenchHost(Host):
    worker: BenchWorker
    _run = Signal(object, object)
    _load_history = Signal()
    _clear_history = Signal()
    _list_models = Signal()

    def __init__(
        self,
        history: BenchHistory | None = None,
        runner: Runner | None = None,
        models: Callable[[], list[BenchModel]] | None = None,
        parent: QObject | None = None,
    ) -> None:
        w = BenchWorker(history, runner, models)
        super().__init__(w, "bench-host", parent)
        self.worker = w
        self.progressed, self.result_ready, self.finished = w.progressed, w.result_ready, w.finished
        self.cancelled, self.history_loaded, self.models_listed = w.cancelled, w.history_loaded, w.models_listed
        self._run.connect(w.run)
        self._load_history.connect(w.load_history)
        self._clear_history.connect(w.clear_history)
        self._list_models.connect(w.list_models)

    def run(self, config: BenchConfig) -> None:
        self.start()
        self._run.emit(config, self.new_token())

    def load_history(self) -> None:
        self.start()
        self._load_history.emit()

    def clear_history(self) -> None:
        self.start()
        self._clear_history.emit()

    def list_models(self) -> None:
        self.start()
        self._list_models.emit()


def wire_bench_view(view: Any, host: BenchHost, set_status: Callable[[str], None] | None = None) -> None:
    """Connect a BenchView (ui/bench_view.py) and the host both ways, and fill the view."""
    view.run_requested.connect(host.run)
    view.cancel_requested.connect(host.cancel)
    view.refresh_requested.connect(host.list_models)
    view.clear_history_requested.connect(host.clear_history)
    host.progressed.connect(view.show_progress)
    host.result_ready.connect(view.add_result)
    host.finished.connect(view.show_finished)
    host.cancelled.connect(view.show_cancelled)
    host.failed.connect(view.show_error)
    host.history_loaded.connect(view.set_history)
    host.models_listed.connect(view.set_models)
    host.status.connect(view.show_status)  # a view slot: runs in the GUI thread
    if set_status is not None:
        view.status_changed.connect(set_status)
    # Models and history load when the view is shown (`load_bench_view`, called by app.gui): starting the
    # worker here would import ONNX Runtime while the main window is still being put on screen.


def load_bench_view(host: BenchHost) -> None:
    """Fill the view: the models to choose from and the run history (in the worker)."""
    host.list_models()
    host.load_history()
