"""Screen fit, keys and accessibility of the main window."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QApplication, QWidget

from ui.common.screen_fit import first_size, fit_window, is_small, minimum_for
from ui.common.widgets import error_text, gui_words


def test_first_size_comes_from_the_screen() -> None:
    assert is_small(QRect(0, 0, 1280, 720)) and is_small(QRect(0, 0, 1366, 740))
    assert not is_small(QRect(0, 0, 1920, 1040))
    assert first_size(QRect(0, 0, 1920, 1040)).toTuple() == (1440, 900)
    assert first_size(QRect(0, 0, 1440, 860)).toTuple() == (1296, 774)
    # a 1920x1080 screen at 200 % is 960x540 logical: the minimum never exceeds the screen
    assert minimum_for(QRect(0, 0, 960, 510)).toTuple() == (760, 500)
    assert minimum_for(QRect(0, 0, 700, 450)).toTuple() == (700, 450)


def test_a_small_screen_opens_maximized_and_a_remembered_size_that_fits_is_kept(
    qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ui.common.screen_fit as fit

    window = QWidget()
    qtbot.addWidget(window)
    monkeypatch.setattr(fit, "available", lambda widget=None: QRect(0, 0, 1280, 680))
    assert fit_window(window, restored=False) is True
    monkeypatch.setattr(fit, "available", lambda widget=None: QRect(0, 0, 1920, 1040))
    assert fit_window(window, restored=False) is False and window.size().toTuple() == (1440, 900)
    window.resize(1000, 700)
    assert fit_window(window, restored=True) is False and window.size().toTuple() == (1000, 700)


def test_ctrl_q_quits_and_ctrl_slash_lists_the_shortcuts(
    make_studio: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    studio = make_studio()
    window = studio.window
    studio.show()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    rows = dict((what, keys) for keys, what in window.shortcuts())
    assert rows["Quit"] == "Ctrl+Q" and rows["Keyboard shortcuts"].startswith("Ctrl+/")
    assert rows["Show Classify"] == "Ctrl+2" and rows["New chat"] == "Ctrl+N"
    shown: list[Any] = []
    monkeypatch.setattr("ui.shortcuts.ShortcutsSheet.exec", lambda self: shown.append(self.rows) or 0)
    qtbot.keyClick(window, Qt.Key.Key_Slash, Qt.KeyboardModifier.ControlModifier)
    assert shown and ("Ctrl+Q", "Quit") in shown[0]
    assert ("Enter", "Send the message (Chat)") in shown[0]
    studio.chat_view.enter_sends_changed.emit(False)  # the user swaps the chat's keys
    qtbot.keyClick(window, Qt.Key.Key_Slash, Qt.KeyboardModifier.ControlModifier)
    assert ("Ctrl+Enter", "Send the message (Chat)") in shown[-1]
    assert ("Enter", "New line in the message (Chat)") in shown[-1]
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not window.isVisible())


def test_narrow_window_keeps_sidebar_icons_only(make_studio: Any, qtbot: Any) -> None:
    studio = make_studio()
    window = studio.window
    window.showNormal()
    window.resize(960, 540)
    QApplication.processEvents()
    assert window.compact and window.sidebar_panel.width() == 60
    assert all(window.sidebar.item(i).text() == "" for i in range(window.sidebar.count()))
    assert window.sidebar.item(1).toolTip().startswith("Classify")
    window.resize(1280, 720)
    QApplication.processEvents()
    assert not window.compact and window.sidebar.item(1).text() == "Classify"


def test_every_control_has_an_accessible_name_or_text(make_studio: Any) -> None:
    from PySide6.QtWidgets import QAbstractButton, QComboBox

    studio = make_studio()
    for key in ("devices", "classify", "benchmark", "models", "settings"):
        view = studio.window.view(key)
        nameless = [
            type(w).__name__
            for w in view.findChildren(QAbstractButton) + view.findChildren(QComboBox)
            if not w.objectName().startswith("qt_")  # Qt's own parts (a table's corner button)
            and not (w.accessibleName() or (isinstance(w, QAbstractButton) and w.text()) or w.toolTip())
        ]
        assert nameless == [], f"{key}: {nameless}"


def test_cli_words_never_reach_the_app() -> None:
    from engines.errors import ModelError

    error = ModelError(
        "model.onnx is a single ONNX file: NPU Studio treats it as an image classifier and needs its class names.",
        "Add --labels FILE (one class name per line).",
    )
    assert error_text(error)[1] == "Choose its labels file (one class name per line)."
    assert gui_words("Remove it first (`npu-studio models remove x`) or choose another name (--name).") == (
        "Remove it first or choose another name."
    )
    assert "--" not in gui_words("Import a genai folder or a classifier .onnx with --labels.")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_shortcuts_sheet_close_icon_follows_the_theme(qtbot: Any, theme: str) -> None:
    from PySide6.QtCore import QSize
    from PySide6.QtGui import QColor

    from ui.common.theme import apply_theme, colors
    from ui.shortcuts import ShortcutsSheet

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, theme)
    try:
        sheet = ShortcutsSheet([("Ctrl+Q", "Quit")])
        qtbot.addWidget(sheet)
        image = sheet.close_button.icon().pixmap(QSize(16, 16)).toImage()
        inked = [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())]
        inked = [c for c in inked if c.alpha() > 128]
        text = QColor(colors().text)
        assert inked and all(abs(c.lightness() - text.lightness()) < 40 for c in inked)  # never black on dark
    finally:
        apply_theme(app, "light")


def test_the_status_bar_is_not_ready_before_the_devices_are_known(
    make_studio: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    studio = make_studio()
    window = studio.window
    seen: list[tuple[str, bool]] = [(window.status_label.text(), False)]
    original = window.set_status

    def recording(source: str, text: str) -> None:
        original(source, text)
        seen.append((window.status_label.text(), bool(studio.devices_view.devices)))

    monkeypatch.setattr(window, "set_status", recording)
    assert window.status_label.text() == "Starting…" and window.status_spinner.running
    studio.show()
    qtbot.waitUntil(lambda: bool(studio.devices_view.devices), timeout=60_000)
    qtbot.waitUntil(lambda: window.status_label.text() == "Ready", timeout=60_000)
    assert seen[1][0] == "Looking for devices…"  # said at once, before the worker gets to it
    assert [text for text, known in seen if text == "Ready" and not known] == []
