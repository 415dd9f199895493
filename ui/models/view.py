"""Models: the library (bundled demo models and the user's own; its rows ui.models.tables, its state
ui.models.library_state), the models other tools keep here ("On this machine": ui.models.found), imports
(ui.models.import_dialog), verification, removal, and the catalog of downloadable models (nothing is
downloaded unless the user allows it and asks)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engines import ModelEntry, ScanReport, VerifyReport, format_bytes
from ui.common.icons import icon
from ui.common.model_picker import precision_words
from ui.common.plain import ask, plain_label, plain_text
from ui.common.widgets import MARGIN, SPACING, BannerArea, Card, Spinner, ViewHeader, muted_label
from ui.models.found import FoundModelsPanel, npu_note
from ui.models.import_dialog import ClassifierChoice, choose_classifier
from ui.models.library_state import KIND_CLASSIFIER, USE_TIP, VIEW_OF_KIND, Snapshot, use_blocker
from ui.models.tables import (
    CATALOG_COLUMNS,
    LIBRARY_COLUMNS,
    catalog_cells,
    library_cells,
    read_only_table,
)

__all__ = ["ModelsView"]


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
    open_view_requested = Signal(str)  # "classify" | "chat": show the view that now uses a model
    scan_requested = Signal()
    add_found_requested = Signal(str, str, bool, str)  # folder, name ("" for the default), copy, tool
    folders_changed = Signal(object)  # list[str]: the folders the scan also looks in

    def __init__(self, downloads_allowed: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.snapshot: Snapshot | None = None
        self.busy = False
        self.in_use: set[str] = set()  # the models Classify and Chat use now
        self.asked_use: tuple[str, str] | None = None  # (kind, name) the Use button asked for, until it holds
        self.last_dir = ""

        # Below its usable minimum (tables with a few rows each) the view scrolls instead of squashing them.
        frame = QVBoxLayout(self)
        frame.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        content = QWidget()
        scroll.setWidget(content)
        frame.addWidget(scroll)
        outer = QVBoxLayout(content)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader(
            tr("Models"),
            tr("Your library, and the models other tools keep on this machine: size, SHA-256, the devices each "
               "suits, and whether it fits or runs here."),
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
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        library.body.addWidget(self.tabs, 1)
        page = QWidget()
        page_layout = QVBoxLayout(page)
        page_layout.setContentsMargins(0, SPACING // 2, 0, 0)
        self.table = read_only_table(LIBRARY_COLUMNS, rows=2)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        page_layout.addWidget(self.table, 1)
        actions = QHBoxLayout()
        self.details = plain_label(muted=True, selectable=True)
        actions.addWidget(self.details, 1)
        self.use_note = plain_label(muted=True, word_wrap=False)  # why Use is off (a disabled button says nothing)
        self.use_note.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        actions.addWidget(self.use_note, 0, Qt.AlignmentFlag.AlignTop)
        self.use_button = QPushButton(icon("check"), tr("Use in Classify"))
        self.use_button.setObjectName("Primary")
        self.use_button.setToolTip(tr(USE_TIP))
        self.use_button.clicked.connect(self._use)
        actions.addWidget(self.use_button, 0, Qt.AlignmentFlag.AlignTop)
        self.verify_button = QPushButton(icon("check"), tr("Verify"))
        self.verify_button.setToolTip(tr("Re-hash every file and compare with the manifest"))
        self.verify_button.clicked.connect(self._verify)
        self.remove_button = QPushButton(icon("delete"), tr("Remove"))
        self.remove_button.clicked.connect(self._remove)
        actions.addWidget(self.verify_button, 0, Qt.AlignmentFlag.AlignTop)
        actions.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        page_layout.addLayout(actions)
        self.places = plain_label(muted=True, selectable=True)
        page_layout.addWidget(self.places)
        self.tabs.addTab(page, tr("Library"))
        self.found_panel = FoundModelsPanel()
        self.found_panel.scan_requested.connect(self._scan)
        self.found_panel.add_requested.connect(self._add_found)
        self.found_panel.folders_changed.connect(self._folders_changed)
        self.tabs.addTab(self.found_panel, tr("On this machine"))
        self.tabs.currentChanged.connect(self._tab_changed)
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
        self.catalog_table = read_only_table(CATALOG_COLUMNS, rows=2)
        self.catalog_table.itemSelectionChanged.connect(self._update_buttons)
        catalog.body.addWidget(self.catalog_table, 1)
        self.npu_note = plain_label(muted=True, selectable=True)  # which found models run on this machine's NPU
        self.npu_note.hide()
        catalog.body.addWidget(self.npu_note)
        row = QHBoxLayout()
        self.catalog_details = plain_label(muted=True, selectable=True)
        row.addWidget(self.catalog_details, 1)
        self.download_button = QPushButton(icon("export"), tr("Download"))
        self.download_button.setObjectName("Primary")
        self.download_button.clicked.connect(self._download)
        row.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignTop)
        catalog.body.addLayout(row)
        outer.addWidget(catalog, 2)
        self._update_buttons()

    # --- state from the host -------------------------------------------------------------------------
    def show_snapshot(self, snapshot: Snapshot) -> None:
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
        self.places.setText(plain_text(f"Bundled: {snapshot.bundled_dir} (read-only) · Yours: {snapshot.user_dir}"))
        self.catalog_table.setRowCount(0)
        installed = {e.name for e in snapshot.entries}
        for offer in snapshot.catalog:
            row = self.catalog_table.rowCount()
            self.catalog_table.insertRow(row)
            cells = catalog_cells(offer, installed, snapshot.partial_bytes.get(offer.id, 0))
            for column, cell in enumerate(cells):
                self.catalog_table.setItem(row, column, cell)
        if snapshot.catalog_error:
            self.banners.show_message(snapshot.catalog_error, severity="warning", cause="catalog")
        else:
            self.banners.clear("catalog")
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
        self.found_panel.set_idle(not busy)
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

    def show_imported(self, entry: ModelEntry) -> None:
        self.set_busy(False)
        if entry.reference:
            self.banners.show_message(
                f"Added {entry.display_name} ({format_bytes(entry.size_bytes)}) by reference: nothing was copied.",
                f"Its {len(entry.files)} files stay in {entry.reference} and were hashed; if they change, NPU Studio "
                "says so and does not load them.",
                severity="info",
            )
            return
        self.banners.show_message(
            f"Imported {entry.display_name} ({format_bytes(entry.size_bytes)}).",
            f"SHA-256 {entry.sha256}. Devices: {', '.join(entry.devices)}.",
            severity="info",
        )

    def show_downloaded(self, entry: ModelEntry) -> None:
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

    def show_verified(self, report: VerifyReport) -> None:
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

    def show_found(self, report: ScanReport) -> None:
        """The models other tools keep here (engines.models.scan.ScanReport)."""
        self.set_busy(False)
        self.found_panel.show_report(report)
        self.tabs.setTabText(1, f"On this machine ({len(report.models)})")
        self.npu_note.setText(npu_note(report))
        self.npu_note.setVisible(True)

    def set_model_folders(self, folders: list[str]) -> None:
        self.found_panel.set_folders(folders)

    # --- selection ---------------------------------------------------------------------------------
    def selected_name(self) -> str:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return ""
        item = self.table.item(rows[0].row(), 0)
        return str(item.data(Qt.ItemDataRole.UserRole)) if item is not None else ""

    def selected_entry(self) -> ModelEntry | None:
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
            lines = [f"{entry.display_name} — {entry.folder}"]
            if entry.precision:
                lines.append(f"Precision: {precision_words(entry.precision)} ({entry.precision})")
            if entry.source:
                lines.append(f"Source: {entry.source}")
            if fit is not None:
                lines.append(fit.message())
            if entry.problem:
                lines.append(f"Problem: {entry.problem}")
            self.details.setText(plain_text("\n".join(lines)))
        self._update_buttons()

    def _update_buttons(self) -> None:
        entry = self.selected_entry()
        idle = not self.busy
        self.verify_button.setEnabled(idle and entry is not None)
        chat = entry is not None and entry.kind == "genai-llm"
        self.use_button.setText(tr("Use in Chat") if chat else tr("Use in Classify"))
        blocker = use_blocker(entry, self.in_use)
        self.use_button.setEnabled(not blocker)
        self.use_button.setToolTip(blocker or tr(USE_TIP))
        shown = blocker if entry is not None else ""  # with nothing selected the details say what to do
        self.use_note.setText(plain_text(shown, one_line=True))
        self.use_note.setVisible(bool(shown))
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
                plain_text(f"{entry_info.publisher} · {entry_info.parameters} parameters · {entry_info.notes}")
            )
        else:
            self.catalog_details.setText(tr("Select a model to download it into your library (verified, resumable)."))

    def set_in_use(self, names: set[str]) -> None:
        """The models Classify and Chat use now; a model the Use button asked for is confirmed here."""
        self.in_use = set(names)
        if self.asked_use is not None and self.asked_use[1] in self.in_use:
            self._confirm_use(*self.asked_use)
            self.asked_use = None
        self._update_buttons()

    def _confirm_use(self, kind: str, name: str) -> None:
        view = VIEW_OF_KIND.get(kind, "")
        entry = next((e for e in self.snapshot.entries if e.name == name), None) if self.snapshot else None
        shown = entry.display_name if entry is not None else name
        hint = (
            tr("It loads now on the device chosen for Classify; your next photo runs on it.")
            if kind == KIND_CLASSIFIER
            else tr("It loads now on the device chosen for Chat; your next message is answered by it.")
        )
        banner = self.banners.show_message(f"{view} now uses {shown}.", hint, "info", cause="use")
        banner.add_action(f"Open {view}", lambda: self.open_view_requested.emit(view.lower()))

    # --- actions -----------------------------------------------------------------------------------
    def _tab_changed(self, index: int) -> None:
        if self.tabs.widget(index) is self.found_panel and self.found_panel.report is None and not self.busy:
            self._scan()

    def _scan(self) -> None:
        if not self.busy:
            self.set_busy(True, "Looking for models on this machine…")
            self.scan_requested.emit()

    def _add_found(self, folder: str, name: str, copy: bool, tool: str) -> None:
        if not self.busy:
            what = "Copying" if copy else "Hashing"
            self.set_busy(True, f"{what} {Path(folder).name}…")
            self.add_found_requested.emit(folder, name, copy, tool)

    def _folders_changed(self, folders: list[str]) -> None:
        self.set_busy(True, "Looking for models on this machine…")
        self.folders_changed.emit(list(folders))

    def _use(self) -> None:
        entry = self.selected_entry()
        if entry is not None and not use_blocker(entry, self.in_use):
            self.asked_use = (entry.kind, entry.name)
            self.use_requested.emit(entry.kind, entry.name)

    def _allow_toggled(self, allowed: bool) -> None:
        self._update_buttons()
        self.allow_downloads_changed.emit(allowed)

    def _import_folder(self) -> None:
        folder = self._choose_folder()
        if folder:
            self.last_dir = str(Path(folder).parent)
            self.set_busy(True, f"Importing {Path(folder).name}…")
            self.import_requested.emit(folder, None, {})

    def _import_classifier(self) -> None:
        chosen = self._choose_classifier()
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
        what = (
            f"This removes it from your library; its files stay in {entry.reference}."
            if entry.reference
            else f"This deletes {entry.folder} ({format_bytes(entry.size_bytes)}) from your library."
        )
        if self._confirm(f"Remove {entry.display_name}?", what):
            self.set_busy(True, f"Removing {entry.name}…", cancellable=False)
            self.remove_requested.emit(entry.name)

    def _download(self) -> None:
        catalog_id = self.selected_catalog_id()
        if catalog_id and self.allow_box.isChecked():
            self.set_busy(True, "Starting the download…")
            self.download_requested.emit(catalog_id)

    # --- dialogs -----------------------------------------------------------------------------------
    def _confirm(self, title: str, text: str) -> bool:
        return ask(self, title, text)

    def _choose_folder(self) -> str:
        return QFileDialog.getExistingDirectory(self, tr("Model folder (with genai_config.json)"), self.last_dir)

    def _choose_classifier(self) -> ClassifierChoice | None:
        return choose_classifier(self, self.last_dir)
