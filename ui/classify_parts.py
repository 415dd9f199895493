"""Parts of the Classify view: folder expansion in natural order, the results table model (per-photo
times), the top-k bars, the drop zone with the sample photos, and the batch summary line."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QCoreApplication,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QIcon, QImage, QImageReader, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.paths import assets_dir
from app.qtcompat import emit
from engines.text import printable, rich_text
from engines.types import IMAGE_SUFFIXES, Classification, Placement
from ui.icons import pixmap
from ui.placement_chip import describe_placement
from ui.theme import colors
from ui.widgets import muted_label, repolish


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


_CHIP_ICONS = {"ok": "check", "warn": "warning", "info": "info", "error": "error"}


@lru_cache(maxsize=16)
def _chip_icon(kind: str, color: str) -> QIcon:
    # Cached by colour: table repaints during a batch must not re-render SVGs (a theme switch changes the key).
    return QIcon(pixmap(_CHIP_ICONS.get(kind, "info"), 16, color))


def _chip_color(kind: str) -> str:
    c = colors()
    return {"ok": c.ok, "warn": c.warn, "error": c.error}.get(kind, c.accent)


TOP_K = 5


def natural_key(path: str) -> tuple[Any, ...]:
    """astronaut_2 before astronaut_10: digits compare as numbers, letters without case."""
    name = Path(path).name
    return tuple(int(part) if part.isdigit() else part.casefold() for part in re.split(r"(\d+)", name))


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files as given, folders expanded to the images they hold (natural order, not recursive)."""
    out: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            try:
                entries = sorted((e.path for e in os.scandir(path) if e.is_file()), key=natural_key)
            except OSError:
                continue
            out.extend(p for p in entries if Path(p).suffix.lower() in IMAGE_SUFFIXES)
        else:
            out.append(str(path))
    return out


def placement_badge_kind(placement: Placement) -> str:
    if placement.fell_back:
        return "warn"
    return "info" if len(placement.nodes_per_ep) > 1 else "ok"


def photo_ms(result: Classification) -> float:
    """This photo's own time: its decode + preprocessing plus its share of the inference."""
    return result.preprocess_ms + result.latency_ms


def failure_cause(result: Classification) -> str:
    """The cause of a failed photo without its name, so that failures group by cause."""
    text = result.error
    for name in {result.path, Path(result.path).name}:
        if name:
            text = text.replace(f"'{name}'", "").replace(name, "")
    first = re.split(r"(?<=[.:])\s", text.strip(), maxsplit=1)[0]
    return re.sub(r"\s+", " ", first).strip(" .:") or tr("unknown error")


def batch_summary(results: Sequence[Classification], seconds: float | None, total: int) -> str:
    """ "242 photos in 3.1 s (78 photos/s) · 240 classified · 2 failed: 2 could not be decoded"."""
    failed = [r for r in results if r.error]
    done = len(results) - len(failed)
    parts = [tr("{n} photos").format(n=total) if total != 1 else tr("1 photo")]
    if seconds and seconds > 0:
        parts[0] += " " + tr("in {s:.1f} s ({rate:.0f} photos/s)").format(s=seconds, rate=len(results) / seconds)
    parts.append(tr("{n} classified").format(n=done))
    if failed:
        causes = Counter(failure_cause(r) for r in failed)
        listed = "; ".join(f"{n}× {cause}" for cause, n in causes.most_common(3))
        parts.append(tr("{n} failed ({causes})").format(n=len(failed), causes=listed))
    if len(results) < total:
        parts.append(tr("{n} not run").format(n=total - len(results)))
    return " · ".join(parts)


class ResultsModel(QAbstractTableModel):
    HEADERS = ("File", "Top-1", "Probability", "Time (ms)", "Ran on")

    def __init__(self) -> None:
        super().__init__()
        self.results: list[Classification] = []
        self.asked = ""  # what the user asked for in this run (DeviceChoice.describe())

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.results)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return tr(self.HEADERS[section])
        if role == Qt.ItemDataRole.ToolTipRole and orientation == Qt.Orientation.Horizontal and section == 3:
            return tr("Each photo's decode and preprocessing plus its share of the batch's inference")
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        result = self.results[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:  # a file name or label may carry controls or a bidi override
            return printable(self.cell(result, column), newlines=False)
        if role == Qt.ItemDataRole.ToolTipRole:  # tooltips render rich text: escaped, inside a paragraph
            if result.error:
                return f"<p>{rich_text(result.error)}</p>"
            if column == 3:
                return tr("Decode + preprocessing {pre:.1f} ms · inference {inf:.1f} ms").format(
                    pre=result.preprocess_ms, inf=result.latency_ms
                )
            if column == 4 and result.placement is not None:
                return describe_placement(result.placement, self.asked or None).details
            return f"<p>{rich_text(result.path)}</p>"
        if role == Qt.ItemDataRole.DecorationRole and column == 4 and result.placement is not None and not result.error:
            chip = describe_placement(result.placement, self.asked or None)
            return _chip_icon(chip.kind, _chip_color(chip.kind))
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (2, 3):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and result.error:
            return QColor(colors().error)
        return None

    def cell(self, result: Classification, column: int) -> str:
        """One cell's text, computed alone: Qt asks for cells one by one on every repaint."""
        if result.error:
            if column == 0:
                return Path(result.path).name if result.path != "<bytes>" else tr("Pasted image")
            return ("", "—", "", "", result.error)[column]
        if column == 3:
            return f"{photo_ms(result):.1f}"
        if column == 4:
            return describe_placement(result.placement, self.asked or None).text if result.placement else ""
        top = result.top[0] if result.top else None
        if column == 1:
            return top.label if top else "—"
        if column == 2:
            return f"{top.probability:.1%}" if top else ""
        return Path(result.path).name if result.path != "<bytes>" else tr("Pasted image")

    def row_values(self, result: Classification) -> tuple[str, str, str, str, str]:
        name = Path(result.path).name if result.path != "<bytes>" else tr("Pasted image")
        if result.error:
            return (name, "—", "", "", result.error)
        top = result.top[0] if result.top else None
        device = describe_placement(result.placement, self.asked or None).text if result.placement else ""
        return (
            name,
            top.label if top else "—",
            f"{top.probability:.1%}" if top else "",
            f"{photo_ms(result):.1f}",
            device,
        )

    def add(self, result: Classification) -> None:
        self.extend([result])

    def extend(self, results: Sequence[Classification]) -> None:
        if not results:
            return
        row = len(self.results)
        self.beginInsertRows(QModelIndex(), row, row + len(results) - 1)
        self.results.extend(results)
        self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self.results = []
        self.endResetModel()


class ProbabilityBars(QWidget):
    """Top-k labels with horizontal bars and percentages."""

    def __init__(self, rows: int = TOP_K, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(8)
        self.labels: list[QLabel] = []
        self.bars: list[QProgressBar] = []
        self.values: list[QLabel] = []
        for row in range(rows):
            label = QLabel("")
            label.setMinimumWidth(150)
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setTextVisible(False)
            bar.setFixedHeight(12)
            value = QLabel("")
            value.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            value.setMinimumWidth(52)
            grid.addWidget(label, row, 0)
            grid.addWidget(bar, row, 1)
            grid.addWidget(value, row, 2)
            self.labels.append(label)
            self.bars.append(bar)
            self.values.append(value)
        grid.setColumnStretch(1, 1)
        self.set_scores([])

    def set_scores(self, scores: Sequence[tuple[str, float]]) -> None:
        for row, (label, bar, value) in enumerate(zip(self.labels, self.bars, self.values, strict=True)):
            if row < len(scores):
                name, probability = scores[row]
                label.setText(f"<b>{rich_text(name)}</b>" if row == 0 else rich_text(name))
                bar.setValue(round(probability * 1000))
                value.setText(f"{probability:.1%}")
                bar.show()
            else:
                label.setText("")
                value.setText("")
                bar.setValue(0)
                bar.hide()

    def scores(self) -> list[tuple[str, str]]:
        return [(lbl.text(), val.text()) for lbl, val in zip(self.labels, self.values, strict=True) if val.text()]


def sample_photos() -> list[Path]:
    """The photos that ship with the app (assets/samples), in natural order."""
    folder = assets_dir() / "samples"
    try:
        found = [p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES]
    except OSError:
        return []
    return sorted(found, key=lambda p: natural_key(str(p)))


class DropZone(QFrame):
    """The preview area; also the visible target for drag and drop. Empty, it offers the sample photos:
    one click classifies one."""

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
        self.caption = muted_label(tr("Drop photos or a folder here, open them (Ctrl+O) or paste an image (Ctrl+V)."))
        self.caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(self.caption)
        self.samples = QWidget()
        samples = QVBoxLayout(self.samples)
        samples.setContentsMargins(0, 4, 0, 0)
        samples.setSpacing(6)
        self.samples_title = QLabel(tr("Or try a sample photo:"))
        self.samples_title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        samples.addWidget(self.samples_title)
        row = QHBoxLayout()
        row.setSpacing(8)
        row.addStretch(1)
        self.sample_buttons: list[QToolButton] = []
        for photo in sample_photos():
            button = QToolButton()
            button.setObjectName("SampleThumb")
            thumb = load_preview(str(photo), longest=128)
            if not thumb.isNull():
                button.setIcon(QIcon(QPixmap.fromImage(thumb)))
            button.setIconSize(QSize(64, 64))
            button.setText(photo.stem)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
            button.setToolTip(tr("Classify {name}").format(name=photo.name))
            button.setAccessibleName(tr("Classify the sample photo {name}").format(name=photo.stem))
            button.clicked.connect(lambda _=False, p=str(photo): emit(self.sample_clicked, p))
            row.addWidget(button)
            self.sample_buttons.append(button)
        row.addStretch(1)
        samples.addLayout(row)
        layout.addWidget(self.samples)
        self._source: QPixmap | None = None
        self.show_placeholder()

    def show_placeholder(self) -> None:
        self._source = None
        self.image.setPixmap(pixmap("classify", 56, colors().muted))
        self.samples.setVisible(bool(self.sample_buttons))

    def show_image(self, image: QImage, caption: str) -> None:
        self._source = QPixmap.fromImage(image)
        self.caption.setText(caption)
        self.samples.hide()
        self._rescale()

    def has_image(self) -> bool:
        return self._source is not None

    def set_hover(self, hover: bool) -> None:
        self.setProperty("hover", hover)
        repolish(self)

    def resizeEvent(self, event: Any) -> None:
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


def load_preview(path: str, longest: int = 900) -> QImage:
    """Read an image for display, decoded at reduced size when it is large."""
    reader = QImageReader(path)
    reader.setAutoTransform(True)
    size = reader.size()
    if size.isValid() and max(size.width(), size.height()) > longest:
        reader.setScaledSize(size.scaled(longest, longest, Qt.AspectRatioMode.KeepAspectRatio))
    return reader.read()
