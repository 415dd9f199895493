"""Hosts, workers and the one generic way to run a job on a host's thread.

Each engine has a host (in the GUI thread) that owns a worker moved to its own QThread; requests run
one at a time, in order, in that thread. `Host.submit(name, fn)` is the generic runner: `fn(context)`
runs in the host's thread and its `Job` says `started`, `returned(value)` or `errored(StudioError)`,
then `finished`, in that order, in the GUI thread. An operation is one method that submits one function
(see DevicesHost.discover); a function that streams (per-image results, progress) calls
`context.send(host.some_signal, *args)`, which emits that host signal in the GUI thread, in order with
everything else the job reports.

Why a small runner here and not superqt's `thread_worker` (which napari uses): superqt starts a worker
per call on a new QThread or the global thread pool; the hosts need one long-lived thread per engine
(requests in order, one process-wide import order for the native packages, the chat child process
driven from one thread, and a staged shutdown that waits for exactly that thread). The signal names
follow superqt's, so its patterns (and `qtbot.waitSignals([...], order="strict")`) carry over.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot

from engines import CancelToken, StudioError

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_MS = 10_000


def as_studio_error(exc: BaseException) -> StudioError:
    """Anything raised in a worker, as an error with a message a user can read."""
    if isinstance(exc, StudioError):
        return exc
    if isinstance(exc, MemoryError):
        return StudioError("The computer ran out of memory.", "Close other apps or use a smaller model.")
    from app.logs import log_file

    return StudioError(
        f"Unexpected error: {type(exc).__name__}: {exc}",
        f"NPU Studio kept running. Details are in the log file ({log_file()}).",
    )


# Native extension packages the workers share. Importing one of them from two threads at once can
# hand one thread a partially initialised module ("cannot load module more than once per process",
# numpy's "partially initialized module"): CPython's per-module import locks give up on what looks
# like a deadlock between two packages importing each other's dependencies. So they are imported
# one thread at a time, before a worker's first job.
RUNTIME_MODULES = ("numpy", "PIL.Image", "onnxruntime")
_import_lock = threading.Lock()


def import_serialized(*modules: str) -> None:
    """Import `modules` (default: RUNTIME_MODULES) holding the process-wide import lock (through the
    engines' one import of a runtime, which turns its telemetry off)."""
    from engines import load_runtime

    wanted = [m for m in (modules or RUNTIME_MODULES) if m not in sys.modules]
    if not wanted:
        return
    with _import_lock:
        for module in wanted:
            try:
                load_runtime(module)
            except ImportError as exc:  # reported by the job that needs it, with its own message
                log.debug("could not import %s: %s", module, exc)


class Job(QObject):
    """One submitted operation, as the GUI thread sees it (signals arrive there, in this order)."""

    started = Signal()
    returned = Signal(object)
    errored = Signal(object)  # StudioError
    finished = Signal()
    sent = Signal(object, object)  # a host signal and its arguments (JobContext.send)

    def __init__(self, name: str, fn: Callable[[JobContext], Any], token: CancelToken, report: bool) -> None:
        super().__init__()
        self.name = name
        self.fn = fn
        self.token = token
        self.report = report  # errors also go to the host's `failed` (the views' error banners)

    def cancel(self) -> None:
        self.token.cancel()


class JobContext:
    """What a job's function gets in the worker thread: the cancel token, `status` and `send`."""

    def __init__(self, job: Job, worker: Worker) -> None:
        self._job = job
        self._worker = worker
        self.cancel = job.token

    @property
    def cancelled(self) -> bool:
        return self.cancel.cancelled

    def status(self, text: str) -> None:
        self._worker.status.emit(text)

    def send(self, signal: Any, *args: Any) -> None:
        """Emit `signal` (one of the host's own signals) with `args`, in the GUI thread."""
        self._job.sent.emit(signal, args)


class Worker(QObject):
    """Base worker: runs jobs with one error policy and a closing flag checked before each job."""

    failed = Signal(object)  # StudioError
    status = Signal(str)  # loading / compiling progress for the status bar ("" when idle)

    def __init__(self, runtime: bool = True) -> None:
        super().__init__()
        self.closing = threading.Event()
        # Whether this worker's jobs run models (numpy, Pillow, ONNX Runtime imported first, in order); a
        # storage worker's do not, and must not pay for them (it answers while the window opens).
        self.runtime = runtime

    def dispose(self) -> None:
        """Release what the worker holds once its thread has stopped (override)."""

    @Slot(object)
    def run_submitted(self, job: Job) -> None:
        """Run a job from `Host.submit` (in this worker's thread)."""
        if self.closing.is_set():
            log.debug("skipping %s: shutting down", job.name)
            return
        job.started.emit()
        try:
            if self.runtime:
                import_serialized()
            value = job.fn(JobContext(job, self))
        except Exception as exc:  # every failure reaches the UI as a readable message
            if not isinstance(exc, StudioError):
                log.exception("%s failed", job.name)
            else:
                log.info("%s failed: %s", job.name, exc.user_text())
            error = as_studio_error(exc)
            job.errored.emit(error)
            if job.report:
                self.failed.emit(error)
        else:
            job.returned.emit(value)
        finally:
            self.status.emit("")
            job.finished.emit()


class Host(QObject):
    """Owns a worker and its thread; lives in the GUI thread.

    The worker's signals are relayed by the host's own signals: the relay is a queued connection into
    the GUI thread, so whatever is connected to a host (widgets, lambdas) runs in the GUI thread.
    """

    failed = Signal(object)
    status = Signal(str)
    RELAYED: tuple[str, ...] = ()
    _submitted = Signal(object)  # a Job, to the worker's thread
    _queued = Signal(object)  # a Job, to this host (GUI thread) on the next event loop turn

    def __init__(self, worker: Worker, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.worker = worker
        self.qthread = QThread()
        self.qthread.setObjectName(name)
        worker.moveToThread(self.qthread)
        # Tokens of requests that may still be queued or running; cancel() cancels them all.
        self._tokens: deque[CancelToken] = deque(maxlen=32)
        for signal in ("failed", "status", *self.RELAYED):
            getattr(worker, signal).connect(getattr(self, signal))
        self._submitted.connect(worker.run_submitted)
        self._queued.connect(self._dispatch, Qt.ConnectionType.QueuedConnection)
        self._jobs: set[Job] = set()  # kept alive until they finish

    def submit(self, name: str, fn: Callable[[JobContext], Any], *, report_errors: bool = True) -> Job:
        """Run `fn(context)` in this host's thread, after the requests queued before it.

        The job reaches the thread on the GUI thread's next event loop turn, so whatever the caller
        connects to the returned Job (in the same call) hears every signal, however fast `fn` is."""
        job = Job(name, fn, self.new_token(), report_errors)
        self._jobs.add(job)
        job.sent.connect(self._deliver)
        job.finished.connect(lambda: self._jobs.discard(job))
        self.start()
        self._queued.emit(job)
        return job

    @Slot(object)
    def _dispatch(self, job: Job) -> None:
        if not self.worker.closing.is_set():
            self._submitted.emit(job)

    @Slot(object, object)
    def _deliver(self, signal: Any, args: tuple[Any, ...]) -> None:
        # Runs in the GUI thread (the host lives there); nothing is delivered once shutdown began.
        if not self.worker.closing.is_set():
            signal.emit(*args)

    def start(self) -> None:
        # After shutdown() nothing may start the thread again: nobody would stop it before exit.
        if self.worker.closing.is_set():
            return
        if not self.qthread.isRunning():
            self.qthread.start()

    def new_token(self) -> CancelToken:
        token = CancelToken()
        self._tokens.append(token)
        return token

    def cancel(self) -> None:
        """Cancel the running request and any queued behind it."""
        while self._tokens:
            self._tokens.popleft().cancel()

    def shutdown(self, timeout_ms: int = SHUTDOWN_TIMEOUT_MS) -> bool:
        """Cancel the current job, drop queued ones, stop the thread and wait. True when it stopped."""
        self.worker.closing.set()
        self.cancel()
        # Nothing a worker says from now on is delivered: results posted to a GUI thread that no longer
        # runs its event loop would be destroyed during interpreter shutdown, too late to do so safely.
        for signal in ("failed", "status", *self.RELAYED):
            getattr(self.worker, signal).disconnect(getattr(self, signal))
        stopped = True
        if self.qthread.isRunning():
            self.qthread.quit()
            stopped = bool(self.qthread.wait(timeout_ms))
            if not stopped:
                log.warning("%s did not stop within %d ms", self.qthread.objectName(), timeout_ms)
        if stopped:
            self.worker.dispose()
        QCoreApplication.removePostedEvents(self)
        for job in list(self._jobs):
            QCoreApplication.removePostedEvents(job)
        self._jobs.clear()
        return stopped


