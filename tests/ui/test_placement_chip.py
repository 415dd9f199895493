"""The placement chip: one line, colour plus icon, the reason in the tooltip and the "Why?" popover."""

from __future__ import annotations

from typing import Any

from engines.types import CPU_EP, DeviceType, Placement
from ui.common.placement_chip import PlacementChip, describe_placement
from ui.common.theme import apply_theme

QNN = "QNNExecutionProvider"
FELL_BACK = Placement(
    "NPU",
    (CPU_EP,),
    (CPU_EP,),
    ((CPU_EP, 94),),
    fell_back=True,
    reason="No usable NPU: the QNN execution provider needs Windows on a Snapdragon X.",
    wanted_type=DeviceType.NPU,
)
ON_NPU = Placement("NPU", (QNN, CPU_EP), (QNN, CPU_EP), ((QNN, 94),), wanted_type=DeviceType.NPU)
SPLIT = Placement("NPU", (QNN, CPU_EP), (QNN, CPU_EP), ((QNN, 90), (CPU_EP, 4)), wanted_type=DeviceType.NPU)
ON_CPU = Placement("CPU only", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),), wanted_type=DeviceType.CPU)


def test_the_three_lines_of_the_chip() -> None:
    assert describe_placement(FELL_BACK, "NPU").text == "Asked NPU → Ran on CPU · 94/94 nodes"
    assert describe_placement(FELL_BACK, "NPU").kind == "warn"
    assert describe_placement(ON_NPU, "NPU").text == "NPU · 94/94 nodes"
    assert describe_placement(ON_NPU, "NPU").kind == "ok"
    assert describe_placement(SPLIT, "NPU").text == "Split: QNN 90 · CPU 4"
    assert describe_placement(SPLIT, "NPU").kind == "info"
    # A CPU run that was asked for is not "CPU · CPU" nor a warning.
    assert describe_placement(ON_CPU, "CPU only").text == "CPU · 94/94 nodes"
    assert describe_placement(ON_CPU, "CPU only").kind == "ok"


def test_chip_keeps_the_reason_out_of_the_line(qtbot: Any) -> None:
    chip = PlacementChip()
    qtbot.addWidget(chip)
    chip.set_placement(FELL_BACK, "NPU")
    assert "\n" not in chip.text() and "Snapdragon" not in chip.text()
    assert "Snapdragon X" in chip.toolTip()
    assert chip.why.isVisibleTo(chip)
    chip.show_why()
    assert chip.popover is not None and "Snapdragon X" in chip.popover.label.text()
    chip.popover.close()
    chip.set_placement(ON_NPU, "NPU")
    assert not chip.why.isVisibleTo(chip)  # nothing to explain
    chip.set_placement(None)
    assert chip.isHidden()


def test_chip_icon_follows_a_live_theme_switch(qtbot: Any) -> None:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, "light")
    chip = PlacementChip()
    qtbot.addWidget(chip)
    chip.set_placement(ON_NPU, "NPU")
    light_sheet = chip.styleSheet()
    light_icon = chip.glyph.pixmap().toImage()
    try:
        apply_theme(app, "dark")
        QApplication.processEvents()
        assert chip.styleSheet() != light_sheet
        assert chip.glyph.pixmap().toImage() != light_icon
    finally:
        apply_theme(app, "light")
