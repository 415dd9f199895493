"""Layout checks from widget geometry and font metrics (not pixels): no main control outside the
window, no text cut. Used by the self-test's layout screenshots and the UI tests, at every size and
scale the app promises to fit.

What counts as cut:
- a label, button or combo box narrower than its text, or a wrapped label shorter than its lines;
- a label or placement chip clipped by a parent that is smaller than it (it shows part of its text);
- a label shorter than its font (the tops or bottoms of its letters cut off);
- a placement chip given less than the room its whole line needs;
- a table or list cell, or a header section, whose text the view elides ("…") or clips, and a row
  shorter than its font.

With `roomy=True` (the sizes the app promises to fit without scrolling: 1280x720 and up) two more:
- a table, list or chart inside a scrolling page whose header and first rows (a chart: all of it, its
  axis included) lie below the fold, so a user must scroll to see them;
- a table that scrolls sideways because its columns do not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QGraphicsView,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QStyle,
    QStyleOptionComboBox,
    QWidget,
)

from ui.common.item_view_check import item_view_cuts

MAIN_CONTROLS = (QAbstractButton, QComboBox, QLineEdit, QAbstractSpinBox, QAbstractScrollArea)
SLACK = 2  # pixels of rounding between font metrics and layout
FOLD_ROWS = 3  # a table inside a scrolling page shows its header and this many rows without scrolling
CHIP_NAME = "PlacementChip"


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


def _scroll_viewport(widget: QWidget, root: QWidget) -> QWidget | None:
    """The viewport of the scroll area `widget` sits in (None: it is laid out in the window itself)."""
    child, parent = widget, widget.parentWidget()
    while parent is not None and child is not root:
        if isinstance(parent, QAbstractScrollArea) and child is parent.viewport():
            return child
        child, parent = parent, parent.parentWidget()
    return None


def _plain(label: QLabel) -> str:
    text = label.text()
    if label.textFormat().name == "PlainText" or not any(c in text for c in "<&"):
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def _text_size(label: QLabel, text: str) -> tuple[int, int]:
    """(width, height) the label's text needs: its longest line, and its lines (wrapped at its width)."""
    metrics = label.fontMetrics()
    if label.wordWrap():
        words = text.replace("\u200b", " ").split()  # a zero-width space is a break opportunity
        width = max((metrics.horizontalAdvance(word) for word in words), default=0)
        margins = label.contentsMargins()
        height = label.heightForWidth(label.width()) - margins.top() - margins.bottom()
        return width, height
    lines = text.splitlines() or [text]
    width = max(metrics.horizontalAdvance(line) for line in lines)
    return width, metrics.height() + (len(lines) - 1) * metrics.lineSpacing()


def _label_cut(label: QLabel) -> str:
    text = _plain(label)
    if not text.strip() or (label.pixmap() is not None and not label.pixmap().isNull()):
        return ""
    room = label.contentsRect().width() - 2 * label.margin() - max(0, label.indent())
    height = label.contentsRect().height() - 2 * label.margin()
    metrics = label.fontMetrics()
    if label.wordWrap():
        needed = label.heightForWidth(label.width())
        if needed > label.height() + SLACK:
            return f"wrapped text needs {needed} px of height, has {label.height()}"
        words = text.replace("\u200b", " ").split()
        longest = max((metrics.horizontalAdvance(word) for word in words), default=0)
        if longest > room + SLACK:
            return f"a word needs {longest} px, the label is {room} px wide"
        return ""
    widest, tall = _text_size(label, text)
    if widest > room + SLACK:
        return f"text needs {widest} px, the label is {room} px wide (cut)"
    if tall > height + SLACK:
        return f"text needs {tall} px of height, the label is {height} px tall (clipped)"
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
    # The room the style gives the text (the box minus its frame, arrow and icon), as it draws it.
    option = QStyleOptionComboBox()
    combo.initStyleOption(option)
    field = combo.style().subControlRect(
        QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, combo
    )
    room = field.width() - (combo.iconSize().width() + 4 if not combo.itemIcon(combo.currentIndex()).isNull() else 0)
    needed = combo.fontMetrics().horizontalAdvance(text)
    if needed > room + SLACK:
        return f"shows {text!r} in {room} px, needs {needed} (text cut)"
    return ""


def _chip_cut(chip: QWidget) -> str:
    """A placement chip gets the room of its line (and its "Why?"): never squeezed. Its minimum size is the
    room of its short form ("NPU→CPU · 94/94"), which it shows by rule when the whole line does not fit."""
    width, height = chip.minimumSizeHint().width(), chip.sizeHint().height()
    if chip.width() + SLACK < width or chip.height() + SLACK < min(height, chip.maximumHeight()):
        return f"needs {width}x{height} px, has {chip.width()}x{chip.height()} (chip cut)"
    return ""


def _text_rect(widget: QWidget, needed: tuple[int, int]) -> QRect:
    """Where a text of `needed` size is drawn inside `widget` (a label by its alignment, anything else
    from its top left)."""
    area = widget.contentsRect()
    width, height = min(area.width(), needed[0]), min(area.height(), needed[1])
    x, y = area.left(), area.top()
    if isinstance(widget, QLabel):
        align = widget.alignment()
        if align & Qt.AlignmentFlag.AlignRight:
            x = area.right() + 1 - width
        elif align & Qt.AlignmentFlag.AlignHCenter:
            x = area.left() + (area.width() - width) // 2
        if align & Qt.AlignmentFlag.AlignBottom:
            y = area.bottom() + 1 - height
        elif not align & Qt.AlignmentFlag.AlignTop:
            y = area.top() + (area.height() - height) // 2
    return QRect(x, y, width, height)


def _clipped_by_parent(widget: QWidget, root: QWidget, needed: tuple[int, int]) -> str:
    """The part of its text `widget`'s parents let through: a label half outside its parent shows half
    its text. Scroll areas are where clipping is meant (their fold is checked separately)."""
    text = _text_rect(widget, needed).translated(widget.mapTo(root, QPoint(0, 0)))
    shown = QRect(text)
    parent = widget.parentWidget()
    child: QWidget = widget
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea) and child is parent.viewport():
            return ""
        shown = shown.intersected(QRect(parent.mapTo(root, QPoint(0, 0)), parent.size()))
        if parent is root:
            break
        child, parent = parent, parent.parentWidget()
    if shown.width() + SLACK < text.width() or shown.height() + SLACK < text.height():
        seen, whole = f"{shown.width()}x{shown.height()}", f"{text.width()}x{text.height()}"
        return f"clipped by its parent: {seen} px of its text's {whole} shown"
    return ""


def _below_fold(widget: QWidget, viewport: QWidget) -> str:
    """A table's header and first rows, or a whole chart, inside the scroll area's visible part."""
    top = widget.mapTo(viewport, QPoint(0, 0)).y()
    needed = widget.height()
    if isinstance(widget, QAbstractItemView):
        model = widget.model()
        rows = min(model.rowCount() if model is not None else 0, FOLD_ROWS)
        offset = widget.viewport().mapTo(widget, QPoint(0, 0)).y()  # the frame and a table's header
        last = widget.visualRect(model.index(rows - 1, 0)).bottom() + 1 if rows and model is not None else 0
        needed = min(offset + max(last, widget.fontMetrics().height()), widget.height())
    if top < 0 or top + needed > viewport.height() + SLACK:
        return f"below the fold: {needed} px from y={top} in a scrolling page {viewport.height()} px tall"
    return ""


def check_layout(root: QWidget, roomy: bool = False) -> list[Problem]:
    """Every visible control of `root` inside it, every visible label, button, chip and table cell
    showing its whole text. `roomy`: a size the app promises to fit without scrolling (see above)."""
    problems: list[Problem] = []
    bounds = QRect(QPoint(0, 0), root.size())
    for widget in root.findChildren(QWidget):
        if not widget.isVisibleTo(root) or widget.window() is not root:
            continue
        if widget.width() <= 0 or widget.height() <= 0:
            continue
        found: list[str] = []
        viewport = _scroll_viewport(widget, root)
        if isinstance(widget, MAIN_CONTROLS) and viewport is None:
            rect = QRect(widget.mapTo(root, QPoint(0, 0)), widget.size())
            if not bounds.contains(rect):
                found.append(f"lies outside the window ({rect.getRect()} vs {bounds.size().toTuple()})")
        if isinstance(widget, QLabel):
            found.append(_label_cut(widget))
            text = _plain(widget)
            if text.strip() and (widget.pixmap() is None or widget.pixmap().isNull()):
                found.append(_clipped_by_parent(widget, root, _text_size(widget, text)))
        elif isinstance(widget, QComboBox):
            found.append(_combo_cut(widget))
        elif isinstance(widget, QAbstractButton):
            found.append(_button_cut(widget))
        elif widget.objectName() == CHIP_NAME:
            found.append(_chip_cut(widget))
            hint = widget.sizeHint()
            found.append(_clipped_by_parent(widget, root, (hint.width(), hint.height())))
        table = isinstance(widget, QAbstractItemView) and not isinstance(widget, QHeaderView)  # headers: by their view
        if isinstance(widget, QAbstractItemView) and table:
            found.extend(item_view_cuts(widget, roomy))
        if roomy and viewport is not None and (table or isinstance(widget, QGraphicsView)):
            found.append(_below_fold(widget, viewport))
        problems.extend(Problem(_name(widget), what) for what in found if what)
    return problems
