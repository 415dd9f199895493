"""Layout checks from widget geometry and font metrics (not pixels): no main control outside the
window, no text cut. Used by the self-test's layout screenshots and the UI tests, at every size and
scale the app promises to fit."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

MAIN_CONTROLS = (QAbstractButton, QComboBox, QLineEdit, QAbstractSpinBox, QAbstractScrollArea)
SLACK = 2  # pixels of rounding between font metrics and layout


@dataclass(frozen=True)
class Problem:
    widget: str
    what: str

    def __str__(self) -> str:
        return f"{self.widget}: {self.what}"


def _name(widget: QWidget) -> str:
    text = ""
    if isinstance(widget, QLabel | QAbstractButton):
        text = widget.text()
    text = text if len(text) <= 40 else text[:37] + "…"
    return f"{type(widget).__name__}({widget.objectName() or widget.accessibleName() or text!r})"


def _in_scroll_area(widget: QWidget, root: QWidget) -> bool:
    """Inside a scroll area a widget may be scrolled out of view: that is what scrolling is for."""
    parent = widget.parentWidget()
    while parent is not None and parent is not root:
        if isinstance(parent, QAbstractScrollArea):
            return True
        parent = parent.parentWidget()
    return False


def _plain(label: QLabel) -> str:
    text = label.text()
    if label.textFormat().name == "PlainText" or not any(c in text for c in "<&"):
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def _label_cut(label: QLabel) -> str:
    text = _plain(label)
    if not text.strip() or (label.pixmap() is not None and not label.pixmap().isNull()):
        return ""
    room = (
        label.contentsRect().width() - 2 * label.margin() - label.indent()
        if label.indent() > 0
        else (label.contentsRect().width() - 2 * label.margin())
    )
    metrics = label.fontMetrics()
    if label.wordWrap():
        needed = label.heightForWidth(label.width())
        if needed > label.height() + SLACK:
            return f"wrapped text needs {needed} px of height, has {label.height()}"
        words = text.replace("\u200b", " ").split()  # a zero-width space is a break opportunity
        longest = max((metrics.horizontalAdvance(word) for word in words), default=0)
        if longest > room + SLACK:
            return f"a word needs {longest} px, the label is {room} px wide"
        return ""
    widest = max((metrics.horizontalAdvance(line) for line in text.splitlines()), default=0)
    if widest > room + SLACK:
        return f"text needs {widest} px, the label is {room} px wide (cut)"
    return ""


def _button_cut(button: QAbstractButton) -> str:
    text = button.text().replace("&", "")
    if not text or not isinstance(button, QPushButton | QCheckBox):
        return ""
    needed = button.sizeHint().width()
    if button.width() + SLACK < min(needed, button.maximumWidth()):
        return f"needs {needed} px, has {button.width()} (text cut)"
    return ""


def _combo_cut(combo: QComboBox) -> str:
    text = combo.currentText()
    if not text:
        return ""
    # The arrow and frame take about the height of the box; the text gets the rest.
    room = combo.width() - combo.height() - 8
    needed = combo.fontMetrics().horizontalAdvance(text)
    if needed > room + SLACK:
        return f"shows {text!r} in {room} px, needs {needed} (text cut)"
    return ""


def check_layout(root: QWidget) -> list[Problem]:
    """Every visible control of `root` inside it, every visible label and button showing its whole text."""
    problems: list[Problem] = []
    bounds = QRect(QPoint(0, 0), root.size())
    for widget in root.findChildren(QWidget):
        if not widget.isVisibleTo(root) or widget.window() is not root:
            continue
        if widget.width() <= 0 or widget.height() <= 0:
            continue
        scrolled = _in_scroll_area(widget, root)
        if isinstance(widget, MAIN_CONTROLS) and not scrolled:
            rect = QRect(widget.mapTo(root, QPoint(0, 0)), widget.size())
            if not bounds.contains(rect):
                problems.append(
                    Problem(_name(widget), f"lies outside the window ({rect.getRect()} vs {bounds.size().toTuple()})")
                )
        if isinstance(widget, QLabel):
            cut = _label_cut(widget)
            if cut:
                problems.append(Problem(_name(widget), cut))
        elif isinstance(widget, QComboBox):
            cut = _combo_cut(widget)
            if cut:
                problems.append(Problem(_name(widget), cut))
        elif isinstance(widget, QAbstractButton):
            cut = _button_cut(widget)
            if cut:
                problems.append(Problem(_name(widget), cut))
    return problems
