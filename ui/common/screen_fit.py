"""The window's first size comes from the screen it opens on; a remembered size is kept only where it
still fits. Below ~1366x768 (logical pixels: a 1920x1080 screen at 150 % is 1280x720) the window
opens maximized, since every pixel counts there."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QWidget

SMALL_SCREEN = QSize(1366, 768)
PREFERRED = QSize(1440, 900)
MINIMUM = QSize(760, 500)  # what the views are laid out to stay usable at (a 1920x1080 screen at 200 %)


def available(widget: QWidget | None = None) -> QRect:
    screen: QScreen | None = widget.screen() if widget is not None else None
    screen = screen or QGuiApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else QRect(0, 0, 1280, 720)


def is_small(area: QRect) -> bool:
    return area.width() < SMALL_SCREEN.width() or area.height() < SMALL_SCREEN.height()


def first_size(area: QRect) -> QSize:
    """A comfortable size that leaves some of the desktop visible on big screens."""
    return QSize(min(PREFERRED.width(), round(area.width() * 0.9)), min(PREFERRED.height(), round(area.height() * 0.9)))


def minimum_for(area: QRect) -> QSize:
    return QSize(min(MINIMUM.width(), area.width()), min(MINIMUM.height(), area.height()))


def fit_window(window: QWidget, restored: bool) -> bool:
    """Size `window` for its screen. Returns True when it should be shown maximized."""
    area = available(window)
    window.setMinimumSize(minimum_for(area))
    if restored:
        frame = window.frameGeometry()
        if area.contains(frame.topLeft()) and frame.width() <= area.width() and frame.height() <= area.height():
            return False
    if is_small(area):
        window.resize(minimum_for(area).expandedTo(area.size()).boundedTo(area.size()))
        return True
    size = first_size(area)
    window.resize(size)
    window.move(area.center().x() - size.width() // 2, area.center().y() - size.height() // 2)
    return False
