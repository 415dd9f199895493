"""The Benchmark view's host: benchmark runs, the model list and the run history, in a worker thread.

A run can take a minute and creates its own sessions, so it never touches the UI thread. Progress is
throttled (stage changes always go through; details at most ~20 times a second), each device's result
is sent as soon as it is measured, and a finished run is added to the history before it is announced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from app import paths
from app.hosts.jobs import Host, Job, JobContext, Worker
from app.storage.bench_history import BenchHistory
from engines import (
    BenchConfig,
    BenchModel,
    BenchProgress,
    BenchRun,
    CancelledError,
    DeviceResult,
    StudioError,
)

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.05
Runner = Callable[..., Any]  # engines.bench.runner.run_benchmark's signature


def list_bench_models(bundled_dir: Path | None = None, user_dir: Path | None = None) -> list[BenchModel]:
    """Usable classifiers and chat models of the library (bundled first, then the user's)."""
    from engines import BENCH_CHAT, BENCH_VISION, KIND_CLASSIFIER, KIND_LLM, scan_library

    kinds = {KIND_CLASSIFIER: BENCH_VISION, KIND_LLM: BENCH_CHAT}
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
    """The bench host's thread state: the run history, the runner and the model lister (tests: fakes)."""

    def __init__(
        self,
        history: BenchHistory | None = None,
        runner: Runner | None = None,
        models: Callable[[], list[BenchModel]] | None = None,
    ) -> None:
        super().__init__()
        self._history = history
        self.runner = runner
        self.models = models or list_bench_models

    @property
    def history(self) -> BenchHistory:
        if self._history is None:
            self._history = BenchHistory()
        return self._history


class BenchHost(Host):
    worker: BenchWorker
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
        parent: QObject | None = None,
    ) -> None:
        w = BenchWorker(history, runner, models)
        super().__init__(w, "bench-host", parent)
        self.worker = w

    def run(self, config: BenchConfig) -> Job:
        def measure(context: JobContext) -> None:
            context.status("Benchmarking…")
            runner = self.worker.runner
            if runner is None:
                from engines import run_benchmark

                runner = run_benchmark
            try:
                result = runner(
                    config,
                    on_progress=_Throttle(lambda progress: context.send(self.progressed, progress)),
                    on_result=lambda device: context.send(self.result_ready, device),
                    cancel=context.cancel,
                )
            except CancelledError:
                context.send(self.cancelled)
                return
            saved: StudioError | None = None
            try:
                self.worker.history.append(result)
            except StudioError as exc:
                saved = exc
            context.send(self.finished, result)
            if saved is not None:
                context.send(self.failed, saved)

        return self.submit("benchmark", measure)

    def load_history(self) -> Job:
        def load(context: JobContext) -> None:
            context.send(self.history_loaded, self.worker.history.runs())

        return self.submit("benchmark history", load)

    def clear_history(self) -> Job:
        def clear(context: JobContext) -> None:
            self.worker.history.clear()
            context.send(self.history_loaded, [])

        return self.submit("clearing the benchmark history", clear)

    def list_models(self) -> Job:
        def listing(context: JobContext) -> None:
            context.send(self.models_listed, self.worker.models())

        return self.submit("listing models", listing)


class BenchViewSide(Protocol):
    """What the bench host talks to in the Benchmark view (ui.bench.view.BenchView)."""

    @property
    def run_requested(self) -> SignalInstance: ...
    @property
    def cancel_requested(self) -> SignalInstance: ...
    @property
    def clear_history_requested(self) -> SignalInstance: ...
    @property
    def status_changed(self) -> SignalInstance: ...
    def show_progress(self, progress: BenchProgress) -> None: ...
    def add_result(self, result: DeviceResult) -> None: ...
    def show_finished(self, run: BenchRun) -> None: ...
    def show_cancelled(self) -> None: ...
    def show_error(self, error: object) -> None: ...
    def set_history(self, runs: Sequence[BenchRun]) -> None: ...
    def set_models(self, models: Sequence[BenchModel]) -> None: ...
    def show_status(self, text: str) -> None: ...


def wire_bench_view(view: BenchViewSide, host: BenchHost, set_status: Callable[[str], None] | None = None) -> None:
    """Connect a BenchView (ui/bench/view.py) and the host both ways, and fill the view."""
    view.run_requested.connect(host.run)
    view.cancel_requested.connect(host.cancel)
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
