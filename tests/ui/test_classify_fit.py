"""Classify at every size the app promises to fit (logical pixels: 1920x1080 at 150 % is 1280x720, at
200 % 960x540): the placement chips, the batch rows' "Ran on" and the top-5 labels are never cut (from
widget geometry and font metrics); a chip that lacks the room for its whole line shows its short form."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel

from engines.types import CPU_EP, Classification, ClassScore, DeviceType, Placement
from tests.ui.conftest import SAMPLES
from tests.ui.fakes import FakeClassifier, opener_for
from ui.common.layout_check import check_layout
from ui.common.placement_chip import PlacementChip, describe_placement

FELL_BACK = Placement(
    "NPU", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),), fell_back=True, reason="No usable NPU.", wanted_type=DeviceType.NPU
)
LABELS = ("black-and-tan coonhound", "German short-haired pointer", "Chesapeake Bay retriever", "go-kart", "bobsled")


def _result(path: str) -> Classification:
    shares = (0.5, 0.2, 0.1, 0.1, 0.05)
    scores = tuple(ClassScore(i, label, p) for i, (label, p) in enumerate(zip(LABELS, shares, strict=True)))
    return Classification(path, scores, 4.0, 2.0, FELL_BACK)


def _whole(label: QLabel) -> bool:
    return label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width() + 2


def _settle() -> None:
    for _ in range(3):
        QApplication.processEvents()


def test_the_short_form_is_a_rule() -> None:
    chip = describe_placement(FELL_BACK, "NPU")
    assert (chip.text, chip.short) == ("Asked NPU → Ran on CPU · 94/94 nodes", "NPU→CPU · 94/94")
    split = Placement("NPU", ("QNNExecutionProvider", CPU_EP), ("QNNExecutionProvider", CPU_EP),
                      (("QNNExecutionProvider", 90), (CPU_EP, 4)), wanted_type=DeviceType.NPU)  # fmt: skip
    assert describe_placement(split, "NPU").short == "QNN 90 · CPU 4"
    on_cpu = Placement("CPU only", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),), wanted_type=DeviceType.CPU)
    assert describe_placement(on_cpu, "CPU only").short == "CPU · 94/94"
    ahead = describe_placement(FELL_BACK, "NPU", ahead=True)
    assert ahead.text == "Asked NPU → will run on CPU · 94/94 nodes" and ahead.short == chip.short


def test_a_chip_shows_its_whole_line_when_it_can_and_its_short_form_when_not(qtbot: Any) -> None:
    chip = PlacementChip()
    qtbot.addWidget(chip)
    chip.set_placement(FELL_BACK, "NPU")
    chip.show()
    assert chip.minimumWidth() == chip.width_for("NPU→CPU · 94/94") < chip.sizeHint().width()
    chip.resize(chip.sizeHint())
    _settle()
    assert chip.text() == "Asked NPU → Ran on CPU · 94/94 nodes" and _whole(chip.label)
    chip.resize(chip.minimumWidth(), chip.height())
    _settle()
    assert chip.text() == "NPU→CPU · 94/94" and _whole(chip.label)
    assert "Asked NPU → Ran on CPU · 94/94 nodes" in chip.toolTip()  # the whole line is never lost


def test_a_short_chip_hugs_its_text_and_grows_back_with_the_room(qtbot: Any) -> None:
    from PySide6.QtWidgets import QHBoxLayout, QWidget

    row = QWidget()
    qtbot.addWidget(row)
    layout = QHBoxLayout(row)
    chip = PlacementChip()
    layout.addWidget(chip)
    layout.addStretch(1)
    chip.set_placement(FELL_BACK, "NPU")
    row.show()
    row.resize(chip.minimumWidth() + 60, 40)
    _settle()
    assert chip.text() == "NPU→CPU · 94/94" and chip.width() == chip.minimumWidth() and _whole(chip.label)
    row.resize(900, 40)
    _settle()
    assert chip.text() == "Asked NPU → Ran on CPU · 94/94 nodes" and _whole(chip.label)


@pytest.mark.parametrize("size", [(1280, 720), (1366, 768), (960, 540)])
def test_classify_chips_and_labels_are_never_cut(make_studio: Any, qtbot: Any, size: tuple[int, int]) -> None:
    studio = make_studio(open_classifier=opener_for(lambda folder, choice: FakeClassifier()))
    window, view = studio.window, studio.classify_view
    window.showNormal()
    window.resize(*size)
    window.show_view("classify")
    studio.choice_model.set_text("npu")
    photos = [str(SAMPLES / "chelsea.png"), str(SAMPLES / "coffee.png")]
    view.classify_paths(photos)
    qtbot.waitUntil(lambda: not view.busy, timeout=60_000)  # a run through the app first (a fake engine)
    view.classify_requested.disconnect()  # then results of our own: a fallback, long labels
    view.classify_paths(photos)
    for photo in photos:
        view.show_result(_result(photo))
    view.show_finished({"count": 2, "errors": 0, "seconds": 0.1})
    view.show_loaded("", FELL_BACK)
    _settle()
    problems = [str(p) for p in check_layout(window) if "Chip" in str(p) or "Elided" in str(p) or "QLabel" in str(p)]
    assert problems == []
    for chip in (view.result_panel.chip, view.device_line.chip):
        assert chip.isVisibleTo(window) and _whole(chip.label), (chip.text(), chip.label.width())
        assert chip.width() >= chip.minimumWidth()
    for label in view.result_panel.bars.labels:
        assert _whole(label)
        assert label.text() == label.full_text() or (label.text().endswith("…") and label.toolTip())
    bars = view.result_panel.bars  # in a short window the panel scrolls: the list is never squeezed
    assert bars.height() >= bars.minimumSizeHint().height()
    assert all(label.height() >= label.fontMetrics().height() for label in bars.labels)
    table = view.batch.table
    column = 4
    text = view.batch.results.data(view.batch.results.index(0, column), Qt.ItemDataRole.DisplayRole)
    assert text == "NPU→CPU · 94/94"
    needed = table.fontMetrics().horizontalAdvance(text) + 16  # the text and the chip icon
    assert table.columnWidth(column) >= needed
