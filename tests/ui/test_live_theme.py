"""A theme switch restyles everything live: icons re-rendered, charts restyled, views with no restart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QSize
from PySide6.QtWidgets import QApplication

from ui.common.theme import DARK, LIGHT, apply_theme, colors


@pytest.fixture
def app(qapp: QApplication) -> Iterator[QApplication]:
    instance = QApplication.instance()
    assert isinstance(instance, QApplication)
    apply_theme(instance, "light")
    yield instance
    apply_theme(instance, "light")


def _image(qicon: Any) -> Any:
    return qicon.pixmap(QSize(20, 20)).toImage()


def test_icons_made_in_light_are_right_in_dark(app: QApplication) -> None:
    from ui.common.icons import icon, pixmap

    made = icon("open")
    light = _image(made)
    apply_theme(app, "dark")
    assert _image(made) != light  # the same QIcon object now draws with the dark theme's text colour
    assert _image(made) == _image(icon("open"))
    assert pixmap("open", 20).toImage() == _image(icon("open"))


def test_every_view_follows_a_live_theme_switch(make_studio: Any, app: QApplication) -> None:
    from ui.common.widgets import Glyph

    studio = make_studio()
    window = studio.window
    item_icon = window.sidebar.item(0).icon()
    before = _image(item_icon)
    glyphs = window.findChildren(Glyph)
    assert glyphs
    glyph_before = [g.pixmap().toImage() for g in glyphs]
    studio.settings_view.theme_changed.emit("dark")  # what picking Dark in Settings does
    QApplication.processEvents()
    assert colors() is DARK
    assert _image(item_icon) != before  # sidebar icons are not left dark-on-dark
    assert all(g.pixmap().toImage() != b for g, b in zip(glyphs, glyph_before, strict=True))
    assert app.palette().window().color().name() == DARK.window
    studio.settings_view.theme_changed.emit("light")
    QApplication.processEvents()
    assert colors() is LIGHT


def test_benchmark_charts_are_restyled(qtbot: Any, app: QApplication) -> None:
    from ui.bench.charts import BenchCharts

    charts = BenchCharts()
    qtbot.addWidget(charts)
    charts.show()
    light_bg = charts.bars.backgroundBrush().color().name()
    assert light_bg == LIGHT.surface
    apply_theme(app, "dark")
    QApplication.processEvents()
    assert charts.bars.backgroundBrush().color().name() == DARK.surface
    assert charts.bars.getPlotItem().getAxis("left").textPen().color().name() == DARK.muted


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("kind", ["QCheckBox", "QRadioButton"])
def test_a_focused_checked_box_shows_its_tick_and_its_focus(
    qtbot: Any, app: QApplication, theme: str, kind: str
) -> None:
    """Right after a user ticks Strict the box has the focus: the tick must be drawn, and the focus seen."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QCheckBox, QPushButton, QRadioButton, QStyle, QStyleOptionButton, QVBoxLayout, QWidget

    apply_theme(app, theme)
    root = QWidget()
    qtbot.addWidget(root)
    layout = QVBoxLayout(root)
    elsewhere = QPushButton("elsewhere")
    box = QCheckBox("Strict") if kind == "QCheckBox" else QRadioButton("Strict")
    layout.addWidget(elsewhere)
    layout.addWidget(box)
    root.show()
    qtbot.waitExposed(root)
    parts = QStyle.SubElement
    element = parts.SE_CheckBoxIndicator if kind == "QCheckBox" else parts.SE_RadioButtonIndicator

    def grab(checked: bool, focused: bool) -> tuple[Any, Any]:
        box.setChecked(checked)
        (box if focused else elsewhere).setFocus(Qt.FocusReason.TabFocusReason)
        QApplication.processEvents()
        option = QStyleOptionButton()
        box.initStyleOption(option)
        indicator = box.style().subElementRect(element, option, box)
        return box.grab(indicator).toImage(), box.grab().toImage()

    ticked, ticked_whole = grab(True, True)
    unticked, _ = grab(False, True)
    assert box.hasFocus()
    assert ticked != unticked  # the tick is drawn while the box has the focus
    assert grab(True, False)[1] != ticked_whole  # and the focus can be seen
