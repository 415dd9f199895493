"""Settings: the diagnostics card (run the checks and save a zip for a bug report) and the app's
folders (data, logs, cache: shown, and opened in the file manager).

A mixin of SettingsView (ui.settings_view): it works on the view's banners, seams and signals,
declared below."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from PySide6.QtCore import QCoreApplication, Qt, QUrl
from PySide6.QtWidgets import QFileDialog, QGridLayout, QHBoxLayout, QLabel, QPushButton, QWidget

from app.qtcompat import emit
from engines.text import rich_text
from ui.icons import icon
from ui.settings_parts import PathLabel, section_title
from ui.widgets import BannerArea, Card, Spinner, muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Settings", text)


FOLDERS = (
    ("data", "Data", "conversations and your models"),
    ("logs", "Logs", "the log file and its older copies"),
    ("cache", "Cache", "compiled models"),
)


class DiagnosticsSection:
    banners: BannerArea
    places: dict[str, str]
    diagnostics_busy: bool
    last_export: str
    last_export_dir: str
    choose_zip: Callable[[], str]
    open_url: Callable[[QUrl], bool]
    diagnostics_requested: Any  # the view's signal (a Signal, bound on the view)

    def _diagnostics(self) -> Card:
        card = Card()
        card.body.addWidget(section_title("Diagnostics"))
        card.body.addWidget(
            muted_label(
                tr(
                    "Checks every device as `npu-studio doctor` does (without the chat check) and saves a zip with "
                    "the report, the recent logs and your settings — no conversations, no models. Attach it to a "
                    "bug report."
                )
            )
        )
        row = QHBoxLayout()
        self.export_button = QPushButton(icon("export"), tr("Export diagnostics…"))
        self.export_button.setObjectName("Primary")
        self.export_button.clicked.connect(self._export_clicked)
        row.addWidget(self.export_button)
        self.diagnostics_spinner = Spinner(16)
        row.addWidget(self.diagnostics_spinner)
        row.addStretch(1)
        self.show_export_button = QPushButton(icon("folder"), tr("Show in folder"))
        self.show_export_button.setToolTip(tr("Open the folder that holds the exported zip"))
        self.show_export_button.clicked.connect(self._show_export)
        self.show_export_button.hide()
        row.addWidget(self.show_export_button)
        card.body.addLayout(row)
        self.diagnostics_label = muted_label()
        self.diagnostics_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.diagnostics_label.hide()
        card.body.addWidget(self.diagnostics_label)

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
            grid.addWidget(name, row_index, 0)
            path = PathLabel()
            self.folder_labels[key] = path
            grid.addWidget(path, row_index, 1)
            button = QPushButton(icon("folder"), tr("Open"))
            button.setToolTip(f"Open the {title.lower()} folder ({what})")
            button.clicked.connect(lambda _=False, k=key: self.open_folder(k))
            self.folder_buttons[key] = button
            grid.addWidget(button, row_index, 2)
            grid.setRowMinimumHeight(row_index, button.sizeHint().height())
        self.log_file_label = PathLabel()
        self.settings_file_label = PathLabel()
        for row_index, (title, label) in enumerate(
            (("Log file", self.log_file_label), ("Settings file", self.settings_file_label)), start=len(FOLDERS)
        ):
            grid.addWidget(QLabel(title), row_index, 0)
            grid.addWidget(label, row_index, 1, 1, 2)
            grid.setRowMinimumHeight(row_index, self.export_button.sizeHint().height())
        card.body.addLayout(grid)
        return card

    def set_places(self, places: dict[str, str]) -> None:
        """Folders: data, logs, cache (opened by the buttons); log_file and settings_file (shown)."""
        self.places = dict(places)
        for key, label in self.folder_labels.items():
            label.set_path(self.places.get(key, ""))
            self.folder_buttons[key].setEnabled(bool(self.places.get(key)))
        self.log_file_label.set_path(self.places.get("log_file", ""))
        self.settings_file_label.set_path(self.places.get("settings_file", ""))

    def _export_clicked(self) -> None:
        if self.diagnostics_busy:
            return
        target = self.choose_zip()
        if not target:
            return
        if Path(target).suffix.lower() != ".zip":
            target += ".zip"
        self.last_export_dir = str(Path(target).parent)
        self.diagnostics_busy = True
        self.export_button.setEnabled(False)
        self.show_export_button.hide()
        self.diagnostics_spinner.start()
        self.diagnostics_label.setText(tr("Starting the checks…"))
        self.diagnostics_label.show()
        emit(self.diagnostics_requested, target)

    def show_diagnostics_progress(self, text: str) -> None:
        if self.diagnostics_busy:
            self.diagnostics_label.setText(text)

    def show_diagnostics_exported(self, result: Any) -> None:
        self._diagnostics_idle()
        self.last_export = result.path
        checks = f"checks: {result.summary}" if result.summary else "no checks ran"
        name = Path(result.path).name or result.path  # the whole path is the tooltip: it is one long "word"
        text = f"Saved <b>{rich_text(name)}</b> ({rich_text(checks)}, {result.seconds:.1f} s)."
        if result.failed_checks:
            text += " Some checks failed: the report in the zip says which and why."
        self.diagnostics_label.setText(text)
        self.diagnostics_label.setToolTip(result.path)
        self.show_export_button.show()

    def _diagnostics_idle(self) -> None:
        self.diagnostics_busy = False
        self.export_button.setEnabled(True)
        self.diagnostics_spinner.stop()

    def _show_export(self) -> None:
        if self.last_export:
            self._open(str(Path(self.last_export).parent))

    def open_folder(self, key: str) -> bool:
        path = self.places.get(key, "")
        return bool(path) and self._open(path)

    def _open(self, path: str) -> bool:
        if self.open_url(QUrl.fromLocalFile(path)):
            return True
        self.banners.show_message(
            f"Could not open {path}.",
            tr("Open it from your file manager (the path can be selected and copied)."),
            severity="warning",
        )
        return False

    def _zip_dialog(self) -> str:
        folder = self.last_export_dir or str(Path.home())
        name = time.strftime("npu-studio-diagnostics-%Y%m%d-%H%M%S.zip")
        path, _ = QFileDialog.getSaveFileName(
            cast(QWidget, self), tr("Export diagnostics"), str(Path(folder) / name), "Zip archives (*.zip)"
        )
        return path
