"""The window-wide keyboard shortcuts: new chat, open photos, stop, and the shortcuts sheet."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence


def add_window_actions(
    window: Any,
    *,
    new_chat: Callable[[], None],
    open_photos: Callable[[], None],
    stop: Callable[[], None],
    show_shortcuts: Callable[[], None],
) -> None:
    for text, keys, slot in (
        ("New chat", QKeySequence(QKeySequence.StandardKey.New), new_chat),
        ("Open photos", QKeySequence(QKeySequence.StandardKey.Open), open_photos),
        ("Stop", QKeySequence(Qt.Key.Key_Escape), stop),
    ):
        action = QAction(text, window)
        action.setShortcut(keys)
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(slot)
        window.addAction(action)
    window.add_standard_actions(show_shortcuts)
