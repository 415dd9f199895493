"""Models: the library (bundled demo models and the user's own), imports, verification, removal, and
the catalog of downloadable models (nothing is downloaded unless the user allows it and asks).

The tables' rows are ui.models_tables; the dialog for importing an image classifier is
ui.model_import_dialog."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engines.models.library import format_bytes
from engines.text import rich_text
from ui.icons import icon
from ui.model_import_dialog import ClassifierImportDialog
from ui.models_tables import CATALOG_COLUMNS, LIBRARY_COLUMNS, catalog_cells, library_cells, read_only_table
from ui.widgets import MARGIN, SPACING, BannerArea, Card, Spinner, ViewHeader, muted_label

__all__ = ["ClassifierImportDialog", "ModelsView"]


def tr(text: str) -> str:
    return QCoreApplication.translate("Models", text)


class ModelsView(QWidget):
    """The library table, the catalog table, one progress row for whatever runs, and error banners."""

    refresh_requested = Signal()
    import_requested = Signal(str, object, object)  # path, classifier options (dict | None), details (dict)
    remove_requested = Signal(str)
    verify_requested = Signal(str)
    download_requested = Signal(str)
    cancel_requested = Signal()
    allow_downloads_changed = Signal(bool)
    use_requested = Signal(str, str)  # kind (image-classifier | genai-llm), model name

    def __init__(self, downloads_allowed: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.snapshot: Any = None
        self.busy = False
        self.in_use: set[str] = set()  # the models Classify and Chat use now
        self.last_dir = ""
        # Seams for tests: how the view asks for paths and confirmations (dialogs by default).
        self.confirm: Callable[[str, str], bool] = self._confirm_dialog
        self.choose_folder: Callable[[], str] = self._choose_folder_dialog
        self.choose_classifier: Callable[[], tuple[str, dict[str, Any], dict[str, Any]] | None] = (
            self._classifier_dialog
        )

        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader(
            tr("Models"),
            tr("Bundled demo models and your own: size, SHA-256, the devices each suits, and whether it fits."),
        )
        self.spinner = Spinner()
        self.header.controls.addWidget(self.spinner)
        self.refresh_button = QPushButton(icon("refresh"), tr("Refresh"))
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.import_folder_button = QPushButton(icon("folder"), tr("Import folder…"))
        self.import_folder_button.setToolTip(tr("An onnxruntime-genai chat model folder (with genai_config.json)"))
        self.import_folder_button.clicked.connect(self._import_folder)
        self.import_classifier_button = QPushButton(icon("open"), tr("Import classifier…"))
        self.import_classifier_button.setToolTip(tr("An .onnx image classifier with its labels file"))
        self.import_classifier_button.clicked.connect(self._import_classifier)
        for button in (self.refresh_button, self.import_folder_button, self.import_classifier_button):
            self.header.controls.addWidget(button)
        outer.addWidget(self.header)
        self.banners = BannerArea()
        outer.addWidget(self.banners)

        # progress of the running import / download / verification
        self.progress_row = QWidget()
        progress = QHBoxLayout(self.progress_row)
        progress.setContentsMargins(0, 0, 0, 0)
        self.progress_label = muted_label(word_wrap=False)
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(True)
        self.cancel_button = QPushButton(icon("stop"), tr("Cancel"))
        self.cancel_button.clicked.connect(self.cancel_requested)
        progress.addWidget(self.progress_label)
        progress.addWidget(self.progress_bar, 1)
        progress.addWidget(self.cancel_button)
        self.progress_row.hide()
        outer.addWidget(self.progress_row)

        library = Card()
        title = QLabel(tr("Library"))
        title.setObjectName("SectionTitle")
        library.body.addWidget(title)
        self.table = read_only_table(LIBRARY_COLUMNS)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        library.body.addWidget(self.table, 1)
        actions = QHBoxLayout()
        self.details = muted_label()
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        actions.addWidget(self.details, 1)
        self.use_button = QPushButton(icon("check"), tr("Use in Classify"))
        self.use_button.setObjectName("Primary")
        self.use_button.setToolTip(tr("Make the selected model the one its view uses (remembered)"))
        self.use_button.clicked.connect(self._use)
        actions.addWidget(self.use_button, 0, Qt.AlignmentFlag.AlignTop)
        self.verify_button = QPushButton(icon("check"), tr("Verify"))
        self.verify_button.setToolTip(tr("Re-hash every file and compare with the manifest"))
        self.verify_button.clicked.connect(self._verify)
        self.remove_button = QPushButton(icon("delete"), tr("Remove"))
        self.remove_button.clicked.connect(self._remove)
        actions.addWidget(self.verify_button, 0, Qt.AlignmentFlag.AlignTop)
        actions.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        library.body.addLayout(actions)
        self.places = muted_label()
        library.body.addWidget(self.places)
        outer.addWidget(library, 3)

        catalog = Card()
        head = QHBoxLayout()
        title = QLabel(tr("Catalog"))
        title.setObjectName("SectionTitle")
        head.addWidget(title)
        head.addStretch(1)
        self.allow_box = QCheckBox(tr("Allow downloads"))
        self.allow_box.setToolTip(tr("Off by default: NPU Studio works fully offline and downloads only when you ask."))
        self.allow_box.setChecked(downloads_allowed)
        self.allow_box.toggled.connect(self._allow_toggled)
        head.addWidget(self.allow_box)
        catalog.body.addLayout(head)
        self.offline_note = muted_label(
            tr(
                "Downloads are off: NPU Studio is working fully offline. Turn on “Allow downloads” to fetch a model "
                "from the Hugging Face Hub."
            )
        )
        catalog.body.addWidget(self.offline_note)
        self.catalog_table = read_only_table(CATALOG_COLUMNS)
        self.catalog_table.itemSelectionChanged.connect(self._update_buttons)
        catalog.body.addWidget(self.catalog_table, 1)
        row = QHBoxLayout()
        self.catalog_details = muted_label()
        self.catalog_details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.catalog_details, 1)
        self.download_button = QPushButton(icon("export"), tr("Download"))
        self.download_button.setObjectName("Primary")
        self.download_button.clicked.connect(self._download)
        row.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignTop)
        catalog.body.addLayout(row)
        outer.addWidget(catalog, 2)
        self._update_buttons()

    # --- state from the host -------------------------------------------------------------------------
    def show_snapshot(self, snapshot: Any) -> None:
        selected = self.selected_name()
        self.snapshot = snapshot
        self.table.setRowCount(0)
        for entry in snapshot.entries:
            row = self.table.rowCount()
            self.table.insertRow(row)
            cells = library_cells(entry, snapshot.fits.get(str(entry.folder)))
            for column, cell in enumerate(cells):
                self.table.setItem(row, column, cell)
            if entry.name == selected:
                self.table.selectRow(row)
        self.places.setText(f"Bundled: {snapshot.bundled_dir} (read-only) · Yours: {snapshot.user_dir}")
        self.catalog_table.setRowCount(0)
        installed = {e.name for e in snapshot.entries}
        for entry in snapshot.catalog:
            row = self.catalog_table.rowCount()
            self.catalog_table.insertRow(row)
            cells = catalog_cells(entry, installed, snapshot.partial_bytes.get(entry.id, 0))
            for column, cell in enumerate(cells):
                self.catalog_table.setItem(row, column, cell)
        if snapshot.catalog_error:
            self.banners.show_message(snapshot.catalog_error, severity="warning")
        self._selection_changed()

    def set_busy(self, busy: bool, text: str = "", cancellable: bool = True) -> None:
        self.busy = busy
        if busy:
            self.spinner.start()
            self.progress_label.setText(text)
            self.progress_bar.setRange(0, 0)
            self.progress_bar.setFormat("")
            self.cancel_button.setVisible(cancellable)
            self.progress_row.show()
        else:
            self.spinner.stop()
            self.progress_row.hide()
        self._update_buttons()

    def show_progress(self, what: str, done: int, total: int) -> None:
        if not self.busy:
            self.set_busy(True, what)
        self.progress_label.setText(what)
        if total > 0:
            self.progress_bar.setRange(0, 1000)
            self.progress_bar.setValue(min(1000, int(1000 * done / total)))
            self.progress_bar.setFormat(f"{format_bytes(done)} of {format_bytes(total)}")

    def show_error(self, error: object) -> None:
        self.set_busy(False)
        self.banners.show_error(error)

    def show_imported(self, entry: Any) -> None:
        self.set_busy(False)
        self.banners.show_message(
            f"Imported {entry.display_name} ({format_bytes(entry.size_bytes)}).",
            f"SHA-256 {entry.sha256}. Devices: {', '.join(entry.devices)}.",
            severity="info",
        )

    def show_downloaded(self, entry: Any) -> None:
        self.set_busy(False)
        self.banners.show_message(
            f"Downloaded {entry.display_name} ({format_bytes(entry.size_bytes)}).",
            f"Verified and added to your library as {entry.name}.",
            severity="info",
        )

    def show_removed(self, name: str) -> None:
        self.set_busy(False)
        self.banners.show_message(f"Removed {name} from your library.", severity="info")

    def show_cancelled(self, text: str) -> None:
        self.set_busy(False)
        self.banners.show_message(text, severity="warning")

    def show_verified(self, report: Any) -> None:
        self.set_busy(False)
        if report.ok:
            self.banners.show_message(
                f"{report.name} is intact: {report.files_checked} files, {format_bytes(report.bytes_checked)} "
                "re-hashed, all match the manifest.",
                severity="info",
            )
        else:
            shown = "; ".join(report.problems[:4]) + (" …" if len(report.problems) > 4 else "")
            self.banners.show_message(
                f"{report.name} changed since it was added: {shown}",
                tr("Re-import or re-download the model."),
                severity="error",
            )

    def set_downloads_allowed(self, allowed: bool) -> None:
        self.allow_box.blockSignals(True)
        self.allow_box.setChecked(allowed)
        self.allow_box.blockSignals(False)
        self._update_buttons()

    # --- selection ---------------------------------------------------------------------------------
    def selected_name(self) -> str:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return ""
        item = self.table.item(rows[0].row(), 0)
        return str(item.data(Qt.ItemDataRole.UserRole)) if item is not None else ""

    def selected_entry(self) -> Any:
        name = self.selected_name()
        if not name or self.snapshot is None:
            return None
        return next((e for e in self.snapshot.entries if e.name == name), None)

    def selected_catalog_id(self) -> str:
        rows = self.catalog_table.selectionModel().selectedRows() if self.catalog_table.selectionModel() else []
        if not rows:
            return ""
        item = self.catalog_table.item(rows[0].row(), 0)
        return str(item.data(Qt.ItemDataRole.UserRole)) if item is not None else ""

    def _selection_changed(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            self.details.setText(tr("Select a model to see where it lives and whether it fits in memory."))
        else:
            fit = self.snapshot.fits.get(str(entry.folder)) if self.snapshot else None
            lines = [f"<b>{rich_text(entry.display_name)}</b> — {rich_text(str(entry.folder))}"]
            if entry.source:
                lines.append(f"Source: {rich_text(entry.source)}")
            if fit is not None:
                lines.append(rich_text(fit.message()))
            if entry.problem:
                lines.append(f"<b>Problem:</b> {rich_text(entry.problem)}")
            self.details.setText("<br>".join(lines))
        self._update_buttons()

    def _update_buttons(self) -> None:
        entry = self.selected_entry()
        idle = not self.busy
        self.verify_button.setEnabled(idle and entry is not None)
        chat = entry is not None and entry.kind == "genai-llm"
        self.use_button.setText("Use in Chat" if chat else "Use in Classify")
        self.use_button.setEnabled(entry is not None and entry.usable and entry.name not in self.in_use)
        if entry is not None and entry.name in self.in_use:
            self.use_button.setToolTip(tr("This model is already in use"))
        else:
            self.use_button.setToolTip(tr("Make the selected model the one its view uses (remembered)"))
        self.remove_button.setEnabled(idle and entry is not None and not entry.bundled)
        self.remove_button.setToolTip(
            "Bundled demo models are read-only" if entry is not None and entry.bundled else "Delete from your library"
        )
        for button in (self.import_folder_button, self.import_classifier_button, self.refresh_button):
            button.setEnabled(idle)
        allowed = self.allow_box.isChecked()
        self.offline_note.setVisible(not allowed)
        catalog_id = self.selected_catalog_id()
        self.download_button.setEnabled(idle and allowed and bool(catalog_id))
        entry_info = None
        if self.snapshot is not None and catalog_id:
            entry_info = next((e for e in self.snapshot.catalog if e.id == catalog_id), None)
        if entry_info is not None:
            self.catalog_details.setText(
                f"{rich_text(entry_info.publisher)} · {rich_text(entry_info.parameters)} parameters · "
                f"{rich_text(entry_info.notes)}"
            )
        else:
            self.catalog_details.setText(tr("Select a model to download it into your library (verified, resumable)."))

    def set_in_use(self, names: set[str]) -> None:
        self.in_use = set(names)
        self._update_buttons()

    # --- actions -----------------------------------------------------------------------------------
    def _use(self) -> None:
        entry = self.selected_entry()
        if entry is not None and entry.usable:
            self.use_requested.emit(entry.kind, entry.name)

    def _allow_toggled(self, allowed: bool) -> None:
        self._update_buttons()
        self.allow_downloads_changed.emit(allowed)

    def _import_folder(self) -> None:
        folder = self.choose_folder()
        if folder:
            self.last_dir = str(Path(folder).parent)
            self.set_busy(True, f"Importing {Path(folder).name}…")
            self.import_requested.emit(folder, None, {})

    def _import_classifier(self) -> None:
        chosen = self.choose_classifier()
        if chosen is not None:
            path, options, details = chosen
            self.last_dir = str(Path(path).parent)
            self.set_busy(True, f"Importing {Path(path).name}…")
            self.import_requested.emit(path, options, details)

    def _verify(self) -> None:
        name = self.selected_name()
        if name:
            self.set_busy(True, f"Re-hashing {name}…", cancellable=False)
            self.verify_requested.emit(name)

    def _remove(self) -> None:
        entry = self.selected_entry()
        if entry is None or entry.bundled:
            return
        if self.confirm(
            f"Remove {entry.display_name}?",
            f"This deletes {entry.folder} ({format_bytes(entry.size_bytes)}) from your library.",
        ):
            self.set_busy(True, f"Removing {entry.name}…", cancellable=False)
            self.remove_requested.emit(entry.name)

    def _download(self) -> None:
        catalog_id = self.selected_catalog_id()
        if catalog_id and self.allow_box.isChecked():
            self.set_busy(True, "Starting the download…")
            self.download_requested.emit(catalog_id)

    # --- default dialogs ---------------------------------------------------------------------------
    def _confirm_dialog(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(self, title, text)
        return answer == QMessageBox.StandardButton.Yes

    def _choose_folder_dialog(self) -> str:
        return QFileDialog.getExistingDirectory(self, tr("Model folder (with genai_config.json)"), self.last_dir)

    def _classifier_dialog(self) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        path, _ = QFileDialog.getOpenFileName(self, tr("Image classifier"), self.last_dir, "ONNX models (*.onnx)")
        if not path:
            return None
        dialog = ClassifierImportDialog(path, self)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        options, details = dialog.fields()
        return path, options, details
