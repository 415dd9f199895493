"""A folder job: photos decoded and batches run by one small pool of threads, with bounded memory.

A folder has two kinds of work: decoding a photo (libjpeg and Pillow's resize, both outside the GIL)
and running a batch through the model (onnxruntime's `run`, outside the GIL too). One pool does both:
a thread that is free takes a batch to run when one is ready and a run slot is free, else the next photo
to decode. So no core waits for the other kind of work:

* On the CPU the session runs each batch on one thread and `Lanes.runs` batches run side by side, so
  decoding and inference share the cores as the work comes, rather than the decoders and onnxruntime's
  own threads pre-empting each other (tests/bench/bench_folder.py: 1,000 photos of 1 MP on 2 cores,
  in-process, 5.0 s against 5.25 s with decoders next to a 2-thread session).
* On a device (NPU, GPU) one batch runs at a time, its thread mostly waiting for the device, and the
  other threads decode.

Only `Lanes.lookahead` photos are in flight at once (handed out and not yet returned), so a folder of
any size holds at most that many decoded tensors, and batches come back in input order.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from engines.errors import CancelledError, StudioError
from engines.models.manifest import Preprocess
from engines.types import CancelToken
from engines.vision.images import preprocess

# How often the caller's thread looks at the cancel token while it waits for a batch.
CANCEL_POLL_S = 0.05
# The pool's threads live as long as the process and serve every job (each job's share of them ends
# with the job). Threads made per job got an allocator arena each, and jobs left their memory spread
# over them: a classifier's RSS over 400 mixed jobs plateaued at ~300 MB with threads per job, against
# 118-186 MB with the same threads reused and the heap trimmed after each job (engines/heap.py).
MAX_JOB_CPUS = 8  # a job uses at most this many CPUs' worth of threads (one more while a device runs)
POOL_THREADS = 2 * (MAX_JOB_CPUS + 1)  # two such jobs at once (the app's batch and doctor, say)
_POOL: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()
_busy = [0]
_busy_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _pool_lock:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="npu-studio-photos"))
        return _POOL[0]


def busy_workers() -> int:
    """Worker loops of jobs still running (0 once every job has ended)."""
    with _busy_lock:
        return _busy[0]


@dataclass(frozen=True)
class Decoded:
    """One photo, ready for the model (or the reason it is not)."""

    index: int
    path: str
    tensor: np.ndarray | None
    error: str
    preprocess_ms: float


@dataclass(frozen=True)
class Lanes:
    """How a job shares the cores: `workers` pool threads (0: everything on the calling thread, one
    photo after another), at most `runs` batches running at once, `batch` photos per run."""

    workers: int
    runs: int = 1
    batch: int = 1
    lookahead: int = 0  # photos in flight at most; at least enough for every run slot and one batch more

    @property
    def in_flight(self) -> int:
        return max(self.lookahead, self.batch * (self.runs + 1))


@dataclass(frozen=True)
class Scored:
    """One batch, back in input order: its photos (failed ones included) and one row of scores per
    photo that decoded (None when none did)."""

    photos: tuple[Decoded, ...]
    scores: np.ndarray | None
    run_ms: float  # the run's wall time per photo

    def results(self) -> Iterator[tuple[Decoded, np.ndarray | None]]:
        rows = iter(self.scores if self.scores is not None else ())
        for photo in self.photos:
            yield photo, (None if photo.tensor is None else next(rows))


# run(batch, last) -> scores: `last` is set for the batch that holds the job's last photo.
RunBatch = Callable[[np.ndarray, bool], np.ndarray]


def decode(index: int, path: str | os.PathLike[str], spec: Preprocess) -> Decoded:
    started = time.perf_counter()
    try:
        tensor = preprocess(path, spec)
    except StudioError as exc:
        return Decoded(index, str(path), None, exc.user_text(), 0.0)
    return Decoded(index, str(path), tensor, "", (time.perf_counter() - started) * 1000)


def score(photos: tuple[Decoded, ...], run: RunBatch, last: bool) -> Scored:
    tensors = [d.tensor for d in photos if d.tensor is not None]
    if not tensors:
        return Scored(photos, None, 0.0)
    started = time.perf_counter()
    scores = run(np.stack(tensors), last)
    return Scored(photos, scores, (time.perf_counter() - started) * 1000 / len(photos))


def classify_stream(
    paths: Iterable[str | os.PathLike[str]],
    spec: Preprocess,
    run: RunBatch,
    lanes: Lanes,
    cancel: CancelToken | None = None,
    early: EarlyPhotos | None = None,
) -> Generator[Scored, None, None]:
    """The photos of `paths`, decoded and run `lanes.batch` at a time, as batches in input order.
    Cancel stops handing out work (raises CancelledError); an error in a run is raised here, after the
    pool has stopped. `early`: the same photos, decoding since before the model was ready (used when
    it decodes them as `spec` says, else stopped)."""
    job = early.adopt(spec) if early is not None else None
    if job is None and lanes.workers <= 0:
        yield from _on_this_thread(paths, spec, run, lanes.batch, cancel)
        return
    if job is None:
        job = _Job(paths, spec, lanes, cancel)
    job.begin(run, lanes, cancel)
    try:
        yield from job.batches()
    finally:
        job.stop()


class EarlyPhotos:
    """Photos decoding while the model loads: a whole CLI run's start-up (imports, the model's checks,
    session creation) keeps one core busy, and the others decode the first photos meanwhile, up to
    `budget_bytes` of tensors. Pass it to classify_stream with the same paths; `stop()` when the model
    did not open."""

    def __init__(
        self, paths: Iterable[str | os.PathLike[str]], spec: Preprocess, workers: int, budget_bytes: int
    ) -> None:
        height, width = spec.input_size
        photos = max(1, budget_bytes // (height * width * 3 * 4))
        self.spec = spec
        self._job: _Job | None = _Job(paths, spec, Lanes(workers=max(1, workers), runs=0, lookahead=photos), None)

    def adopt(self, spec: Preprocess) -> _Job | None:
        """The job, for the one stream that goes on with it; None (and the job stopped) when the model
        that opened preprocesses otherwise, or when it was taken already."""
        job, self._job = self._job, None
        if job is not None and spec != self.spec:
            job.stop()
            return None
        return job

    def stop(self) -> None:
        job, self._job = self._job, None
        if job is not None:
            job.stop()


def _on_this_thread(
    paths: Iterable[str | os.PathLike[str]], spec: Preprocess, run: RunBatch, batch: int, cancel: CancelToken | None
) -> Iterator[Scored]:
    source = enumerate(paths)
    photos: list[Decoded] = []
    item = next(source, None)
    while item is not None:
        if cancel is not None and cancel.cancelled:
            raise CancelledError("Classification cancelled.")
        photos.append(decode(item[0], item[1], spec))
        item = next(source, None)
        if len(photos) == batch or item is None:
            yield score(tuple(photos), run, item is None)
            photos = []


@dataclass(frozen=True)
class _Run:
    photos: tuple[Decoded, ...]
    last: bool


@dataclass(frozen=True)
class _Photo:
    index: int
    path: str | os.PathLike[str]


class _Job:
    """The pool's shared state, behind one lock: the pool's threads wait on `work`, the caller on
    `out` (so a decoded photo wakes a thread that may run it, not the caller)."""

    def __init__(
        self, paths: Iterable[str | os.PathLike[str]], spec: Preprocess, lanes: Lanes, cancel: CancelToken | None
    ) -> None:
        self.source = enumerate(paths)
        self.spec = spec
        self.run: RunBatch | None = None  # no batch runs before begin()
        self.lanes = lanes
        self.cancel = cancel
        self.lock = threading.Lock()
        self.work = threading.Condition(self.lock)
        self.out = threading.Condition(self.lock)
        self.handed_out = 0  # photos taken from the source
        self.total: int | None = None  # known once the source is exhausted
        self.returned = 0  # photos handed back to the caller
        self.grouped = 0  # photos put in a batch
        self.decoded: dict[int, Decoded] = {}
        self.done: dict[int, Scored] = {}  # finished batches by their first photo's index
        self.running = 0
        self.failure: BaseException | None = None
        self.stopping = False
        self.workers: list[Future[None]] = []
        self._add_workers(lanes.workers)

    def _add_workers(self, count: int) -> None:
        for _ in range(count - len(self.workers)):
            self.workers.append(_pool().submit(self._work))

    def begin(self, run: RunBatch, lanes: Lanes, cancel: CancelToken | None) -> None:
        """Batches run from now on, as `lanes` says (photos decoded early stay until they are run)."""
        with self.lock:
            self.run, self.lanes, self.cancel = run, lanes, cancel
            self.work.notify_all()
        self._add_workers(lanes.workers)

    # -- the caller's side ------------------------------------------------------------------------

    def batches(self) -> Iterator[Scored]:
        while True:
            with self.lock:
                while True:
                    if self.failure is not None:
                        raise self.failure
                    if self.cancel is not None and self.cancel.cancelled:
                        raise CancelledError("Classification cancelled.")
                    scored = self.done.pop(self.returned, None)
                    if scored is not None:
                        break
                    if self.total is not None and self.returned >= self.total:
                        return
                    self.out.wait(CANCEL_POLL_S)
                self.returned += len(scored.photos)
                self.work.notify_all()  # room for more photos in flight
            yield scored

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            self.work.notify_all()
        for worker in self.workers:  # each finishes what it is doing (one photo or one run)
            worker.result()

    # -- the pool's side --------------------------------------------------------------------------

    def _work(self) -> None:
        with _busy_lock:
            _busy[0] += 1
        try:
            self._work_until_done()
        finally:
            with _busy_lock:
                _busy[0] -= 1

    def _work_until_done(self) -> None:
        while True:
            with self.lock:
                task = self._next_task()
            if task is None:
                return
            try:
                if isinstance(task, _Run):
                    assert self.run is not None  # (batches are taken only once there is one)
                    scored = score(task.photos, self.run, task.last)
                    with self.lock:
                        self.running -= 1
                        self.done[task.photos[0].index] = scored
                        self.out.notify()
                        self.work.notify_all()  # a run slot is free
                else:
                    decoded = decode(task.index, task.path, self.spec)
                    with self.lock:
                        self.decoded[task.index] = decoded
                        self.work.notify_all()  # a batch may be complete
            except BaseException as exc:  # a failed run (device lost, bad output) ends the job: raised by batches()
                with self.lock:
                    self._fail(exc)
                return

    def _fail(self, exc: BaseException) -> None:
        self.failure = self.failure or exc
        self.stopping = True
        self.work.notify_all()
        self.out.notify()

    def _next_task(self) -> _Run | _Photo | None:
        """A batch to run, else a photo to decode; waits while there is neither. Called with the lock."""
        while True:
            if self.stopping or (self.cancel is not None and self.cancel.cancelled):
                return None
            batch = self._take_batch()
            if batch is not None:
                return batch
            if self.total is None and self.handed_out - self.returned < self.lanes.in_flight:
                try:
                    item = next(self.source, None)
                except BaseException as exc:  # the caller's iterable failed
                    self._fail(exc)
                    return None
                if item is not None:
                    self.handed_out += 1
                    return _Photo(*item)
                self.total = self.handed_out
                self.work.notify_all()  # the last, short batch may be complete
                self.out.notify()  # an empty source: nothing to wait for
                continue
            if self.total is not None and self.grouped >= self.total and self.run is not None:
                return None  # every photo is in a batch: nothing is left for this thread
            self.work.wait()

    def _take_batch(self) -> _Run | None:
        if self.run is None or self.running >= self.lanes.runs:
            return None
        start = self.grouped
        end = start + self.lanes.batch
        if self.total is not None:
            end = min(end, self.total)
        if end <= start or any(i not in self.decoded for i in range(start, end)):
            return None
        self.grouped = end
        self.running += 1
        return _Run(tuple(self.decoded.pop(i) for i in range(start, end)), end == self.total)
