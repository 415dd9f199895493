"""The Benchmark results table: one row per device for the model shown, its first column the same
placement chip as everywhere else in the app (drawn by a delegate, whole: the column is as wide as its
longest chip), the numbers after it, and as tall as its rows, so nothing in it scrolls at 1280x720."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QSizePolicy,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from engines import DeviceResult
from ui.bench.text import COLUMN_TIPS, columns_for, number_cells, row_chip, row_details
from ui.common.icons import pixmap
from ui.common.placement_chip import ChipText, chip_color, chip_icon_name
from ui.common.plain import plain_text, plain_tooltip
from ui.common.theme import colors

CHIP_ROLE = Qt.ItemDataRole.UserRole + 1  # the row's ChipText
ICON = 14
PAD, GAP, MARGIN = 8, 6, 4  # inside the chip, icon to text, chip to cell edge
Index = QModelIndex | QPersistentModelIndex


def chip_background(kind: str) -> str:
    c = colors()
    return {"ok": c.ok_bg, "warn": c.warn_bg, "error": c.error_bg, "info": c.info_bg}.get(kind, c.surface_alt)


class ChipDelegate(QStyledItemDelegate):
    """Draws a cell's ChipText as the placement chip draws itself: colour, icon and the whole line."""

    @staticmethod
    def _font(option: QStyleOptionViewItem) -> QFont:
        font = QFont(option.font)
        font.setWeight(QFont.Weight.DemiBold)
        return font

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        chip = index.data(CHIP_ROLE)
        if not isinstance(chip, ChipText):
            return super().sizeHint(option, index)
        metrics = QFontMetrics(self._font(option))
        width = 2 * MARGIN + PAD + ICON + GAP + metrics.horizontalAdvance(plain_text(chip.text, one_line=True)) + PAD
        return QSize(width, max(ICON, metrics.height()) + 2 * MARGIN + 4)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        chip = index.data(CHIP_ROLE)
        if not isinstance(chip, ChipText):
            super().paint(painter, option, index)
            return
        widget = option.widget
        style = widget.style() if widget is not None else None
        if style is not None:  # the row's selection and alternate colour under the chip
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, option, painter, widget)
        text = plain_text(chip.text, one_line=True)
        metrics = QFontMetrics(self._font(option))
        height = max(ICON, metrics.height()) + 4
        width = PAD + ICON + GAP + metrics.horizontalAdvance(text) + PAD
        rect = QRect(option.rect.left() + MARGIN, option.rect.center().y() - height // 2 + 1, width, height)
        fg = QColor(chip_color(chip.kind))
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(fg, 1))
        painter.setBrush(QColor(chip_background(chip.kind)))
        painter.drawRoundedRect(rect.adjusted(0, 0, -1, -1), height / 2, height / 2)
        glyph = pixmap(chip_icon_name(chip.kind), ICON, fg.name())
        painter.drawPixmap(rect.left() + PAD, rect.center().y() - ICON // 2 + 1, glyph)
        painter.setFont(self._font(option))
        text_rect = rect.adjusted(PAD + ICON + GAP, 0, -PAD, 0)
        painter.drawText(text_rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), text)
        painter.restore()


class BenchTable(QTableWidget):
    """The rows of one model; its height is its header and rows (a horizontal bar only when needed)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 0, parent)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setWordWrap(False)
        self.setAlternatingRowColors(True)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setItemDelegateForColumn(0, ChipDelegate(self))
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.results: list[DeviceResult] = []

    def show_results(self, results: Sequence[DeviceResult]) -> None:
        """Rows for one model's results (its kind sets the columns)."""
        self.results = list(results)
        kind = results[0].kind if results else ""
        batch = next((r.batch for r in results if r.ok and r.batch > 1), 0)
        columns = columns_for(kind, batch) if results else ()
        self.clear()
        self.setColumnCount(len(columns))
        self.setRowCount(len(results))
        for column, title in enumerate(columns):
            head = QTableWidgetItem(title)
            if title in COLUMN_TIPS:
                head.setToolTip(plain_tooltip(COLUMN_TIPS[title]))
            self.setHorizontalHeaderItem(column, head)
        for row, result in enumerate(results):
            details = plain_tooltip(row_details(result))  # a reason may quote a model's name or a path
            chip = row_chip(result)
            first = QTableWidgetItem(plain_text(chip.text, one_line=True))
            first.setData(CHIP_ROLE, chip)
            first.setToolTip(details)
            self.setItem(row, 0, first)
            for column, text in enumerate(number_cells(result), start=1):
                item = QTableWidgetItem(plain_text(text, one_line=True))
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setToolTip(details)
                self.setItem(row, column, item)
        self.resizeRowsToContents()
        self.resizeColumnsToContents()
        self.setMaximumWidth(max(self._width(), 1) if columns else 16_777_215)
        self.updateGeometry()

    def chip(self, row: int) -> ChipText | None:
        item = self.item(row, 0)
        data = item.data(CHIP_ROLE) if item is not None else None
        return data if isinstance(data, ChipText) else None

    def _height(self) -> int:
        rows = sum(self.rowHeight(r) for r in range(self.rowCount())) or self.verticalHeader().defaultSectionSize()
        bar = self.horizontalScrollBar().sizeHint().height() if self.horizontalScrollBar().isVisibleTo(self) else 0
        return 2 * self.frameWidth() + self.horizontalHeader().sizeHint().height() + rows + bar

    def _width(self) -> int:
        """Its columns and frame: the table ends where its last column does."""
        columns = sum(self.columnWidth(c) for c in range(self.columnCount()))
        return columns + 2 * self.frameWidth()

    def sizeHint(self) -> QSize:
        return QSize(self._width(), self._height())

    def minimumSizeHint(self) -> QSize:
        return QSize(super().minimumSizeHint().width(), self._height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.height() != self._height():
            self.updateGeometry()
