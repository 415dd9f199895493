"""The folder pipeline: photos decoded ahead in a thread pool, in order, bounded, cancellable."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engines.errors import CancelledError
from engines.types import CancelToken, DeviceChoice
from engines.vision import pipeline
from engines.vision.classifier import CPU_MAX_BATCH, ImageClassifier
from engines.vision.images import Preprocess
from engines.vision.pipeline import decode_ahead
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


def test_results_come_in_input_order_and_match_sequential_decoding(tmp_path: Path) -> None:
    paths = _photos(tmp_path / "p", 30)
    broken = tmp_path / "p" / "broken.jpg"
    broken.write_bytes(b"not a jpeg")
    paths.insert(11, broken)
    parallel = list(decode_ahead(paths, SPEC, workers=3, lookahead=4))
    sequential = list(decode_ahead(paths, SPEC, workers=0))
    assert [d.index for d in parallel] == list(range(len(paths)))
    assert [d.path for d in parallel] == [str(p) for p in paths]
    assert parallel[11].tensor is None and "is not an image" in parallel[11].error
    for a, b in zip(parallel, sequential, strict=True):
        assert (a.tensor is None) == (b.tensor is None)
        if a.tensor is not None and b.tensor is not None:
            assert np.array_equal(a.tensor, b.tensor)
            assert a.preprocess_ms > 0


def _record_decoding_threads(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The names of the threads that decode photos from now on (filled as they decode)."""
    threads: set[str] = set()
    real = pipeline.preprocess

    def recording(path: object, spec: Preprocess) -> np.ndarray:
        threads.add(threading.current_thread().name)
        return real(path, spec)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "preprocess", recording)
    return threads


def test_decoding_runs_on_the_pool_and_never_gets_more_than_the_lookahead_ahead(
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

    ahead = []
    for handed_out, _ in enumerate(decode_ahead(source(), SPEC, workers=2, lookahead=5), start=1):
        ahead.append(pulled - handed_out)
    assert max(ahead) <= 5  # memory stays bounded whatever the folder's size
    assert all(name.startswith("npu-studio-decode") for name in threads)


@pytest.mark.parametrize(("workers", "on_pool"), [(1, True), (0, False)])
def test_one_worker_still_decodes_on_the_pool_and_zero_on_the_calling_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, on_pool: bool
) -> None:
    # One pool thread is what overlaps decoding with inference on a 2-core machine; 0 is the no-overlap mode.
    paths = _photos(tmp_path / "p", 6)
    threads = _record_decoding_threads(monkeypatch)
    decoded = list(decode_ahead(paths, SPEC, workers=workers, lookahead=3))
    assert [d.path for d in decoded] == [str(p) for p in paths]
    assert all(name.startswith("npu-studio-decode") for name in threads) == on_pool
    assert (threading.current_thread().name in threads) != on_pool


def test_classifier_sessions_do_not_spin_while_the_decoders_need_the_cores(tmp_path: Path) -> None:
    classifier = ImageClassifier.from_folder(colour_classifier(tmp_path / "colours"), DeviceChoice.parse("cpu"))
    options = classifier.session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_cancel_stops_handing_out_and_drops_the_photos_not_started(tmp_path: Path) -> None:
    paths = _photos(tmp_path / "p", 40)
    token = CancelToken()
    seen = 0
    with pytest.raises(CancelledError):
        for _ in decode_ahead(paths, SPEC, workers=2, lookahead=4, cancel=token):
            seen += 1
            if seen == 3:
                token.cancel()
    assert seen == 3


def test_classify_many_streams_in_input_order_with_the_same_answers_as_one_by_one(tmp_path: Path) -> None:
    classifier = ImageClassifier.from_folder(colour_classifier(tmp_path / "colours"), DeviceChoice.parse("cpu"))
    paths = _photos(tmp_path / "p", 21)
    broken = tmp_path / "p" / "empty.png"
    broken.write_bytes(b"")
    paths.insert(5, broken)
    streamed: list[str] = []
    results = classifier.classify_many(paths, k=3, on_result=lambda r: streamed.append(r.path), decode_workers=3)
    assert streamed == [str(p) for p in paths]  # streamed as they finish, already in order
    assert [r.path for r in results] == streamed
    assert "empty" in results[5].error
    for result, path in zip(results, paths, strict=True):
        if path == broken:
            continue
        single = classifier.classify(path, k=3)
        assert [s.index for s in result.top] == [s.index for s in single.top]
        assert np.allclose([s.probability for s in result.top], [s.probability for s in single.top], atol=1e-5)


def test_cpu_batches_stay_small_enough_for_the_caches_and_an_explicit_size_wins(tmp_path: Path) -> None:
    folder = colour_classifier(tmp_path / "colours")
    classifier = ImageClassifier.from_folder(folder, DeviceChoice.parse("cpu"))
    assert classifier.max_batch == CPU_MAX_BATCH
    sizes: list[int] = []
    real = classifier.infer

    def recording(batch: np.ndarray) -> np.ndarray:
        sizes.append(batch.shape[0])
        return real(batch)

    classifier.infer = recording  # type: ignore[method-assign]
    paths = _photos(tmp_path / "p", 2 * CPU_MAX_BATCH + 1)
    assert len(classifier.classify_many(paths)) == len(paths)
    assert sizes == [CPU_MAX_BATCH, CPU_MAX_BATCH, 1]
    assert ImageClassifier.from_folder(folder, DeviceChoice.parse("cpu"), max_batch=8).max_batch == 8
