"""The classifier gives ONNX Runtime's CPU arena back after each job (its load, a photo, a folder)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from engines.types import DeviceChoice
from engines.vision.classifier import ImageClassifier

SAMPLES = Path(__file__).resolve().parents[2] / "assets" / "samples"


def _rss_mb() -> float:
    from engines.memory import release_free_memory

    release_free_memory()
    psutil = pytest.importorskip("psutil")
    return float(psutil.Process().memory_info().rss) / 2**20


class _Spy:
    """Records whether each run asked for the arena to shrink."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.shrinks: list[bool] = []

    def run(self, names: Any, feed: Any, options: Any = None) -> Any:
        self.shrinks.append(options is not None)
        return self._session.run(names, feed, options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def test_the_last_run_of_each_job_shrinks_the_arena(demo_classifier: Path) -> None:
    classifier = ImageClassifier.from_folder(demo_classifier, DeviceChoice.parse("cpu"), max_batch=4)
    spy = _Spy(classifier.session)
    classifier.session = spy
    photos = [SAMPLES / "coffee.png"] * 6  # a full batch of 4, then the last 2
    assert len(classifier.classify_many(photos, k=1, decode_workers=0)) == 6
    assert spy.shrinks == [False, True]  # batches within a job keep the arena; the job's last run frees it
    classifier.classify(SAMPLES / "coffee.png", k=1)
    assert spy.shrinks[-1] is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident memory through glibc's malloc_trim")
def test_a_batch_does_not_keep_its_activations_after_the_job(demo_classifier: Path) -> None:
    classifier = ImageClassifier.from_folder(demo_classifier, DeviceChoice.parse("cpu"), max_batch=8)
    photos = [SAMPLES / "coffee.png"] * 9
    classifier.classify_many(photos[:1], k=1, decode_workers=0)
    before = _rss_mb()
    classifier.classify_many(photos, k=1, decode_workers=0)  # a batch of 8 needs ~70 MB of activations
    grown = _rss_mb() - before
    assert grown < 25, f"{grown:.0f} MB still held after the job"
