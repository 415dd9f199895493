"""The result panel: the top label, the photo's name, a note (low confidence, or results from another
device or model with "Classify again"), the top-5 bars, the placement chip, the photo's time, and Copy
(a button and the context menu)."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from engines import Classification, printable
from ui.classify.bars import ProbabilityBars
from ui.classify.batch import photo_ms
from ui.classify.photos import display_name
from ui.common.icons import icon
from ui.common.placement_chip import PlacementChip, describe_placement
from ui.common.widgets import Card, muted_label

LOW_CONFIDENCE = 0.30  # below this the top-1 is more likely a guess than an answer


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


def result_text(result: Classification, asked: str | None) -> str:
    """The result as plain text for the clipboard: the photo, the top-5, where it ran, its time."""
    lines = [display_name(result.path)]
    if result.error:
        return "\n".join([*lines, result.error])
    lines += [f"{s.label}\t{s.probability:.1%}" for s in result.top]
    if result.placement is not None:
        lines.append(describe_placement(result.placement, asked).text)
    lines.append(tr("{ms:.1f} ms").format(ms=photo_ms(result)))
    return "\n".join(lines)


class ResultPanel(Card):
    """Shows one result; `rerun_requested` is "Classify again" (results from another device or model)."""

    rerun_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setMinimumWidth(320)
        self.result: Classification | None = None
        self.asked: str | None = None
        # The content scrolls when the window is short (a batch table below): nothing is ever cut.
        scroll = QScrollArea()
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setObjectName("ResultScroll")
        scroll.setStyleSheet("QScrollArea#ResultScroll, QWidget#ResultContent { background: transparent; }")
        scroll.viewport().setAutoFillBackground(False)
        content = QWidget()
        content.setObjectName("ResultContent")
        body = QVBoxLayout(content)
        body.setContentsMargins(0, 0, 0, 0)
        scroll.setWidget(content)
        self.body.addWidget(scroll)
        head = QHBoxLayout()
        self.title = QLabel(tr("No photo yet"))
        self.title.setObjectName("ViewTitle")
        self.title.setTextFormat(Qt.TextFormat.PlainText)  # a label from a model folder is shown as it is
        self.title.setWordWrap(True)
        head.addWidget(self.title, 1)
        self.copy_button = QPushButton(icon("copy"), tr("Copy"))
        self.copy_button.setToolTip(tr("Copy the result (the top-5, where it ran, its time)"))
        self.copy_button.setAccessibleName(tr("Copy the result"))
        self.copy_button.clicked.connect(self.copy)
        self.copy_button.hide()
        head.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignTop)
        body.addLayout(head)
        self.file = muted_label("")
        self.file.setTextFormat(Qt.TextFormat.PlainText)
        body.addWidget(self.file)
        note = QHBoxLayout()
        self.hint = muted_label(tr("Open a photo, drop one here, or click a sample photo."))
        self.hint.setTextFormat(Qt.TextFormat.PlainText)
        note.addWidget(self.hint, 1)
        self.rerun_button = QPushButton(icon("refresh"), tr("Classify again"))
        self.rerun_button.setToolTip(tr("Classify the same photos with the current device and model"))
        self.rerun_button.clicked.connect(self.rerun_requested)
        self.rerun_button.hide()
        note.addWidget(self.rerun_button, 0, Qt.AlignmentFlag.AlignTop)
        body.addLayout(note)
        body.addSpacing(6)
        self.bars = ProbabilityBars()
        body.addWidget(self.bars)
        body.addSpacing(6)
        chip_row = QHBoxLayout()
        self.chip = PlacementChip()
        self.chip.setAccessibleName(tr("Where this photo ran"))
        chip_row.addWidget(self.chip)
        chip_row.addStretch(1)
        body.addLayout(chip_row)
        self.latency = muted_label("")
        self.latency.setTextFormat(Qt.TextFormat.PlainText)
        body.addWidget(self.latency)
        body.addStretch(1)
        self._copied = QTimer(self)
        self._copied.setSingleShot(True)
        self._copied.setInterval(1500)
        self._copied.timeout.connect(lambda: self.copy_button.setText(tr("Copy")))
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)

    # --- what it shows ------------------------------------------------------------------------------
    def show_failure(self, path: str, why: str = "") -> None:
        """Nothing of an earlier photo stays next to the one that failed."""
        self.result = None
        self.title.setText(tr("Could not classify"))
        self.file.setText(printable(display_name(path), newlines=False) if path else "")
        self.show_note("")
        self.bars.set_scores([])
        self.chip.clear()
        self.latency.setText(printable(why))
        self.copy_button.hide()

    def show_result(self, result: Classification, asked: str | None, shared: bool = False) -> None:
        """`shared`: the photo ran in a batch, so its inference time is its share of the batch's."""
        if result.error:
            self.show_failure(result.path, result.error)
            return
        self.result, self.asked = result, asked
        self.file.setText(printable(display_name(result.path), newlines=False))
        top = result.top[0] if result.top else None
        self.title.setText(printable(top.label, newlines=False) if top else "—")
        if top is not None and top.probability < LOW_CONFIDENCE:
            self.show_note(
                tr(
                    "Low confidence: the model is not sure. It knows 1,000 ImageNet classes; "
                    "the photo may show none of them."
                )
            )
        else:
            self.show_note("")
        self.bars.set_scores([(s.label, s.probability) for s in result.top])
        inference = (
            tr("inference {inf:.1f} ms (its share of the batch)") if shared else tr("inference {inf:.1f} ms")
        ).format(inf=result.latency_ms)
        self.latency.setText(
            tr("This photo {total:.1f} ms: {inference} · decode + preprocessing {pre:.1f} ms").format(
                total=photo_ms(result), inference=inference, pre=result.preprocess_ms
            )
        )
        self.chip.set_placement(result.placement, asked)
        self.copy_button.show()
        self.copy_button.setText(tr("Copy"))

    def show_note(self, text: str, rerun: bool = False) -> None:
        """A note under the title ("" hides it); `rerun` offers "Classify again" beside it."""
        self.hint.setText(text)
        self.hint.setVisible(bool(text))
        self.rerun_button.setVisible(rerun)

    # --- copy ---------------------------------------------------------------------------------------
    def copy(self) -> None:
        if self.result is None:
            return
        QGuiApplication.clipboard().setText(result_text(self.result, self.asked))
        self.copy_button.setText(tr("Copied"))
        self._copied.start()

    def _menu(self, at: QPoint) -> None:
        menu = QMenu(self)
        action = menu.addAction(icon("copy"), tr("Copy result"))
        action.setEnabled(self.result is not None)
        action.triggered.connect(self.copy)
        menu.popup(self.mapToGlobal(at))
