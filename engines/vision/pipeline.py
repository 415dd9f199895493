"""Decode photos ahead of inference, in a small thread pool, with bounded memory.

Decoding a photo (libjpeg, Pillow's resize) releases the GIL, and so does onnxruntime's `run`: while
the classifier runs one batch, the pool decodes the next photos. Only a fixed number of photos is in
flight at once (the look-ahead), so a folder of any size holds at most that many decoded tensors, and
results come back in input order.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from engines.errors import CancelledError, StudioError
from engines.types import CancelToken
from engines.vision.images import Preprocess, preprocess


@dataclass(frozen=True)
class Decoded:
    """One photo, ready for the model (or the reason it is not)."""

    index: int
    path: str
    tensor: np.ndarray | None
    error: str
    preprocess_ms: float


def decode_workers() -> int:
    """Threads that decode while the model runs: one per core, at most 4 (more only adds memory)."""
    return max(1, min(4, os.cpu_count() or 1))


def _decode(index: int, path: str | os.PathLike[str], spec: Preprocess) -> Decoded:
    started = time.perf_counter()
    try:
        tensor = preprocess(path, spec)
    except StudioError as exc:
        return Decoded(index, str(path), None, exc.user_text(), 0.0)
    return Decoded(index, str(path), tensor, "", (time.perf_counter() - started) * 1000)


def decode_ahead(
    paths: Iterable[str | os.PathLike[str]],
    spec: Preprocess,
    *,
    workers: int | None = None,
    lookahead: int = 16,
    cancel: CancelToken | None = None,
) -> Iterator[Decoded]:
    """Decoded photos in input order, `lookahead` photos decoded ahead at most, on `workers` pool threads
    (0: on the calling thread, no overlap). Cancel is checked before each photo is handed out (raises
    CancelledError); photos not started yet are dropped."""
    workers = decode_workers() if workers is None else workers
    if workers <= 0:
        for index, path in enumerate(paths):
            if cancel is not None and cancel.cancelled:
                raise CancelledError("Classification cancelled.")
            yield _decode(index, path, spec)
        return
    source = enumerate(paths)
    pending: deque[Future[Decoded]] = deque()
    pool = ThreadPoolExecutor(workers, thread_name_prefix="npu-studio-decode")

    def submit_next() -> None:
        item = next(source, None)
        if item is not None:
            pending.append(pool.submit(_decode, item[0], item[1], spec))

    try:
        for _ in range(max(lookahead, workers)):
            submit_next()
        while pending:
            if cancel is not None and cancel.cancelled:
                raise CancelledError("Classification cancelled.")
            decoded = pending.popleft().result()
            submit_next()
            yield decoded
    finally:
        # Photos already being decoded finish (a few ms each); the rest never start.
        pool.shutdown(wait=True, cancel_futures=True)
