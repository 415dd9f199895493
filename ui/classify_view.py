"""Classify: open, drop or paste photos (or a whole folder); preview, top-5 bars, latency, an honest
placement badge, and a results table for batches with CSV export."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QBuffer,
    QByteArray,
    QIODevice,
    QModelIndex,
    QPersistentModelIndex,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QDragEnterEvent,
    QDragLeaveEvent,
    QDropEvent,
    QImage,
    QImageReader,
    QImageWriter,
    QKeySequence,
    QPixmap,
)
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.qtcompat import emit
from engines.text import rich_text
from engines.types import Classification, Placement
from ui.device_picker import DeviceChoiceModel, DevicePicker
from ui.icons import icon, pixmap
from ui.theme import colors
from ui.widgets import MARGIN, SPACING, Banner, BannerArea, Card, Spinner, ViewHeader, muted_label, repolish, set_badge

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
TOP_K = 5


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files as given, folders expanded to the images they hold (sorted, not recursive)."""
    out: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            try:
                entries = sorted(e.path for e in os.scandir(path) if e.is_file())
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


class ResultsModel(QAbstractTableModel):
    HEADERS = ("File", "Top-1", "Probability", "Latency (ms)", "Ran on")

    def __init__(self) -> None:
        super().__init__()
        self.results: list[Classification] = []

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.results)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.HEADERS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        result = self.results[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.row_values(result)[column]
        if role == Qt.ItemDataRole.ToolTipRole:
            return result.error or result.path
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (2, 3):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and result.error:
            from PySide6.QtGui import QColor

            return QColor(colors().error)
        return None

    @staticmethod
    def row_values(result: Classification) -> tuple[str, str, str, str, str]:
        name = Path(result.path).name if result.path != "<bytes>" else "Pasted image"
        if result.error:
            return (name, "—", "", "", result.error)
        top = result.top[0] if result.top else None
        device = result.placement.badge() if result.placement else ""
        return (
            name,
            top.label if top else "—",
            f"{top.probability:.1%}" if top else "",
            f"{result.latency_ms:.1f}",
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


class DropZone(QFrame):
    """The preview area; also the visible target for drag and drop."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("DropZone")
        self.setMinimumSize(QSize(280, 260))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 16)
        self.image = QLabel()
        self.image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.image.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        layout.addWidget(self.image, 1)
        self.caption = muted_label("Drop photos or a folder here, open them (Ctrl+O) or paste an image (Ctrl+V).")
        self.caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(self.caption)
        self._source: QPixmap | None = None
        self.show_placeholder()

    def show_placeholder(self) -> None:
        self._source = None
        self.image.setPixmap(pixmap("classify", 64, colors().muted))

    def show_image(self, image: QImage, caption: str) -> None:
        self._source = QPixmap.fromImage(image)
        self.caption.setText(caption)
        self._rescale()

    def has_image(self) -> bool:
        return self._source is not None

    def set_hover(self, hover: bool) -> None:
        self.setProperty("hover", hover)
        repolish(self)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._rescale()

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


class ClassifyView(QWidget):
    """Requests go out as signals (wired to the vision host by the app); results come back to slots."""

    classify_requested = Signal(list)  # list[str] paths
    classify_image_requested = Signal(bytes, str)  # encoded image, display name
    cancel_requested = Signal()

    def __init__(self, choice_model: DeviceChoiceModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.busy = False
        self.last_open_dir = ""
        self._pending: list[Classification] = []
        self._preview_path = ""
        self._apply_timer = QTimer(self)
        self._apply_timer.setSingleShot(True)
        self._apply_timer.setInterval(100)
        self._apply_timer.timeout.connect(self._apply_pending)
        self._total = 0
        self._done = 0
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader("Classify", "Which of 1,000 ImageNet classes is in the photo, and where it ran.")
        self.model_label = muted_label("", word_wrap=False)
        self.header.controls.addWidget(self.model_label)
        self.picker = DevicePicker(choice_model, compact=True)
        self.header.controls.addWidget(self.picker)
        outer.addWidget(self.header)
        self.banners = BannerArea()
        outer.addWidget(self.banners)

        actions = QHBoxLayout()
        actions.setSpacing(8)
        self.open_button = QPushButton(icon("open"), "Open photos…")
        self.open_button.setObjectName("Primary")
        self.open_button.setIcon(icon("open", colors().accent_text))
        self.open_button.setShortcut(QKeySequence.StandardKey.Open)
        self.open_button.setToolTip("Open photos (Ctrl+O)")
        self.open_button.clicked.connect(self.open_files)
        self.folder_button = QPushButton(icon("folder"), "Classify a folder…")
        self.folder_button.clicked.connect(self.open_folder)
        self.paste_button = QPushButton(icon("paste"), "Paste")
        self.paste_button.setToolTip("Classify the image on the clipboard (Ctrl+V)")
        self.paste_button.setShortcut(QKeySequence.StandardKey.Paste)
        self.paste_button.clicked.connect(self.paste)
        for button in (self.open_button, self.folder_button, self.paste_button):
            actions.addWidget(button)
        actions.addStretch(1)
        self.spinner = Spinner()
        actions.addWidget(self.spinner)
        self.status = muted_label("", word_wrap=False)
        actions.addWidget(self.status)
        self.progress = QProgressBar()
        self.progress.setFixedWidth(180)
        self.progress.setTextVisible(False)
        self.progress.hide()
        actions.addWidget(self.progress)
        self.cancel_button = QPushButton(icon("stop"), "Cancel")
        self.cancel_button.setToolTip("Stop the batch (Esc)")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        actions.addWidget(self.cancel_button)
        outer.addLayout(actions)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setChildrenCollapsible(False)
        top = QSplitter(Qt.Orientation.Horizontal)
        top.setChildrenCollapsible(False)
        self.drop_zone = DropZone()
        top.addWidget(self.drop_zone)
        result_card = Card()
        result_card.setMinimumWidth(340)
        self.result_title = QLabel("No photo yet")
        self.result_title.setObjectName("ViewTitle")
        self.result_title.setWordWrap(True)
        result_card.body.addWidget(self.result_title)
        self.result_file = muted_label("")
        result_card.body.addWidget(self.result_file)
        result_card.body.addSpacing(6)
        self.bars = ProbabilityBars()
        result_card.body.addWidget(self.bars)
        result_card.body.addSpacing(6)
        badge_row = QHBoxLayout()
        self.placement_badge = QLabel()
        self.placement_badge.setWordWrap(True)
        self.placement_badge.hide()
        badge_row.addWidget(self.placement_badge)
        badge_row.addStretch(1)
        result_card.body.addLayout(badge_row)
        self.latency = muted_label("")
        result_card.body.addWidget(self.latency)
        result_card.body.addStretch(1)
        top.addWidget(result_card)
        top.setStretchFactor(0, 3)
        top.setStretchFactor(1, 2)
        splitter.addWidget(top)

        self.table_card = Card()
        table_head = QHBoxLayout()
        self.table_title = QLabel("Batch results")
        self.table_title.setObjectName("SectionTitle")
        table_head.addWidget(self.table_title)
        table_head.addStretch(1)
        self.export_button = QPushButton(icon("export"), "Export CSV…")
        self.export_button.clicked.connect(self.export_csv_dialog)
        table_head.addWidget(self.export_button)
        self.table_card.body.addLayout(table_head)
        self.results = ResultsModel()
        self.table = QTableView()
        self.table.setModel(self.results)
        self.table.setAlternatingRowColors(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setDefaultSectionSize(28)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for column in (2, 3):  # fixed: ResizeToContents would measure every row on each insert
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(column, 110)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        self.table.clicked.connect(self._row_clicked)
        self.table_card.body.addWidget(self.table)
        self.table_card.hide()
        splitter.addWidget(self.table_card)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        outer.addWidget(splitter, 1)

    # --- inputs -------------------------------------------------------------------------------------
    def open_files(self) -> None:
        filters = "Images (" + " ".join(f"*{s}" for s in sorted(IMAGE_SUFFIXES)) + ");;All files (*)"
        paths, _ = QFileDialog.getOpenFileNames(self, "Open photos", self.last_open_dir, filters)
        if paths:
            self.last_open_dir = str(Path(paths[0]).parent)
            self.classify_paths(paths)

    def open_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Classify every photo in a folder", self.last_open_dir)
        if folder:
            self.last_open_dir = folder
            self.classify_paths([folder])

    def paste(self) -> None:
        mime = QApplication.clipboard().mimeData()
        if mime is not None and mime.hasImage():
            image = QImage(mime.imageData())
            if not image.isNull():
                self.classify_image(image, "Pasted image")
                return
        if mime is not None and mime.hasUrls():
            local = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
            if local:
                self.classify_paths(local)
                return
        self.banners.show_message(
            "The clipboard holds no image.", "Copy a photo (or an image file) first, then paste.", "warning"
        )

    def classify_image(self, image: QImage, name: str) -> None:
        if self.busy:
            return
        buffer = QBuffer()
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        if not QImageWriter(buffer, QByteArray(b"PNG")).write(image):
            self.banners.show_message("The pasted image could not be read.", "Copy it again, or save it as a file.")
            return
        data = bytes(buffer.data().data())
        self._begin(1)
        self.drop_zone.show_image(image, name)
        emit(self.classify_image_requested, data, name)

    def classify_paths(self, paths: Sequence[str]) -> None:
        """Classify files and folders (the entry point for open, drop and tests)."""
        if self.busy:
            self.banners.show_message("Still classifying.", "Wait for the current run to finish or cancel it.", "info")
            return
        files = expand_paths(paths)
        if not files:
            self.banners.show_message(
                "No photos to classify.",
                "Choose image files (JPEG, PNG, BMP, GIF, WebP, TIFF) or a folder that contains some.",
                "warning",
            )
            return
        self._begin(len(files))
        self._preview_path = files[0]
        preview = load_preview(files[0])
        if not preview.isNull():
            self.drop_zone.show_image(preview, Path(files[0]).name if len(files) == 1 else f"{len(files)} photos")
        else:
            self.drop_zone.show_placeholder()
            self.drop_zone.caption.setText(Path(files[0]).name)
        emit(self.classify_requested, files)

    def cancel(self) -> None:
        if self.busy:
            self.status.setText("Cancelling…")
            emit(self.cancel_requested)

    # --- drag and drop ------------------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        mime = event.mimeData()
        if (mime.hasUrls() and any(u.isLocalFile() for u in mime.urls())) or mime.hasImage():
            event.acceptProposedAction()
            self.drop_zone.set_hover(True)

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:
        self.drop_zone.set_hover(False)

    def dropEvent(self, event: QDropEvent) -> None:
        self.drop_zone.set_hover(False)
        mime = event.mimeData()
        local = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
        if local:
            event.acceptProposedAction()
            self.classify_paths(local)
        elif mime.hasImage():
            event.acceptProposedAction()
            self.classify_image(QImage(mime.imageData()), "Dropped image")

    # --- slots wired to the vision host -------------------------------------------------------------
    def set_model_name(self, name: str) -> None:
        self.model_label.setText(name)

    def show_busy(self, text: str) -> None:
        """Loading or compiling the model (status from the host)."""
        self.spinner.start()
        self.status.setText(text)

    def show_result(self, result: Classification) -> None:
        """Results arrive in bursts (a batch at a time); they are shown together, a few times a second
        at most, so that a fast batch costs the UI thread little."""
        self._pending.append(result)
        if self._total == 1:
            self._apply_pending()
        elif not self._apply_timer.isActive():
            self._apply_timer.start()

    def _apply_pending(self) -> None:
        self._apply_timer.stop()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        self.results.extend(pending)
        self._done = len(self.results.results)
        if self._total > 1:
            self.progress.setValue(self._done)
            self.status.setText(f"{self._done} of {self._total}")
        # The detail shows the photo in the preview (the first one of a batch).
        shown = next((r for r in pending if r.path == self._preview_path), None)
        if self._total == 1:
            self._show_detail(pending[0], update_preview=False)
        elif shown is not None:
            self._show_detail(shown, update_preview=False)

    def show_progress(self, done: int, total: int) -> None:
        """Progress comes with each result (show_result); nothing more to draw."""

    def show_finished(self) -> None:
        self._apply_pending()
        errors = [r for r in self.results.results if r.error]
        self._end(f"{len(self.results.results)} classified" if self._total > 1 else "")
        if errors and self._total > 1:
            self.banners.show_message(
                f"{len(errors)} of {self._total} photos could not be read.",
                "They are listed in the table with the reason.",
                "warning",
            )

    def show_cancelled(self) -> None:
        self._apply_pending()
        self._end(f"Cancelled after {self._done} of {self._total}")

    def show_error(self, error: object) -> Banner:
        self._apply_pending()
        self._end("")
        banner = self.banners.show_error(error)
        if not self.results.results:
            self.result_title.setText("Could not classify")
        return banner

    def show_loaded(self, description: str) -> None:
        """The model is ready (after a load or compile); `description` names it and where it runs."""
        if not self.busy:
            self.spinner.stop()
            self.status.setText("")
        self.model_label.setText(description)

    # --- internals ----------------------------------------------------------------------------------
    def _begin(self, total: int) -> None:
        self.busy = True
        self._total = total
        self._done = 0
        self._pending = []
        self.results.clear()
        self.banners.clear()
        self.spinner.start()
        self.status.setText("Classifying…")
        for button in (self.open_button, self.folder_button, self.paste_button):
            button.setEnabled(False)
        batch = total > 1
        self.table_card.setVisible(batch)
        self.progress.setVisible(batch)
        self.cancel_button.setVisible(batch)
        self.progress.setMaximum(total)
        self.progress.setValue(0)
        self.table_title.setText(f"Batch results ({total} photos)")

    def _end(self, status: str) -> None:
        self.busy = False
        self.spinner.stop()
        self.status.setText(status)
        self.progress.hide()
        self.cancel_button.hide()
        for button in (self.open_button, self.folder_button, self.paste_button):
            button.setEnabled(True)
        single_error = self._total == 1 and self.results.results and self.results.results[0].error
        if single_error:
            result = self.results.results[0]
            self.banners.show_message(f"Could not classify {Path(result.path).name}.", result.error, "error")

    def _row_clicked(self, index: QModelIndex) -> None:
        if 0 <= index.row() < len(self.results.results):
            self._show_detail(self.results.results[index.row()], update_preview=True)

    def _show_detail(self, result: Classification, update_preview: bool) -> None:
        name = Path(result.path).name if result.path != "<bytes>" else "Pasted image"
        if update_preview and result.path != "<bytes>":
            image = load_preview(result.path)
            if not image.isNull():
                self.drop_zone.show_image(image, name)
        self.result_file.setText(name)
        if result.error:
            self.result_title.setText("Could not classify")
            self.bars.set_scores([])
            self.latency.setText(result.error)
            self.placement_badge.hide()
            return
        self.result_title.setText(result.top[0].label if result.top else "—")
        self.bars.set_scores([(s.label, s.probability) for s in result.top])
        self.latency.setText(f"Inference {result.latency_ms:.1f} ms · preprocessing {result.preprocess_ms:.1f} ms")
        if result.placement is not None:
            set_badge(self.placement_badge, placement_badge_kind(result.placement), result.placement.badge())
            self.placement_badge.setToolTip(
                f"Asked for: {result.placement.requested}\nActive providers: {', '.join(result.placement.active_eps)}"
            )
            self.placement_badge.show()

    # --- export -------------------------------------------------------------------------------------
    def export_csv_dialog(self) -> None:
        if not self.results.results:
            self.banners.show_message("Nothing to export yet.", "Classify some photos first.", "info")
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export results", str(Path(self.last_open_dir or Path.home()) / "classification.csv"), "CSV (*.csv)"
        )
        if path:
            try:
                self.export_csv(path)
            except OSError as exc:
                self.banners.show_message(f"Could not write {path}.", str(exc), "error")

    def export_csv(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            header = ["path"]
            for rank in range(1, TOP_K + 1):
                header += [f"label_{rank}", f"probability_{rank}"]
            header += ["latency_ms", "preprocess_ms", "placement", "error"]
            writer.writerow(header)
            for result in self.results.results:
                row: list[object] = [result.path]
                for rank in range(TOP_K):
                    if rank < len(result.top):
                        row += [result.top[rank].label, f"{result.top[rank].probability:.6f}"]
                    else:
                        row += ["", ""]
                placement = result.placement.badge() if result.placement else ""
                row += [f"{result.latency_ms:.3f}", f"{result.preprocess_ms:.3f}", placement, result.error]
                writer.writerow(row)
