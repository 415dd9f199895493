"""The sample photos that ship with the app (assets/samples, captioned by what they show in
samples.json) and the strip of their thumbnails: one click classifies one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QRect, QSize, Qt, Signal
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from app.paths import assets_dir
from engines import IMAGE_SUFFIXES, natural_key
from ui.classify.photos import load_preview
from ui.common.plain import plain_tooltip

THUMB = 64


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


@dataclass(frozen=True)
class Sample:
    path: Path
    caption: str  # what the photo shows ("Cat", "Espresso")


def sample_photos(folder: Path | None = None) -> list[Sample]:
    """The samples in the order and with the captions of samples.json; a photo it does not list comes
    after them, captioned by its file name."""
    folder = folder if folder is not None else assets_dir() / "samples"
    try:
        found = {p.name: p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
    except OSError:
        return []
    try:
        listed = json.loads((folder / "samples.json").read_text(encoding="utf-8"))["samples"]
    except (OSError, ValueError, KeyError, TypeError):
        listed = []
    samples: list[Sample] = []
    for item in listed:
        path = found.pop(str(item.get("file", "")), None) if isinstance(item, dict) else None
        if path is not None:
            samples.append(Sample(path, str(item.get("caption") or path.stem)))
    rest = sorted(found.values(), key=lambda p: natural_key(str(p)))
    return samples + [Sample(p, p.stem.replace("_", " ").capitalize()) for p in rest]


def square_thumbnail(path: Path, size: int = THUMB) -> QPixmap:
    """The photo's centre as a square: every thumbnail has one height, so every caption sits on one line."""
    image = load_preview(str(path), longest=4 * size)
    if image.isNull():
        return QPixmap()
    side = min(image.width(), image.height())
    square = image.copy(QRect((image.width() - side) // 2, (image.height() - side) // 2, side, side))
    scaled = square.scaled(
        size * 2, size * 2, Qt.AspectRatioMode.IgnoreAspectRatio, Qt.TransformationMode.SmoothTransformation
    )
    return QPixmap.fromImage(scaled)


class SampleStrip(QWidget):
    """ "Or try a sample photo:" and one thumbnail button per sample, captioned by what it shows."""

    sample_clicked = Signal(str)

    def __init__(self, samples: list[Sample] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 4, 0, 0)
        column.setSpacing(6)
        self.title = QLabel(tr("Or try a sample photo:"))
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        column.addWidget(self.title)
        row = QHBoxLayout()
        row.setSpacing(8)
        row.addStretch(1)
        self.buttons: list[QToolButton] = []
        for sample in sample_photos() if samples is None else samples:
            button = QToolButton()
            button.setObjectName("SampleThumb")
            thumb = square_thumbnail(sample.path)
            if not thumb.isNull():
                button.setIcon(QIcon(thumb))
            button.setIconSize(QSize(THUMB, THUMB))
            button.setText(sample.caption)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
            button.setToolTip(plain_tooltip(tr("Classify this photo: {caption}").format(caption=sample.caption)))
            button.setAccessibleName(tr("Classify the sample photo: {caption}").format(caption=sample.caption))
            button.setProperty("path", str(sample.path))
            button.clicked.connect(lambda _=False, p=str(sample.path): self.sample_clicked.emit(p))
            row.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
            self.buttons.append(button)
        row.addStretch(1)
        column.addLayout(row)
        self.setVisible(bool(self.buttons))

    def caption_for(self, path: str) -> str:
        """What the sample at `path` shows ("" for a photo that is not a sample)."""
        for button in self.buttons:
            if button.property("path") == path:
                return button.text()
        return ""
