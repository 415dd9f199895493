"""Models: the "On this machine" tab. The model folders other local-AI tools keep here (Foundry Local,
the Hugging Face cache, AI Dev Gallery, AI Toolkit, your own folders), what each is and whether this machine runs
it, and adding one to the library by reference or as a copy. Every string from a folder is plain text:
the cells are table items, the details a plain-text label, tooltips escaped."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engines import FoundModel, ScanReport, printable
from ui.common.icons import icon
from ui.common.model_picker import precision_words
from ui.common.plain import breakable, plain_label, plain_tooltip
from ui.common.widgets import SPACING, table_item
from ui.models.tables import read_only_table

# The verdict right after the name: a narrow window scrolls the table sideways, and what scrolls away first
# is what matters least.
FOUND_COLUMNS = ("Name", "On this machine", "Targets", "From", "Kind", "Precision", "Size", "Context")


def tr(text: str) -> str:
    return QCoreApplication.translate("Models", text)


def verdict_text(found: FoundModel) -> str:
    """The verdict's first clause for the table ("Needs the Qualcomm NPU", "Runs here on the CPU"); the
    whole of it is the cell's tooltip and the details' line."""
    if found.in_library:
        return f"In library ({found.in_library})"
    words = str(found.runs_here)
    if found.verdict == "runs":
        words = words.split(" (")[0]
    elif found.verdict == "needs":
        words = words.split(":")[0]
    elif found.verdict == "unusable":
        words = "cannot use it"
    else:
        return "—"
    return printable(words[:1].upper() + words[1:], newlines=False)


def found_cells(found: FoundModel) -> list[QTableWidgetItem]:
    kind = "Chat" if found.kind == "genai-llm" else "Image classifier"
    verdict = verdict_text(found)
    return [
        table_item(found.name, str(found.folder), data=str(found.folder)),
        table_item(verdict, found.runs_here),
        table_item(found.target.label),
        table_item(found.tool, found.publisher),
        table_item(kind),
        table_item(precision_words(found.precision) if found.precision else "—", found.precision),
        table_item(found.size_text, right=True),
        table_item(f"{found.context_length:,}" if found.context_length else "—", right=True),
    ]


def short_folder(folder: str | Path) -> str:
    """A folder that could not be read, short enough for one line: a hub repository by its name (and the
    path in its snapshot), anything else by its last two parts. The whole path is in the tooltip."""
    parts = Path(folder).parts
    if "snapshots" in parts[1:]:
        at = parts.index("snapshots", 1)
        return "/".join(parts[at - 1 : at] + parts[at + 2 :])
    return "/".join(parts[-2:])


def npu_note(report: ScanReport) -> str:
    """The catalog's line on the NPU chat models found here: the first clause of each verdict ("needs the
    Qualcomm NPU: not on this machine"), the rest on the tab."""
    npu = [m for m in report.models if m.kind == "genai-llm" and m.target.device == "NPU"]
    if not npu:
        return ("No NPU chat model found on this machine: Foundry Local's …-qnn-npu, …-openvino-npu and "
                "…-vitis-npu models appear on the On this machine tab once downloaded.")  # fmt: skip
    said = [printable(f"{m.name} ({m.target.label}) {m.runs_here.split(' (')[0]}", newlines=False) for m in npu[:2]]
    more = f"; {len(npu) - 2} more on the On this machine tab" if len(npu) > 2 else ""
    return "NPU chat models on this machine: " + "; ".join(said) + more


class FoundModelsPanel(QWidget):
    """The tab's table, details, add buttons and the user's own folders."""

    scan_requested = Signal()
    add_requested = Signal(str, str, bool, str)  # folder, library name ("" for the default), copy, tool
    folders_changed = Signal(object)  # list[str]: the setting model_folders

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report: ScanReport | None = None
        self.idle = True
        self.folders: list[str] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, SPACING // 2, 0, 0)
        layout.setSpacing(SPACING // 2)
        head = QHBoxLayout()
        self.summary = plain_label(muted=True, selectable=True)
        self.summary.setText(tr("Not looked yet: NPU Studio reads only the small files that describe each "
                                "folder, and loads nothing."))  # fmt: skip
        head.addWidget(self.summary, 1)
        self.scan_button = QPushButton(icon("refresh"), tr("Look again"))
        self.scan_button.setToolTip(tr("Look in Foundry Local's cache, the Hugging Face cache, AI Dev Gallery, "
                                       "AI Toolkit and your folders"))  # fmt: skip
        self.scan_button.clicked.connect(self.scan_requested)
        head.addWidget(self.scan_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(head)
        self.table = read_only_table(FOUND_COLUMNS, rows=2)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        layout.addWidget(self.table, 1)
        self.details = plain_label(muted=True, selectable=True)
        self.add_button = QPushButton(icon("check"), tr("Add to library"))
        self.add_button.setObjectName("Primary")
        self.add_button.setToolTip(tr("Use it where it is: every file is hashed, nothing is copied"))
        self.add_button.clicked.connect(lambda: self._add(copy=False))
        self.copy_button = QPushButton(icon("folder"), tr("Copy into library"))
        self.copy_button.setToolTip(tr("Keep a copy in NPU Studio's library"))
        self.copy_button.clicked.connect(lambda: self._add(copy=True))
        self.add_folder_button = QPushButton(icon("open"), tr("Add folder…"))
        self.add_folder_button.setToolTip(tr("Also look in a folder of your own (kept in your settings)"))
        self.add_folder_button.clicked.connect(self._add_folder)
        self.remove_folder_button = QPushButton(icon("delete"), tr("Remove folder…"))
        self.remove_folder_button.clicked.connect(self._remove_folder)
        self.folders_label = plain_label(muted=True, selectable=True)
        adding = QHBoxLayout()
        adding.addWidget(self.details, 1)
        adding.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignTop)
        adding.addWidget(self.add_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(adding)
        row = QHBoxLayout()
        row.addWidget(QLabel(tr("Your folders:")))
        row.addWidget(self.folders_label, 1)
        for button in (self.add_folder_button, self.remove_folder_button):
            row.addWidget(button)
        layout.addLayout(row)
        self._selection_changed()

    # --- state ---------------------------------------------------------------------------------------
    def show_report(self, report: ScanReport) -> None:
        selected = self.selected_folder()
        self.report = report
        self.table.setRowCount(0)
        for found in report.models:
            row = self.table.rowCount()
            self.table.insertRow(row)
            for column, cell in enumerate(found_cells(found)):
                self.table.setItem(row, column, cell)
            if str(found.folder) == selected:
                self.table.selectRow(row)
        parts = [f"{len(report.models)} model{'s' if len(report.models) != 1 else ''} found in {report.seconds:.1f} s"]
        if report.broken:
            parts.append(f"{len(report.broken)} folder{'s' if len(report.broken) != 1 else ''} could not be read")
        stopped = [p for p in report.places if p.stopped]
        if stopped:
            parts.append(f"stopped early in {', '.join(p.place.tool for p in stopped)}")
        looked = ", ".join(sorted({p.place.tool for p in report.places if p.exists})) or tr("nowhere that exists")
        self.summary.setText(" · ".join(parts) + f" · looked in {looked} · no model was loaded")
        self._selection_changed()

    def set_folders(self, folders: list[str]) -> None:
        self.folders = list(folders)
        # Each folder by its last part (the whole paths in the tooltip): a long path never widens the view.
        shown = "; ".join(printable(Path(f).name or f, newlines=False)[:40] for f in self.folders)
        self.folders_label.setText(shown or tr("none"))
        self.folders_label.setToolTip(plain_tooltip("\n".join(self.folders)))
        self._update_buttons()

    def set_idle(self, idle: bool) -> None:
        self.idle = idle
        self._update_buttons()

    def selected_folder(self) -> str:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        item = self.table.item(rows[0].row(), 0) if rows else None
        return str(item.data(Qt.ItemDataRole.UserRole)) if item is not None else ""

    def selected(self) -> FoundModel | None:
        folder = self.selected_folder()
        if not folder or self.report is None:
            return None
        return next((m for m in self.report.models if str(m.folder) == folder), None)

    def _selection_changed(self) -> None:
        found = self.selected()
        tip = ""
        if found is None:
            broken = self.report.broken if self.report else []
            lines = [tr("Select a model to see what it is and whether this machine runs it.")]
            if broken:
                more = f" (+{len(broken) - 1} more)" if len(broken) > 1 else ""
                lines.append(f"Could not be read: {short_folder(broken[0].folder)}: {broken[0].problem}{more}")
                tip = "\n".join(f"{b.folder}: {b.problem}" for b in broken)
        else:
            facts = [found.name, found.publisher and f"from {found.publisher}", found.licence and
                     f"licence {found.licence}", *found.details]  # fmt: skip
            lines = [" · ".join(x for x in facts if x), f"On this machine: {found.runs_here or found.problem or '—'}"]
            lines.append(f"In your library as {found.in_library}: {found.folder}" if found.in_library
                         else f"Folder: {found.folder}")  # fmt: skip
        self.details.setText("\n".join(breakable(printable(line)) for line in lines))
        self.details.setToolTip(plain_tooltip(printable(tip)))
        self._update_buttons()

    def _update_buttons(self) -> None:
        found = self.selected()
        addable = found is not None and self.idle and not found.problem and not found.in_library
        self.add_button.setEnabled(addable and found is not None and found.kind == "genai-llm")
        self.copy_button.setEnabled(addable)
        if found is not None and found.kind != "genai-llm":
            self.add_button.setToolTip(tr("An image classifier is small: it is copied into the library"))
        else:
            self.add_button.setToolTip(tr("Use it where it is: every file is hashed, nothing is copied"))
        self.scan_button.setEnabled(self.idle)
        self.add_folder_button.setEnabled(self.idle)
        self.remove_folder_button.setEnabled(self.idle and bool(self.folders))

    # --- actions -------------------------------------------------------------------------------------
    def _add(self, copy: bool) -> None:
        found = self.selected()
        if found is None:
            return
        name = self._ask_name(found.suggested_name)
        if name is not None:
            self.add_requested.emit(str(found.folder), name.strip(), copy, found.tool)

    def _add_folder(self) -> None:
        folder = self._choose_folder()
        if folder and folder not in self.folders:
            self.set_folders([*self.folders, folder])
            self.folders_changed.emit(list(self.folders))

    def _remove_folder(self) -> None:
        folder = self._choose_folder_to_remove(list(self.folders))
        if folder in self.folders:
            kept = [f for f in self.folders if f != folder]
            self.set_folders(kept)
            self.folders_changed.emit(list(kept))

    # --- dialogs -----------------------------------------------------------------------------------
    def _choose_folder(self) -> str:
        return QFileDialog.getExistingDirectory(self, tr("A folder that holds models"), "")

    def _choose_folder_to_remove(self, folders: list[str]) -> str | None:
        if len(folders) == 1:
            return folders[0]
        shown = [printable(f, newlines=False) for f in folders]
        picked, ok = QInputDialog.getItem(self, tr("Remove a folder"), tr("No longer look in:"), shown, 0, False)
        return folders[shown.index(picked)] if ok and picked in shown else None

    def _ask_name(self, suggested: str) -> str | None:
        name, ok = QInputDialog.getText(self, tr("Add to library"), tr("Name in your library:"),
                                        QLineEdit.EchoMode.Normal, suggested)  # fmt: skip
        return name if ok and name.strip() else None
