"""Models: the library and catalog tables: their columns, and one row of plain, read-only cells per
library entry (with how well it fits this machine) and per downloadable model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from engines.models.library import format_bytes
from ui.widgets import table_item

LIBRARY_COLUMNS = ("Name", "Kind", "Origin", "Size", "SHA-256", "Precision", "Devices", "Licence", "Fit", "Status")
CATALOG_COLUMNS = ("Model", "Devices", "Precision", "Size", "Context", "Licence", "Status")
_FIT_TEXT = {"fits": "Fits", "may be slow": "May be slow", "won't fit": "Won't fit"}




def read_only_table(columns: Sequence[str]) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    # Names are shown whole (never "efficie…"); a narrow window scrolls the table sideways instead.
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(True)
    header.setMinimumSectionSize(48)
    return table


def library_cells(entry: Any, fit: Any) -> list[QTableWidgetItem]:
    """One library entry's row; `fit` is how it fits this machine (None: not judged)."""
    status = "OK" if entry.usable else "Problem"
    return [
        table_item(entry.name, entry.display_name, data=entry.name),
        table_item(entry.kind),
        table_item("Bundled (read-only)" if entry.bundled else "Yours"),
        table_item(format_bytes(entry.size_bytes)),
        table_item(entry.short_sha or "—", entry.sha256),
        table_item(entry.precision or "—"),
        table_item(", ".join(d.upper() for d in entry.devices) or "—"),
        table_item(entry.licence or "unknown"),
        table_item(_FIT_TEXT.get(fit.verdict, fit.verdict) if fit else "—", fit.message() if fit else ""),
        table_item(status, entry.problem),
    ]


def catalog_cells(entry: Any, installed: set[str], partial: int) -> list[QTableWidgetItem]:
    """One downloadable model's row; `partial` is how much of it an interrupted download holds."""
    status = (
        "Installed" if entry.id in installed else (f"Partial ({format_bytes(partial)}), resumes" if partial else "—")
    )
    return [
        table_item(entry.display_name, f"{entry.repo_id} / {entry.subfolder or '(root)'}", data=entry.id),
        table_item(", ".join(d.upper() for d in entry.devices)),
        table_item(entry.precision),
        table_item(f"~{format_bytes(entry.size_bytes)}" if entry.size_bytes else "?"),
        table_item(f"{entry.context_length:,}" if entry.context_length else "?"),
        table_item(entry.licence or "?"),
        table_item(status),
    ]
