"""Models: the library and catalog tables: their columns, and one row of plain, read-only cells per
library entry (with how well it fits this machine) and per downloadable model. Cells and tooltips are
table items (ui.common.widgets.table_item): a name from a model folder is shown as the text it is."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from engines import CatalogEntry, FitHint, ModelEntry, format_bytes
from ui.common.model_picker import precision_words
from ui.common.widgets import table_item

LIBRARY_COLUMNS = ("Name", "Kind", "Origin", "Size", "SHA-256", "Precision", "Devices", "Licence", "Fit", "Status")
CATALOG_COLUMNS = ("Model", "Devices", "Precision", "Size", "Context", "Licence", "Status")
_FIT_TEXT = {"fits": "Fits", "may be slow": "May be slow", "won't fit": "Won't fit"}
_KIND_TEXT = {"image-classifier": "Image classifier", "genai-llm": "Chat"}
class _Table(QTableWidget):
    """Asks for no more height than its minimum: in a scrolling view the rest comes from the stretch."""

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(hint.width(), self.minimumHeight()) if self.minimumHeight() else hint


def read_only_table(columns: Sequence[str], rows: int = 0) -> QTableWidget:
    """A table of plain read-only cells; with `rows`, never squeezed below its header and that many rows
    (and a horizontal scroll bar)."""
    table = _Table(0, len(columns))
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
    if rows:
        row = table.verticalHeader().defaultSectionSize()
        bar = table.style().pixelMetric(table.style().PixelMetric.PM_ScrollBarExtent)
        table.setMinimumHeight(header.sizeHint().height() + rows * row + bar + 2 * table.frameWidth() + 2)
    return table


def library_cells(entry: ModelEntry, fit: FitHint | None) -> list[QTableWidgetItem]:
    """One library entry's row; `fit` is how it fits this machine (None: not judged)."""
    status = "OK" if entry.usable else "Problem"
    return [
        table_item(entry.name, entry.display_name, data=entry.name),
        table_item(_KIND_TEXT.get(entry.kind, entry.kind), entry.kind),
        _origin_cell(entry),
        table_item(format_bytes(entry.size_bytes)),
        table_item(entry.short_sha or "—", entry.sha256),
        table_item(precision_words(entry.precision) if entry.precision else "—", entry.precision),
        table_item(", ".join(d.upper() for d in entry.devices) or "—"),
        table_item(entry.licence or "unknown"),
        table_item(_FIT_TEXT.get(fit.verdict, fit.verdict) if fit else "—", fit.message() if fit else ""),
        table_item(status, entry.problem),
    ]


def _origin_cell(entry: ModelEntry) -> QTableWidgetItem:
    if entry.bundled:
        return table_item("Bundled (read-only)")
    if entry.reference:
        return table_item("By reference", f"Files in {entry.reference}")
    return table_item("Yours")


def catalog_cells(entry: CatalogEntry, installed: set[str], partial: int) -> list[QTableWidgetItem]:
    """One downloadable model's row; `partial` is how much of it an interrupted download holds."""
    status = (
        "Installed" if entry.id in installed else (f"Partial ({format_bytes(partial)}), resumes" if partial else "—")
    )
    return [
        table_item(entry.display_name, f"{entry.repo_id} / {entry.subfolder or '(root)'}", data=entry.id),
        table_item(", ".join(d.upper() for d in entry.devices)),
        table_item(precision_words(entry.precision), entry.precision),
        table_item(f"~{format_bytes(entry.size_bytes)}" if entry.size_bytes else "?"),
        table_item(f"{entry.context_length:,}" if entry.context_length else "?"),
        table_item(entry.licence or "?"),
        table_item(status),
    ]
