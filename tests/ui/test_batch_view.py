"""Batch results: each photo its own time, natural order, a summary line with consistent counts and
failures by cause, and a CSV with the per-photo numbers."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from engines.types import CPU_EP, Classification, ClassScore, Placement
from tests.ui.conftest import SAMPLES
from tests.ui.fakes import FakeClassifier
from ui.classify_parts import batch_summary, expand_paths
from ui.classify_view import ClassifyView
from ui.device_picker import DeviceChoiceModel

ON_CPU = Placement("Automatic", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),))
TIMEOUT = 60_000


def test_folders_expand_in_natural_order(tmp_path: Path) -> None:
    for name in ("astronaut_10.png", "astronaut_2.png", "Astronaut_1.png", "astronaut_11.png", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    names = [Path(p).name for p in expand_paths([str(tmp_path)])]
    assert names == ["Astronaut_1.png", "astronaut_2.png", "astronaut_10.png", "astronaut_11.png"]


def _photo(i: int, pre_ms: float) -> Classification:
    return Classification(f"/p/photo_{i}.png", (ClassScore(0, "tabby", 0.9),), 4.0, pre_ms, ON_CPU)


def test_each_row_shows_its_own_time_and_the_summary_counts_agree(qtbot: Any, tmp_path: Path) -> None:
    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    paths = [str(SAMPLES / "chelsea.png")] * 4
    view.classify_paths(paths)
    results = [_photo(0, 1.0), _photo(1, 7.5), _photo(2, 3.25)]
    bad = Classification("/p/broken.jpg", (), 0.0, 0.0, ON_CPU, error="Could not decode 'broken.jpg': truncated file.")
    for r in [*results, bad]:
        view.show_result(r)
    view.show_finished({"count": 4, "errors": 1, "seconds": 0.5})
    times = [view.results.data(view.results.index(row, 3)) for row in range(3)]
    assert times == ["5.0", "11.5", "7.2"]  # decode + preprocessing + inference, per photo
    assert len(set(times)) == 3
    assert view.results.data(view.results.index(0, 4)) == "CPU · 94/94 nodes"
    summary = view.summary.text()
    assert summary.startswith("4 photos in 0.5 s (8 photos/s)")
    assert "3 classified" in summary and "1 failed (1× Could not decode)" in summary
    assert view.status.text() == "3 of 4 classified"
    assert view.banners.messages() == ["1 of 4 photos could not be classified."]
    out = tmp_path / "out.csv"
    view.export_csv(out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [r["photo_ms"] for r in rows[:3]] == ["5.000", "11.500", "7.250"]
    assert rows[3]["error"].startswith("Could not decode")


def test_summary_of_a_cancelled_batch_counts_what_did_not_run() -> None:
    text = batch_summary([_photo(0, 1.0)], None, 5)
    assert text == "5 photos · 1 classified · 4 not run"


def test_a_real_batch_through_the_app_has_differing_rows(make_studio: Any, qtbot: Any, tmp_path: Path) -> None:
    class Varying(FakeClassifier):
        def _result(self, path: str) -> Classification:
            return Classification(str(path), (ClassScore(0, "tabby", 0.9),), 2.0, float(len(path)), self.placement)

    studio = make_studio(classifier_factory=lambda folder, choice: Varying())
    for name in ("a.png", "bb.png", "ccc.png"):
        (tmp_path / name).write_bytes((SAMPLES / "chelsea.png").read_bytes())
    view = studio.classify_view
    view.classify_paths([str(tmp_path)])
    qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT)
    times = {view.results.data(view.results.index(row, 3)) for row in range(3)}
    assert len(times) == 3
    assert view.summary.text().startswith("3 photos in ")
