"""The top-k list of a result: each label (plain text, elided with "…" and its whole name in a tooltip
when the column is narrow), a bar and the percentage."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QSizePolicy, QWidget

from engines import printable
from ui.common.plain import plain_tooltip

TOP_K = 5


class ElidedLabel(QLabel):
    """A one-line plain-text label that shows "…" (and the whole text in its tooltip) when it is narrow,
    instead of cutting the text off."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(72)
        self._full = ""
        self.set_full_text(text)

    def set_full_text(self, text: str) -> None:
        self._full = printable(text, newlines=False)
        self.updateGeometry()
        self._elide()

    def full_text(self) -> str:
        return self._full

    def sizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + 4, super().sizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        room = max(self.contentsRect().width(), 0)
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, room)
        self.setText(shown)
        self.setToolTip(plain_tooltip(self._full) if shown != self._full else "")


class ProbabilityBars(QWidget):
    """Top-k labels with horizontal bars and percentages; the first label in bold."""

    def __init__(self, rows: int = TOP_K, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(8)
        self.labels: list[ElidedLabel] = []
        self.bars: list[QProgressBar] = []
        self.values: list[QLabel] = []
        for row in range(rows):
            label = ElidedLabel()
            if row == 0:
                font = label.font()
                font.setBold(True)
                label.setFont(font)
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setTextVisible(False)
            bar.setFixedHeight(12)
            bar.setMinimumWidth(60)
            value = QLabel("")
            value.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            value.setMinimumWidth(value.fontMetrics().horizontalAdvance("100.0%") + 4)
            grid.addWidget(label, row, 0)
            grid.addWidget(bar, row, 1)
            grid.addWidget(value, row, 2)
            self.labels.append(label)
            self.bars.append(bar)
            self.values.append(value)
        grid.setColumnStretch(0, 3)
        grid.setColumnStretch(1, 2)
        self.set_scores([])

    def set_scores(self, scores: Sequence[tuple[str, float]]) -> None:
        for row, (label, bar, value) in enumerate(zip(self.labels, self.bars, self.values, strict=True)):
            if row < len(scores):
                name, probability = scores[row]
                label.set_full_text(name)
                bar.setValue(round(probability * 1000))
                value.setText(f"{probability:.1%}")
                bar.show()
            else:
                label.set_full_text("")
                value.setText("")
                bar.setValue(0)
                bar.hide()
