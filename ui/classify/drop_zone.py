"""The preview area, which is also the visible target for drag and drop. Empty, it offers the sample
photos (ui.classify.samples)."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt, Signal
from PySide6.QtGui import QImage, QPixmap, QResizeEvent
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QVBoxLayout, QWidget

from engines import printable
from ui.classify.samples import SampleStrip
from ui.common.icons import pixmap
from ui.common.theme import colors
from ui.common.widgets import muted_label, repolish


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


EMPTY_CAPTION = "Drop photos or a folder here, open them (Ctrl+O) or paste an image (Ctrl+V)."


class DropZone(QFrame):
    """The photo shown (or a placeholder and the samples) with its caption; hover shows a drop is welcome."""

    sample_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("DropZone")
        self.setMinimumSize(QSize(280, 220))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 16)
        self.image = QLabel()
        self.image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.image.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        self.image.setAccessibleName(tr("Photo preview"))
        layout.addWidget(self.image, 1)
        self.caption = muted_label(tr(EMPTY_CAPTION))
        self.caption.setTextFormat(Qt.TextFormat.PlainText)  # a file name is shown as it is
        self.caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(self.caption)
        self.samples = SampleStrip()
        self.samples.sample_clicked.connect(self.sample_clicked)
        layout.addWidget(self.samples)
        self._source: QPixmap | None = None
        self.show_placeholder()

    def show_placeholder(self, caption: str | None = None) -> None:
        """Nothing to show: the placeholder glyph and the samples (caption None: the empty invitation)."""
        self._source = None
        self.image.setPixmap(pixmap("classify", 56, colors().muted))
        self.caption.setText(tr(EMPTY_CAPTION) if caption is None else printable(caption, newlines=False))
        self.samples.setVisible(caption is None and bool(self.samples.buttons))

    def show_image(self, image: QImage, caption: str) -> None:
        self._source = QPixmap.fromImage(image)
        self.caption.setText(printable(caption, newlines=False))
        self.samples.hide()
        self._rescale()

    def set_hover(self, hover: bool) -> None:
        self.setProperty("hover", hover)
        repolish(self)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._rescale()

    def changeEvent(self, event: QEvent) -> None:
        # The placeholder glyph is tinted with the theme: re-render it after a live theme switch.
        if event.type() == QEvent.Type.StyleChange and self._source is None:
            self.image.setPixmap(pixmap("classify", 56, colors().muted))
        super().changeEvent(event)

    def _rescale(self) -> None:
        if self._source is None or self._source.isNull():
            return
        size = self.image.size()
        if size.width() < 8 or size.height() < 8:
            size = QSize(400, 300)
        self.image.setPixmap(
            self._source.scaled(size, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
        )
