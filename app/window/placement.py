"""The main window's place on screen: restored from the settings at start, saved back at close.

Views and the window are passed in (app modules other than app.gui import no ui), with the screen
fitting function, so this module only knows the settings' fields and Qt's saved-geometry format.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QByteArray

from app.storage.settings import Settings

SMALLEST_LAPTOP = (1280, 720)  # the smallest window size the app promises to lay out well


def headless() -> bool:
    """No real screen (offscreen or minimal Qt platform): tests, the self-test, CI."""
    return os.environ.get("QT_QPA_PLATFORM", "") in {"offscreen", "minimal"}


def restore_window(window: Any, settings: Settings, fit: Callable[[Any, bool], bool]) -> bool:
    """Put `window` where the settings say (or size it for its screen); True when it should open maximized."""
    geometry = QByteArray.fromBase64(settings.window_geometry.encode("ascii", "ignore"))
    restored = not geometry.isEmpty() and window.restoreGeometry(geometry)
    maximized = fit(window, restored)  # first size from the screen; maximized when small
    if headless():
        # Offscreen there is no real screen to fit (its 800x600 is a placeholder): the smallest
        # laptop size the app promises, so that headless runs and tests see that layout.
        maximized = False
        if not restored:
            window.resize(*SMALLEST_LAPTOP)
    state = QByteArray.fromBase64(settings.window_state.encode("ascii", "ignore"))
    if not state.isEmpty():
        window.restoreState(state)
    if settings.last_view in window.view_keys():
        window.show_view(settings.last_view)
    return bool(maximized)


def capture_window(window: Any, settings: Settings) -> None:
    """Write the window's geometry, toolbar/dock state and current view into `settings`."""
    settings.window_geometry = bytes(window.saveGeometry().toBase64().data()).decode("ascii")
    settings.window_state = bytes(window.saveState().toBase64().data()).decode("ascii")
    settings.last_view = window.current_view() or settings.last_view
