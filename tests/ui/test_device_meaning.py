"""The device picker says, per choice, what it means: the one planner's words (engines/runtime/planning.py),
the same the README's table uses."""

from __future__ import annotations

from typing import Any


def test_the_device_picker_says_what_each_choice_means(qtbot: Any) -> None:
    from PySide6.QtCore import Qt

    from engines.runtime.planning import MEANING
    from engines.types import Policy
    from ui.common.device_picker import DeviceChoiceModel, DevicePicker

    picker = DevicePicker(DeviceChoiceModel())
    qtbot.addWidget(picker)
    tips = {
        picker.combo.itemData(i): picker.combo.itemData(i, Qt.ItemDataRole.ToolTipRole)
        for i in range(picker.combo.count())
    }
    assert {Policy(value): tip for value, tip in tips.items() if value in {p.value for p in Policy}} == dict(MEANING)
