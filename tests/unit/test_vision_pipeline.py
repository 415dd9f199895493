"""The folder pipeline: one pool decodes photos and runs batches, in order, bounded, cancellable."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import engines
from engines.errors import CancelledError
from engines.models.manifest import Preprocess
from engines.runtime.sessions import SessionSettings
from engines.types import CancelToken, DeviceChoice, cpu_count
from engines.vision import classifier as classifier_module
from engines.vision import pipeline
from engines.vision.classifier import (
    CPU_MAX_BATCH,
    SIDE_BY_SIDE_BATCH,
    SIDE_BY_SIDE_MIN_PHOTOS,
    ImageClassifier,
)
from engines.vision.pipeline import Lanes, Scored, classify_stream
from tests.unit.tiny_models import colour_classifier

SPEC = Preprocess(input_size=(8, 8), resize_shorter=8)


def _photos(folder: Path, count: int) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"{i:03d}.png"
        Image.new("RGB", (40 + i, 30), (i * 7 % 256, 255 - i * 5 % 256, 90)).save(path)
        paths.append(path)
    return paths


def _means(batch: np.ndarray, last: bool) -> np.ndarray:
    """A stand-in model: one score per channel, the channel's mean."""
    return batch.mean(axis=(2, 3))


def _flat(batches: list[Scored]) -> list[tuple[pipeline.Decoded, np.ndarray | None]]:
    return [pair for scored in batches for pair in scored.results()]


def _pool_threads() -> int:
    """Worker loops of jobs still running (the pool's idle threads serve the next job)."""
    return pipeline.busy_workers()


def test_batches_come_back_in_input_order_with_the_scores_of_one_photo_after_another(tmp_path: Path) -> None:
    paths = _photos(tmp_path / "p", 30)
    broken = tmp_path / "p" / "broken.jpg"
    broken.write_bytes(b"not a jpeg")
    paths.insert(11, broken)
    pooled = _flat(list(classify_stream(paths, SPEC, _means, Lanes(workers=3, runs=2, batch=3))))
    alone = _flat(list(classify_stream(paths, SPEC, _means, Lanes(workers=0, batch=1))))
    assert [d.index for d, _ in pooled] == list(range(len(paths)))
    assert [d.path for d, _ in pooled] == [str(p) for p in paths]
    assert pooled[11][0].tensor is None and pooled[11][1] is None and "is not an image" in pooled[11][0].error
    for (a, a_scores), (_, b_scores) in zip(pooled, alone, strict=True):
        assert (a_scores is None) == (b_scores is None)
        if a_scores is not None and b_scores is not None:
            assert np.array_equal(a_scores, b_scores)
            assert a.preprocess_ms > 0
    assert not _pool_threads()  # the pool is gone when the job is


def test_only_the_batch_with_the_last_photo_is_the_last(tmp_path: Path) -> None:
    paths = _photos(tmp_path / "p", 7)
    lasts: list[tuple[int, bool]] = []

    def run(batch: np.ndarray, last: bool) -> np.ndarray:
        lasts.append((len(batch), last))
        return _means(batch, last)

    for lanes in (Lanes(workers=2, runs=2, batch=3), Lanes(workers=0, batch=3)):
        lasts.clear()
        assert len(_flat(list(classify_stream(paths, SPEC, run, lanes)))) == 7
        assert sorted(lasts) == [(1, True), (3, False), (3, False)]


def _record_decoding_threads(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The names of the threads that decode photos from now on (filled as they decode)."""
    threads: set[str] = set()
    real = pipeline.preprocess

    def recording(path: object, spec: Preprocess) -> np.ndarray:
        threads.add(threading.current_thread().name)
        return real(path, spec)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "preprocess", recording)
    return threads


def test_the_pool_decodes_and_never_gets_more_photos_ahead_than_it_may(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _photos(tmp_path / "p", 40)
    threads = _record_decoding_threads(monkeypatch)
    pulled = 0

    def source() -> Iterator[Path]:
        nonlocal pulled
        for path in paths:
            pulled += 1
            yield path

    lanes = Lanes(workers=2, runs=2, batch=2, lookahead=5)
    ahead = []
    returned = 0
    for scored in classify_stream(source(), SPEC, _means, lanes):
        ahead.append(pulled - returned)  # pulled from the source and not yet handed back
        returned += len(scored.photos)
    assert returned == 40
    assert max(ahead) <= lanes.in_flight == 6  # at least a batch per run slot and one more
    assert threads and all(name.startswith("npu-studio-photos") for name in threads)


@pytest.mark.parametrize(("workers", "on_pool"), [(1, True), (0, False)])
def test_one_worker_still_works_on_the_pool_and_zero_on_the_calling_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, on_pool: bool
) -> None:
    paths = _photos(tmp_path / "p", 6)
    threads = _record_decoding_threads(monkeypatch)
    decoded = _flat(list(classify_stream(paths, SPEC, _means, Lanes(workers=workers, batch=2))))
    assert [d.path for d, _ in decoded] == [str(p) for p in paths]
    assert all(name.startswith("npu-studio-photos") for name in threads) == on_pool
    assert (threading.current_thread().name in threads) != on_pool


@pytest.mark.parametrize("runs", [1, 2, 3])
def test_no_more_batches_run_at_once_than_the_lanes_allow_and_as_many_do(tmp_path: Path, runs: int) -> None:
    paths = _photos(tmp_path / "p", 24)
    lock = threading.Lock()
    running = 0
    most = 0

    def run(batch: np.ndarray, last: bool) -> np.ndarray:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.03)  # a run long enough for the other threads to decode and start theirs
        with lock:
            running -= 1
        return _means(batch, last)

    scored = list(classify_stream(paths, SPEC, run, Lanes(workers=4, runs=runs, batch=2)))
    assert sum(len(s.photos) for s in scored) == 24
    assert most == runs


def test_classifier_sessions_do_not_spin_while_the_decoders_need_the_cores(tmp_path: Path) -> None:
    classifier = ImageClassifier.from_folder(colour_classifier(tmp_path / "colours"), DeviceChoice.parse("cpu"))
    options = classifier.session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


@pytest.mark.parametrize("workers", [2, 0])
def test_cancel_stops_handing_out_work_and_the_pool_ends(tmp_path: Path, workers: int) -> None:
    paths = _photos(tmp_path / "p", 40)
    token = CancelToken()
    seen = 0
    runs = 0

    def run(batch: np.ndarray, last: bool) -> np.ndarray:
        nonlocal runs
        runs += 1
        return _means(batch, last)

    with pytest.raises(CancelledError):
        for scored in classify_stream(paths, SPEC, run, Lanes(workers=workers, runs=2, batch=2), cancel=token):
            seen += len(scored.photos)
            if seen >= 4:
                token.cancel()
    assert seen == 4
    assert runs <= 2 + 2 + 1  # what was running or ready when Stop came; the other 15 batches never ran
    assert not _pool_threads()


def test_a_failed_run_is_raised_to_the_caller_after_the_pool_stops(tmp_path: Path) -> None:
    paths = _photos(tmp_path / "p", 20)

    def run(batch: np.ndarray, last: bool) -> np.ndarray:
        raise RuntimeError("the device was removed")

    with pytest.raises(RuntimeError, match="the device was removed"):
        list(classify_stream(paths, SPEC, run, Lanes(workers=3, runs=2, batch=2)))
    assert not _pool_threads()


def test_a_caller_that_stops_early_leaves_no_thread_behind(tmp_path: Path) -> None:
    paths = _photos(tmp_path / "p", 20)
    stream = classify_stream(paths, SPEC, _means, Lanes(workers=2, runs=2, batch=2))
    next(stream)
    assert _pool_threads() >= 1  # (the second may not have started yet)
    stream.close()
    assert not _pool_threads()


def test_classify_many_streams_in_input_order_with_the_same_answers_as_one_by_one(tmp_path: Path) -> None:
    classifier = ImageClassifier.from_folder(colour_classifier(tmp_path / "colours"), DeviceChoice.parse("cpu"))
    paths = _photos(tmp_path / "p", SIDE_BY_SIDE_MIN_PHOTOS + 5)
    broken = tmp_path / "p" / "empty.png"
    broken.write_bytes(b"")
    paths.insert(5, broken)
    streamed: list[str] = []
    for workers in (3, None):
        streamed.clear()
        results = classifier.classify_many(
            paths, k=3, on_result=lambda r: streamed.append(r.path), decode_workers=workers
        )
        assert streamed == [str(p) for p in paths]  # streamed as they finish, already in order
        assert [r.path for r in results] == streamed
        assert "empty" in results[5].error
        for result, path in zip(results, paths, strict=True):
            if path == broken:
                continue
            single = classifier.classify(path, k=3)
            assert [s.index for s in result.top] == [s.index for s in single.top]
            assert np.allclose([s.probability for s in result.top], [s.probability for s in single.top], atol=1e-5)


def _recorded_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(batch size, the session's intra-op threads) of every run from now on."""
    runs: list[tuple[int, int]] = []
    real = ImageClassifier.infer

    def recording(self: ImageClassifier, batch: np.ndarray) -> np.ndarray:
        runs.append((batch.shape[0], self.session.get_session_options().intra_op_num_threads))
        return real(self, batch)

    monkeypatch.setattr(ImageClassifier, "infer", recording)
    return runs


def test_a_cpu_folder_runs_small_batches_side_by_side_on_a_one_thread_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(classifier_module, "cpu_count", lambda: 2)
    folder = colour_classifier(tmp_path / "colours")
    classifier = ImageClassifier.from_folder(folder, DeviceChoice.parse("cpu"))
    assert classifier.max_batch == CPU_MAX_BATCH
    assert classifier.session.get_session_options().intra_op_num_threads == 0  # one photo: every core
    runs = _recorded_runs(monkeypatch)
    paths = _photos(tmp_path / "p", SIDE_BY_SIDE_MIN_PHOTOS + 1)
    assert len(classifier.classify_many(paths)) == len(paths)
    assert {threads for _, threads in runs} == {1}  # a session of its own, one thread per run
    assert sorted(size for size, _ in runs) == [1] + [SIDE_BY_SIDE_BATCH] * (SIDE_BY_SIDE_MIN_PHOTOS // 2)
    runs.clear()
    assert len(classifier.classify_many(paths[:4])) == 4  # a few photos: the classifier's own session
    assert runs == [(4, 0)]


def test_an_explicit_thread_count_and_batch_size_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = colour_classifier(tmp_path / "colours")
    threads = cpu_count()  # all of them in one run: nothing left for a second run side by side
    settings = SessionSettings(intra_op_threads=threads)
    classifier = ImageClassifier.from_folder(folder, DeviceChoice.parse("cpu"), settings=settings, max_batch=8)
    assert classifier.max_batch == 8
    runs = _recorded_runs(monkeypatch)
    paths = _photos(tmp_path / "p", SIDE_BY_SIDE_MIN_PHOTOS + 1)
    assert len(classifier.classify_many(paths)) == len(paths)
    assert {t for _, t in runs} == {threads}
    assert sorted(size for size, _ in runs) == [1] + [8] * 3


def test_opened_for_folders_on_the_cpu_the_classifier_needs_no_second_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(classifier_module, "cpu_count", lambda: 2)
    folder = colour_classifier(tmp_path / "colours")
    made: list[object] = []
    real = classifier_module.create_session

    def counting(*args: object, **kwargs: object) -> object:
        made.append(args[0])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(classifier_module, "create_session", counting)
    opened = engines.open_classifier(folder, "cpu", for_folders=True)
    assert opened.engine.session.get_session_options().intra_op_num_threads == 1
    results = opened.classify_many(_photos(tmp_path / "p", SIDE_BY_SIDE_MIN_PHOTOS + 1))
    assert len(results) == SIDE_BY_SIDE_MIN_PHOTOS + 1 and not any(r.error for r in results)
    assert len(made) == 1
    auto = engines.open_classifier(folder, "cpu")  # not for folders: ONNX Runtime's default threads
    assert auto.engine.session.get_session_options().intra_op_num_threads == 0


def test_photos_decoded_while_the_model_opens_are_used_and_none_is_decoded_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _photos(tmp_path / "p", 12)
    decoded: list[str] = []
    real = pipeline.preprocess

    def recording(path: object, spec: Preprocess) -> np.ndarray:
        decoded.append(str(path))
        return real(path, spec)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "preprocess", recording)
    early = pipeline.EarlyPhotos(paths, SPEC, workers=1, budget_bytes=5 * 8 * 8 * 3 * 4)  # five photos ahead
    deadline = time.monotonic() + 10
    while len(decoded) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert len(decoded) == 5  # its budget, and no batch runs before the model is there
    batches = list(classify_stream(paths, SPEC, _means, Lanes(workers=2, runs=2, batch=2), early=early))
    alone = _flat(list(classify_stream(paths, SPEC, _means, Lanes(workers=0, batch=1))))
    assert sorted(decoded) == sorted([str(p) for p in paths] * 2)  # once by each of the two streams
    assert [(d.path, s.tolist()) for d, s in _flat(batches)] == [(d.path, s.tolist()) for d, s in alone]  # type: ignore[union-attr]
    assert not _pool_threads()


def test_early_photos_decoded_otherwise_are_dropped_and_a_model_that_fails_to_open_stops_them(tmp_path: Path) -> None:
    paths = _photos(tmp_path / "p", 6)
    early = pipeline.EarlyPhotos(paths, SPEC, workers=1, budget_bytes=1 << 20)
    other = Preprocess(input_size=(4, 4), resize_shorter=4)  # the variant that opened wants smaller photos
    batches = list(classify_stream(paths, other, _means, Lanes(workers=1, batch=2), early=early))
    assert [d.tensor.shape for d, _ in _flat(batches)] == [(3, 4, 4)] * 6  # type: ignore[union-attr]
    assert not _pool_threads()
    early = pipeline.EarlyPhotos(paths, SPEC, workers=2, budget_bytes=1 << 20)
    early.stop()  # open_classifier raised
    assert not _pool_threads()


def test_classify_folder_gives_what_open_and_classify_many_give(tmp_path: Path) -> None:
    folder = colour_classifier(tmp_path / "colours")
    paths = _photos(tmp_path / "p", SIDE_BY_SIDE_MIN_PHOTOS + 3)
    classifier, results = engines.classify_folder(folder, paths, "cpu", k=2)
    expected = engines.open_classifier(folder, "cpu").classify_many(paths, k=2)
    assert [(r.path, [s.index for s in r.top]) for r in results] == [
        (r.path, [s.index for s in r.top]) for r in expected
    ]
    assert classifier.placement.active_eps == ("CPUExecutionProvider",)
    assert not _pool_threads()
    broken = tmp_path / "no-model"
    broken.mkdir()
    with pytest.raises(engines.ModelError, match="no manifest.json"):
        engines.classify_folder(broken, paths, "cpu")
    assert not _pool_threads()
