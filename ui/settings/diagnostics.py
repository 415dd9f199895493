"""Settings: the diagnostics card (run the checks and save a zip for a bug report, after saying what
it will hold) and the app's folders (data, logs, cache: shown, and opened in the file manager). The
export runs in the settings host; the card asks for it with `export_requested` and says what happened
with `notice`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QCoreApplication, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFileDialog, QGridLayout, QHBoxLayout, QLabel, QMessageBox, QPushButton, QWidget

from ui.common.icons import icon
from ui.common.widgets import Card, Spinner, muted_label
from ui.settings.parts import PathLabel, section_title


def tr(text: str) -> str:
    return QCoreApplication.translate("Settings", text)


FOLDERS = (
    ("data", "Data", "conversations and your models"),
    ("logs", "Logs", "the log file and its older copies"),
    ("cache", "Cache", "compiled models"),
)
ABOUT = (
    "Checks every device as the command npu-studio doctor does (without the chat check) and saves a zip with "
    "the report, the recent logs and your settings — no conversations, no models, and your own text and "
    "folders replaced by placeholders. Attach it to a bug report."
)


class Exported(Protocol):
    """A finished export (app.hosts.settings.DiagnosticsExport)."""

    @property
    def path(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def failed_checks(self) -> int: ...
    @property
    def seconds(self) -> float: ...


def open_in_file_manager(path: str) -> bool:
    return QDesktopServices.openUrl(QUrl.fromLocalFile(path))


class DiagnosticsCard(Card):
    export_requested = Signal(str)  # where to write the zip
    notice = Signal(str, str, str)  # message, hint, severity: for the view's banners

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.places: dict[str, str] = {}
        self.contents: list[str] = []
        self.busy = False
        self.last_export = ""
        self.last_export_dir = ""
        self.body.addWidget(section_title("Diagnostics"))
        self.body.addWidget(muted_label(tr(ABOUT)))
        self.contents_label = muted_label("")
        self.contents_label.hide()
        self.body.addWidget(self.contents_label)
        row = QHBoxLayout()
        self.export_button = QPushButton(icon("export"), tr("Export diagnostics…"))
        self.export_button.setObjectName("Primary")
        self.export_button.clicked.connect(self._export_clicked)
        row.addWidget(self.export_button)
        self.spinner = Spinner(16)
        row.addWidget(self.spinner)
        row.addStretch(1)
        self.show_export_button = QPushButton(icon("folder"), tr("Show in folder"))
        self.show_export_button.setToolTip(tr("Open the folder that holds the exported zip"))
        self.show_export_button.clicked.connect(self._show_export)
        self.show_export_button.hide()
        row.addWidget(self.show_export_button)
        self.body.addLayout(row)
        self.status_label = muted_label()
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status_label.hide()
        self.body.addWidget(self.status_label)

        grid = QGridLayout()
        grid.setContentsMargins(0, 8, 0, 0)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(4)
        grid.setColumnStretch(1, 1)
        self.folder_labels: dict[str, PathLabel] = {}
        self.folder_buttons: dict[str, QPushButton] = {}
        for row_index, (key, title, what) in enumerate(FOLDERS):
            name = QLabel(title)
            name.setToolTip(what)
            grid.addWidget(name, row_index, 0, Qt.AlignmentFlag.AlignTop)
            path = PathLabel()
            self.folder_labels[key] = path
            grid.addWidget(path, row_index, 1)
            button = QPushButton(icon("folder"), tr("Open"))
            button.setToolTip(f"Open the {title.lower()} folder ({what})")
            button.clicked.connect(lambda _=False, k=key: self.open_folder(k))
            self.folder_buttons[key] = button
            grid.addWidget(button, row_index, 2, Qt.AlignmentFlag.AlignTop)
            grid.setRowMinimumHeight(row_index, button.sizeHint().height())
        self.log_file_label = PathLabel()
        self.settings_file_label = PathLabel()
        for row_index, (title, label) in enumerate(
            (("Log file", self.log_file_label), ("Settings file", self.settings_file_label)), start=len(FOLDERS)
        ):
            grid.addWidget(QLabel(title), row_index, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(label, row_index, 1, 1, 2)
        self.body.addLayout(grid)

    # --- what the app tells the card ----------------------------------------------------------------
    def set_places(self, places: dict[str, str]) -> None:
        """Folders: data, logs, cache (opened by the buttons); log_file and settings_file (shown)."""
        self.places = dict(places)
        for key, label in self.folder_labels.items():
            label.set_path(self.places.get(key, ""))
            self.folder_buttons[key].setEnabled(bool(self.places.get(key)))
        self.log_file_label.set_path(self.places.get("log_file", ""))
        self.settings_file_label.set_path(self.places.get("settings_file", ""))

    def set_contents(self, lines: list[str]) -> None:
        """What the zip holds (app.diagnostics): shown on the card and in the export dialog."""
        self.contents = list(lines)
        self.contents_label.setText("\n".join(f"• {line}" for line in lines))
        self.contents_label.setVisible(bool(lines))

    def show_progress(self, text: str) -> None:
        if self.busy:
            self.status_label.setText(text)

    def show_exported(self, result: Exported) -> None:
        self._idle()
        self.last_export = result.path
        checks = f"checks: {result.summary}" if result.summary else "no checks ran"
        name = Path(result.path).name or result.path  # the whole path is the tooltip: it is one long "word"
        text = f"Saved {name} ({checks}, {result.seconds:.1f} s)."
        if result.failed_checks:
            text += " Some checks failed: the report in the zip says which and why."
        self.status_label.setText(text)
        self.status_label.setToolTip(result.path)
        self.show_export_button.show()

    def show_failed(self) -> None:
        """The export did not finish (the view shows why)."""
        if self.busy:
            self._idle()
            self.status_label.setText(tr("The export did not finish (see above)."))

    # --- exporting ----------------------------------------------------------------------------------
    def export_to(self, target: str) -> None:
        """Run the checks and write the zip to `target` (".zip" added when missing)."""
        if self.busy:
            return
        if Path(target).suffix.lower() != ".zip":
            target += ".zip"
        self.last_export_dir = str(Path(target).parent)
        self.busy = True
        self.export_button.setEnabled(False)
        self.show_export_button.hide()
        self.spinner.start()
        self.status_label.setText(tr("Starting the checks…"))
        self.status_label.show()
        self.export_requested.emit(target)

    def _export_clicked(self) -> None:
        if self.busy or not self._confirm_export(self.contents):
            return
        target = self._choose_zip()
        if target:
            self.export_to(target)

    def _idle(self) -> None:
        self.busy = False
        self.export_button.setEnabled(True)
        self.spinner.stop()

    def _show_export(self) -> None:
        if self.last_export:
            self._open(str(Path(self.last_export).parent))

    def open_folder(self, key: str) -> bool:
        path = self.places.get(key, "")
        return bool(path) and self._open(path)

    def _open(self, path: str) -> bool:
        if open_in_file_manager(path):
            return True
        self.notice.emit(
            f"Could not open {path}.",
            tr("Open it from your file manager (the path can be selected and copied)."),
            "warning",
        )
        return False

    # --- dialogs ------------------------------------------------------------------------------------
    def _confirm_export(self, lines: list[str]) -> bool:
        """Says what the zip will hold before anything is written; the user goes on or cancels."""
        return export_box(self, lines).exec() == QMessageBox.StandardButton.Save

    def _choose_zip(self) -> str:
        folder = self.last_export_dir or str(Path.home())
        name = time.strftime("npu-studio-diagnostics-%Y%m%d-%H%M%S.zip")
        path, _ = QFileDialog.getSaveFileName(
            self, tr("Export diagnostics"), str(Path(folder) / name), "Zip archives (*.zip)"
        )
        return path


def export_box(parent: QWidget, lines: list[str]) -> QMessageBox:
    """The export dialog: what the diagnostics zip will hold, and Save… / Cancel."""
    box = QMessageBox(QMessageBox.Icon.Information, tr("Export diagnostics"),
                      tr("The diagnostics zip will hold:"), QMessageBox.StandardButton.Cancel, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setInformativeText("\n".join(f"• {line}" for line in lines))
    save = box.addButton(QMessageBox.StandardButton.Save)
    save.setText(tr("Choose where to save…"))
    box.setDefaultButton(save)
    return box
