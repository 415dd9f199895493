"""Settings: the compiled-model (EPContext) cache card: the list of compiled models, their EP,
versions, size and age, and remove selected / clear all (after asking). The listing and the removal
come from the settings host; the requests go out as the view's signals.

A mixin of SettingsView (ui.settings_view): it works on the view's banners, seams and signals,
declared below."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QSignalBlocker, Qt
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
)

from app.qtcompat import emit
from engines.models.library import format_bytes
from engines.types import short_ep_name
from ui.icons import icon
from ui.settings_parts import PathLabel, section_title
from ui.widgets import BannerArea, Card, Spinner, muted_label, table_item


def tr(text: str) -> str:
    return QCoreApplication.translate("Settings", text)


CACHE_COLUMNS = ("Model", "EP", "Versions", "Size", "Created")
EMPTY_CACHE = "No compiled models yet — the NPU compiles a model on its first load; CPU and GPU need none."




def versions_text(entry: Any) -> str:
    parts = [entry.ep_version or "EP version unknown", f"ONNX Runtime {entry.ort_version}"]
    if entry.driver_version:
        parts.append(f"driver {entry.driver_version}")
    return " · ".join(parts)


class CompiledModelsSection:
    banners: BannerArea
    listing: Any
    cache_busy: bool
    confirm: Callable[[str, str], bool]
    cache_refresh_requested: Any  # the view's signals (a Signal, bound on the view)
    cache_remove_requested: Any
    cache_clear_requested: Any

    def _cache(self) -> Card:
        card = Card()
        head = QHBoxLayout()
        head.addWidget(section_title("Compiled models"))
        head.addStretch(1)
        self.cache_spinner = Spinner(16)
        head.addWidget(self.cache_spinner)
        self.cache_refresh_button = QToolButton()
        self.cache_refresh_button.setIcon(icon("refresh"))
        self.cache_refresh_button.setToolTip(tr("List the compiled models again"))
        self.cache_refresh_button.clicked.connect(self.refresh_cache)
        head.addWidget(self.cache_refresh_button)
        card.body.addLayout(head)
        card.body.addWidget(
            muted_label(
                tr(
                    "An NPU compiles a model for itself on its first load; NPU Studio keeps the result (an EPContext "
                    "model) so later loads are fast. A compiled model only loads with the EP, SDK and driver that made "
                    "it: after an update it is compiled again."
                )
            )
        )
        self.cache_stack = QStackedWidget()
        self.cache_table = QTableWidget(0, len(CACHE_COLUMNS))
        self.cache_table.setHorizontalHeaderLabels(list(CACHE_COLUMNS))
        self.cache_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.cache_table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.cache_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.cache_table.verticalHeader().setVisible(False)
        self.cache_table.setAlternatingRowColors(True)
        self.cache_table.setWordWrap(False)
        header = self.cache_table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.cache_table.itemSelectionChanged.connect(self._update_cache_buttons)
        self.cache_table.setMinimumHeight(150)
        self.cache_stack.addWidget(self.cache_table)
        empty = QFrame()
        empty.setObjectName("EmptyCard")
        empty_layout = QVBoxLayout(empty)
        empty_layout.setContentsMargins(18, 18, 18, 18)
        self.cache_empty = muted_label(EMPTY_CACHE)
        self.cache_empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        empty_layout.addWidget(self.cache_empty)
        self.cache_stack.addWidget(empty)
        self.cache_stack.setCurrentIndex(1)
        card.body.addWidget(self.cache_stack, 1)
        row = QHBoxLayout()
        self.cache_summary = muted_label(tr("Not listed yet."), word_wrap=False)
        row.addWidget(self.cache_summary, 1)
        self.remove_button = QPushButton(icon("delete"), tr("Remove selected"))
        self.remove_button.clicked.connect(self._remove_selected)
        self.clear_button = QPushButton(icon("delete"), tr("Clear all"))
        self.clear_button.clicked.connect(self._clear_all)
        row.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.clear_button, 0, Qt.AlignmentFlag.AlignTop)
        card.body.addLayout(row)
        self.cache_folder_label = PathLabel()
        card.body.addWidget(self.cache_folder_label)
        return card

    def refresh_cache(self) -> None:
        self._set_cache_busy(True)
        emit(self.cache_refresh_requested)

    def show_cache(self, listing: Any) -> None:
        selected = set(self.selected_digests())
        self.listing = listing
        self._set_cache_busy(False)
        table = self.cache_table
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
        self.cache_stack.setCurrentIndex(0 if count else 1)
        self.cache_folder_label.set_path(str(listing.folder))
        if count:
            noun = "compiled model" if count == 1 else "compiled models"
            self.cache_summary.setText(f"{count} {noun} · {format_bytes(listing.total_bytes)} in total")
        else:
            self.cache_summary.setText(tr("Empty"))
        self._update_cache_buttons()

    def show_cache_removed(self, result: Any) -> None:
        self._set_cache_busy(False)
        if result.removed:
            noun = "compiled model" if result.removed == 1 else "compiled models"
            self.banners.show_message(
                f"Removed {result.removed} {noun} ({format_bytes(result.freed_bytes)} freed).",
                tr("Their next load on the NPU compiles them again."),
            )
        elif not result.kept:
            self.banners.show_message(tr("There was nothing to remove: the compiled-model cache is empty."))
        if result.kept:
            self.banners.show_message(
                f"Could not delete {', '.join(result.kept)}.",
                tr("A model that is loaded may still be using its compiled copy: restart NPU Studio and try again."),
                severity="warning",
            )

    def selected_digests(self) -> list[str]:
        model = self.cache_table.selectionModel()
        rows = sorted({index.row() for index in model.selectedRows()}) if model is not None else []
        digests = []
        for row in rows:
            item = self.cache_table.item(row, 0)
            if item is not None:
                digests.append(str(item.data(Qt.ItemDataRole.UserRole)))
        return digests

    def _set_cache_busy(self, busy: bool) -> None:
        self.cache_busy = busy
        if busy:
            self.cache_spinner.start()
        else:
            self.cache_spinner.stop()
        self._update_cache_buttons()

    def _update_cache_buttons(self) -> None:
        idle = not self.cache_busy
        has_entries = self.listing is not None and bool(self.listing.entries)
        self.cache_refresh_button.setEnabled(idle)
        self.remove_button.setEnabled(idle and bool(self.selected_digests()))
        self.clear_button.setEnabled(idle and has_entries)

    def _remove_selected(self) -> None:
        digests = self.selected_digests()
        if not digests or self.cache_busy:
            return
        noun = "this compiled model" if len(digests) == 1 else f"these {len(digests)} compiled models"
        if self.confirm("Remove compiled models?", f"Remove {noun}? Their next NPU load compiles them again."):
            self._set_cache_busy(True)
            emit(self.cache_remove_requested, digests)

    def _clear_all(self) -> None:
        if self.cache_busy or self.listing is None or not self.listing.entries:
            return
        total = format_bytes(self.listing.total_bytes)
        if self.confirm(
            "Clear all compiled models?",
            f"Delete every compiled model ({total})? Each model compiles again on its next NPU load.",
        ):
            self._set_cache_busy(True)
            emit(self.cache_clear_requested)
