"""Classify: what the user asks for: photos from the file dialog, a folder, the clipboard, a sample or
a drop (classify_paths / classify_image), cancelling a batch, and exporting the results as CSV.

A mixin of ClassifyView (ui.classify_view): it works on the view's run state and widgets, declared
below."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from PySide6.QtCore import QBuffer, QByteArray, QCoreApplication, QIODevice
from PySide6.QtGui import QImage, QImageWriter
from PySide6.QtWidgets import QApplication, QFileDialog, QWidget

from app.qtcompat import emit
from ui.classify_parts import IMAGE_SUFFIXES, DropZone, ResultsModel, expand_paths, load_preview
from ui.classify_result import write_results_csv
from ui.widgets import BannerArea


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


class ClassifyRequests:
    busy: bool
    last_open_dir: str
    banners: BannerArea
    drop_zone: DropZone
    results: ResultsModel
    _preview_path: str
    classify_requested: Any  # the view's signals (a Signal, bound on the view)
    classify_image_requested: Any
    cancel_requested: Any
    _begin: Callable[[int], None]
    _set_status: Callable[[str], None]

    def open_files(self) -> None:
        filters = tr("Images") + " (" + " ".join(f"*{s}" for s in sorted(IMAGE_SUFFIXES)) + ");;" + tr("All files (*)")
        paths, _ = QFileDialog.getOpenFileNames(cast(QWidget, self), tr("Open photos"), self.last_open_dir, filters)
        if paths:
            self.last_open_dir = str(Path(paths[0]).parent)
            self.classify_paths(paths)

    def open_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(
            cast(QWidget, self), tr("Classify every photo in a folder"), self.last_open_dir
        )
        if folder:
            self.last_open_dir = folder
            self.classify_paths([folder])

    def paste(self) -> None:
        mime = QApplication.clipboard().mimeData()
        if mime is not None and mime.hasImage():
            image = QImage(mime.imageData())
            if not image.isNull():
                self.classify_image(image, tr("Pasted image"))
                return
        if mime is not None and mime.hasUrls():
            local = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
            if local:
                self.classify_paths(local)
                return
        self.banners.show_message(
            tr("The clipboard holds no image."), tr("Copy a photo (or an image file) first, then paste."), "warning"
        )

    def classify_image(self, image: QImage, name: str) -> None:
        if self.busy:
            return
        buffer = QBuffer()
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        if not QImageWriter(buffer, QByteArray(b"PNG")).write(image):
            self.banners.show_message(
                tr("The pasted image could not be read."), tr("Copy it again, or save it as a file.")
            )
            return
        data = bytes(buffer.data().data())
        self._begin(1)
        self.drop_zone.show_image(image, name)
        emit(self.classify_image_requested, data, name)

    def classify_paths(self, paths: Sequence[str]) -> None:
        """Classify files and folders (the entry point for open, drop, samples and tests)."""
        if self.busy:
            self.banners.show_message(
                tr("Still classifying."), tr("Wait for the current run to finish or cancel it."), "info"
            )
            return
        files = expand_paths(paths)
        if not files:
            self.banners.show_message(
                tr("No photos to classify."),
                tr("Choose image files (JPEG, PNG, BMP, GIF, WebP, TIFF) or a folder that contains some."),
                "warning",
            )
            return
        self._begin(len(files))
        self._preview_path = files[0]
        preview = load_preview(files[0])
        caption = Path(files[0]).name if len(files) == 1 else tr("{n} photos").format(n=len(files))
        if not preview.isNull():
            self.drop_zone.show_image(preview, caption)
        else:
            self.drop_zone.show_placeholder()
            self.drop_zone.samples.hide()
            self.drop_zone.caption.setText(Path(files[0]).name)
        emit(self.classify_requested, files)

    def cancel(self) -> None:
        if self.busy:
            self._set_status(tr("Cancelling…"))
            emit(self.cancel_requested)

    def export_csv_dialog(self) -> None:
        if not self.results.results:
            self.banners.show_message(tr("Nothing to export yet."), tr("Classify some photos first."), "info")
            return
        path, _ = QFileDialog.getSaveFileName(
            cast(QWidget, self),
            tr("Export results"),
            str(Path(self.last_open_dir or Path.home()) / "classification.csv"),
            tr("CSV (*.csv)"),
        )
        if path:
            try:
                self.export_csv(path)
            except OSError as exc:
                self.banners.show_message(tr("Could not write {path}.").format(path=path), str(exc), "error")

    def export_csv(self, path: str | os.PathLike[str]) -> None:
        """Every photo with its own numbers: top-k, inference, decode + preprocessing, total, placement."""
        write_results_csv(self.results.results, path)
