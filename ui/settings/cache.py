"""Settings: the compiled-models card: the models an NPU compiled for itself (their EP, versions,
size and age) and remove selected / clear all, after asking. The listing and the removal come from the
settings host (app.hosts.settings); the card asks for them with its signals and says what happened
with `notice`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from PySide6.QtCore import QCoreApplication, QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QStackedWidget,
    QTableWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engines import CacheEntry, format_bytes, short_ep_name
from ui.common.icons import icon
from ui.common.plain import ask
from ui.common.widgets import Card, Spinner, muted_label, table_item
from ui.settings.parts import PathLabel, section_title


def tr(text: str) -> str:
    return QCoreApplication.translate("Settings", text)


CACHE_COLUMNS = ("Model", "EP", "Versions", "Size", "Created")
EMPTY_CACHE = "No compiled models yet — the NPU compiles a model on its first load; CPU and GPU need none."
ABOUT = (
    "An NPU compiles a model for itself on its first load; NPU Studio keeps the compiled copy so later loads "
    "are fast. A compiled copy loads only with the NPU software and driver that made it: after an update the "
    "model is compiled again."
)


class Listing(Protocol):
    """The cache as the settings host lists it (app.hosts.settings.CacheListing)."""

    @property
    def folder(self) -> str: ...
    @property
    def entries(self) -> Sequence[CacheEntry]: ...
    @property
    def total_bytes(self) -> int: ...


class Removal(Protocol):
    """What a removal did (app.hosts.settings.CacheRemoval)."""

    @property
    def removed(self) -> int: ...
    @property
    def freed_bytes(self) -> int: ...
    @property
    def kept(self) -> Sequence[str]: ...


def versions_text(entry: CacheEntry) -> str:
    parts = [entry.ep_version or "EP version unknown", f"ONNX Runtime {entry.ort_version}"]
    if entry.driver_version:
        parts.append(f"driver {entry.driver_version}")
    return " · ".join(parts)


class CompiledModelsCard(Card):
    refresh_requested = Signal()
    remove_requested = Signal(object)  # list of cache entry digests
    clear_requested = Signal()
    notice = Signal(str, str, str)  # message, hint, severity: for the view's banners

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.listing: Listing | None = None
        self.busy = False
        head = QHBoxLayout()
        head.addWidget(section_title("Compiled models"))
        head.addStretch(1)
        self.spinner = Spinner(16)
        head.addWidget(self.spinner)
        self.refresh_button = QToolButton()
        self.refresh_button.setIcon(icon("refresh"))
        self.refresh_button.setToolTip(tr("List the compiled models again"))
        self.refresh_button.clicked.connect(self.refresh)
        head.addWidget(self.refresh_button)
        self.body.addLayout(head)
        self.body.addWidget(muted_label(tr(ABOUT)))
        self.stack = QStackedWidget()
        self.table = QTableWidget(0, len(CACHE_COLUMNS))
        self.table.setAccessibleName(tr("Compiled models"))
        self.table.setHorizontalHeaderLabels(list(CACHE_COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        # Every cell whole (a narrow window scrolls the table sideways rather than cut a version).
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.setMinimumHeight(150)
        self.stack.addWidget(self.table)
        empty = QFrame()
        empty.setObjectName("EmptyCard")
        empty_layout = QVBoxLayout(empty)
        empty_layout.setContentsMargins(18, 18, 18, 18)
        self.empty = muted_label(EMPTY_CACHE)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        empty_layout.addWidget(self.empty)
        self.stack.addWidget(empty)
        self.stack.setCurrentIndex(1)
        self.body.addWidget(self.stack, 1)
        row = QHBoxLayout()
        self.summary = muted_label(tr("Not listed yet."), word_wrap=False)
        row.addWidget(self.summary, 1)
        self.remove_button = QPushButton(icon("delete"), tr("Remove selected"))
        self.remove_button.clicked.connect(self._remove_selected)
        self.clear_button = QPushButton(icon("delete"), tr("Clear all"))
        self.clear_button.clicked.connect(self._clear_all)
        row.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.clear_button, 0, Qt.AlignmentFlag.AlignTop)
        self.body.addLayout(row)
        self.folder_label = PathLabel()
        self.body.addWidget(self.folder_label)
        self._update_buttons()

    # --- the host's answers -------------------------------------------------------------------------
    def refresh(self) -> None:
        self.set_busy(True)
        self.refresh_requested.emit()

    def show_listing(self, listing: Listing) -> None:
        selected = set(self.selected_digests())
        self.listing = listing
        self.set_busy(False)
        table = self.table
        with QSignalBlocker(table):
            table.setRowCount(0)
            for entry in listing.entries:
                row = table.rowCount()
                table.insertRow(row)
                created = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created))
                details = [f"Folder: {entry.folder}", f"Compiled in {entry.compile_seconds:.1f} s"]
                if entry.options:
                    details.append("Options: " + ", ".join(f"{k}={v}" for k, v in sorted(entry.options.items())))
                cells = [
                    table_item(entry.model_name or entry.digest, "\n".join(details), data=entry.digest),
                    table_item(short_ep_name(entry.ep), entry.ep),
                    table_item(versions_text(entry), versions_text(entry)),
                    table_item(format_bytes(entry.size_bytes), f"{entry.size_bytes:,} bytes", right=True),
                    table_item(created),
                ]
                for column, cell in enumerate(cells):
                    table.setItem(row, column, cell)
                if entry.digest in selected:
                    table.selectRow(row)
        count = len(listing.entries)
        self.stack.setCurrentIndex(0 if count else 1)
        self.folder_label.set_path(str(listing.folder))
        if count:
            noun = "compiled model" if count == 1 else "compiled models"
            self.summary.setText(f"{count} {noun} · {format_bytes(listing.total_bytes)} in total")
        else:
            self.summary.setText(tr("Empty"))
        self._update_buttons()

    def show_removed(self, result: Removal) -> None:
        self.set_busy(False)
        if result.removed:
            noun = "compiled model" if result.removed == 1 else "compiled models"
            self.notice.emit(
                f"Removed {result.removed} {noun} ({format_bytes(result.freed_bytes)} freed).",
                tr("Their next load on the NPU compiles them again."),
                "info",
            )
        elif not result.kept:
            self.notice.emit(tr("There was nothing to remove: the compiled-model cache is empty."), "", "info")
        if result.kept:
            self.notice.emit(
                f"Could not delete {', '.join(result.kept)}.",
                tr("A model that is loaded may still be using its compiled copy: restart NPU Studio and try again."),
                "warning",
            )

    def selected_digests(self) -> list[str]:
        model = self.table.selectionModel()
        rows = sorted({index.row() for index in model.selectedRows()}) if model is not None else []
        digests = []
        for row in rows:
            item = self.table.item(row, 0)
            if item is not None:
                digests.append(str(item.data(Qt.ItemDataRole.UserRole)))
        return digests

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        if busy:
            self.spinner.start()
        else:
            self.spinner.stop()
        self._update_buttons()

    # --- the user's requests ------------------------------------------------------------------------
    def _update_buttons(self) -> None:
        idle = not self.busy
        has_entries = self.listing is not None and bool(self.listing.entries)
        self.refresh_button.setEnabled(idle)
        self.remove_button.setEnabled(idle and bool(self.selected_digests()))
        self.clear_button.setEnabled(idle and has_entries)

    def _remove_selected(self) -> None:
        digests = self.selected_digests()
        if not digests or self.busy:
            return
        noun = "this compiled model" if len(digests) == 1 else f"these {len(digests)} compiled models"
        if self._confirm("Remove compiled models?", f"Remove {noun}? Their next NPU load compiles them again."):
            self.set_busy(True)
            self.remove_requested.emit(digests)

    def _clear_all(self) -> None:
        if self.busy or self.listing is None or not self.listing.entries:
            return
        total = format_bytes(self.listing.total_bytes)
        if self._confirm(
            "Clear all compiled models?",
            f"Delete every compiled model ({total})? Each model compiles again on its next NPU load.",
        ):
            self.set_busy(True)
            self.clear_requested.emit()

    def _confirm(self, title: str, text: str) -> bool:
        return ask(self, title, text)
