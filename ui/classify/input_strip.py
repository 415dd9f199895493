"""The input strip: Open photos, Classify a folder, Paste (with their dialogs and the clipboard); and,
while a run goes, the spinner, the status, the batch's progress and Cancel."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QImage, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog, QHBoxLayout, QProgressBar, QPushButton, QWidget

from engines import IMAGE_SUFFIXES
from ui.classify.bars import ElidedLabel
from ui.common.icons import icon
from ui.common.theme import colors
from ui.common.widgets import Spinner


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


class InputStrip(QWidget):
    """What the user picks comes out as `paths_chosen` (files and folders) or `image_chosen` (pasted
    image data); an empty clipboard as `nothing_to_paste`."""

    paths_chosen = Signal(list)  # list[str]
    image_chosen = Signal(QImage, str)  # the image, its display name
    nothing_to_paste = Signal()
    cancel_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.last_open_dir = ""
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.open_button = QPushButton(icon("open", colors().accent_text), tr("Open photos…"))
        self.open_button.setObjectName("Primary")
        self.open_button.setShortcut(QKeySequence.StandardKey.Open)
        self.open_button.setToolTip(tr("Open photos (Ctrl+O)"))
        self.folder_button = QPushButton(icon("folder"), tr("Classify a folder…"))
        self.paste_button = QPushButton(icon("paste"), tr("Paste"))
        self.paste_button.setToolTip(tr("Classify the image on the clipboard (Ctrl+V)"))
        self.paste_button.setShortcut(QKeySequence.StandardKey.Paste)
        self.cancel_button = QPushButton(icon("stop"), tr("Cancel"))
        self.cancel_button.setToolTip(tr("Stop the batch (Esc)"))
        self.cancel_button.hide()
        for button, action, name in (
            (self.open_button, self.open_files, tr("Open photos")),
            (self.folder_button, self.open_folder, tr("Classify a folder")),
            (self.paste_button, self.paste, tr("Paste an image")),
        ):
            button.clicked.connect(action)
            button.setAccessibleName(name)
            row.addWidget(button)
        # The status takes the free room, at its right end; a long one ("Loading … on the NPU…") is elided
        # (whole in its tooltip) rather than pushing the buttons out.
        self.status = ElidedLabel()
        self.status.setProperty("muted", True)
        self.status.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.status, 1)
        self.spinner = Spinner()
        row.addWidget(self.spinner)
        self.progress = QProgressBar()
        self.progress.setFixedWidth(180)
        self.progress.setTextVisible(False)
        self.progress.setAccessibleName(tr("Batch progress"))
        self.progress.hide()
        row.addWidget(self.progress)
        self.cancel_button.clicked.connect(self.cancel_clicked)
        self.cancel_button.setAccessibleName(tr("Cancel the batch"))
        row.addWidget(self.cancel_button)

    def open_files(self) -> None:
        suffixes = " ".join(f"*{s}" for s in sorted(IMAGE_SUFFIXES))
        filters = tr("Images") + f" ({suffixes});;" + tr("All files (*)")
        paths, _ = QFileDialog.getOpenFileNames(self, tr("Open photos"), self.last_open_dir, filters)
        if paths:
            self.last_open_dir = str(Path(paths[0]).parent)
            self.paths_chosen.emit(paths)

    def open_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, tr("Classify every photo in a folder"), self.last_open_dir)
        if folder:
            self.last_open_dir = folder
            self.paths_chosen.emit([folder])

    def paste(self) -> None:
        """The clipboard's image, or the image files it names."""
        mime = QApplication.clipboard().mimeData()
        if mime is not None and mime.hasImage():
            image = QImage(mime.imageData())
            if not image.isNull():
                self.image_chosen.emit(image, tr("Pasted image"))
                return
        local = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()] if mime is not None and mime.hasUrls() else []
        if local:
            self.paths_chosen.emit(local)
        else:
            self.nothing_to_paste.emit()

    def set_status(self, text: str) -> None:
        self.status.set_full_text(text)

    def status_text(self) -> str:
        return self.status.full_text()

    def start(self, total: int, status: str) -> None:
        """A run of `total` photos begins: the inputs wait, a batch shows its progress and Cancel."""
        for button in (self.open_button, self.folder_button, self.paste_button):
            button.setEnabled(False)
        batch = total > 1
        self.progress.setVisible(batch)
        self.cancel_button.setVisible(batch)
        self.progress.setMaximum(total)
        self.progress.setValue(0)
        self.spinner.start()
        self.status.set_full_text(status)

    def end(self, status: str) -> None:
        self.spinner.stop()
        self.status.set_full_text(status)
        self.progress.hide()
        self.cancel_button.hide()
        for button in (self.open_button, self.folder_button, self.paste_button):
            button.setEnabled(True)
