"""Pieces the Settings view's sections share: a section title and a label for a file path."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import QLabel, QWidget

from ui.common.plain import breakable, plain_text, plain_tooltip


def section_title(title: str) -> QLabel:
    label = QLabel(title)
    label.setObjectName("SectionTitle")
    return label


class PathLabel(QLabel):
    """A file path shown whole: it wraps at its separators instead of being cut, the full path is the
    tooltip, and "Copy path" (right click) copies it as it is."""

    def __init__(self, path: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setProperty("muted", True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)
        self.setMinimumWidth(80)
        copy = QAction(self.tr("Copy path"), self)
        copy.triggered.connect(self.copy)
        self.addAction(copy)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self._path = ""
        self.set_path(path)

    @property
    def path(self) -> str:
        return self._path

    def set_path(self, path: str) -> None:
        self._path = path
        self.setToolTip(plain_tooltip(path))
        self.setText(breakable(plain_text(path, one_line=True)))

    def copy(self) -> None:
        clipboard = QGuiApplication.clipboard()
        if clipboard is not None and self._path:
            clipboard.setText(self._path)
