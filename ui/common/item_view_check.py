"""The layout check's rules for tables and lists (ui.common.layout_check): a header section or a cell
whose text the view elides ("…") or clips, a row shorter than its text, and, at the sizes the app
promises to fit, a table that scrolls sideways because its columns do not fit.

What a cell needs is asked of the view's own delegate (the size it would draw the cell at, icon,
check box and margins included), so a delegate that draws a chip is judged by the chip it draws."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QListView, QStyleOptionViewItem, QTableView, QTreeView

SLACK = 2


def _header(view: QAbstractItemView) -> QHeaderView | None:
    if isinstance(view, QTableView):
        return view.horizontalHeader()
    if isinstance(view, QTreeView):
        return view.header()
    return None


def _columns(view: QAbstractItemView) -> list[int]:
    model = view.model()
    if isinstance(view, QListView):
        return [view.modelColumn()]
    if isinstance(view, QTableView):
        return [c for c in range(model.columnCount()) if not view.isColumnHidden(c)]
    if isinstance(view, QTreeView):
        return [c for c in range(model.columnCount()) if not view.isColumnHidden(c)]
    return [0]


def _wraps(view: QAbstractItemView) -> bool:
    if isinstance(view, QTableView | QTreeView | QListView):
        return view.wordWrap()
    return False


def header_cuts(view: QAbstractItemView) -> list[str]:
    header = _header(view)
    if header is None or not header.isVisibleTo(view) or header.model() is None:
        return []
    found = []
    for logical in range(header.count()):
        if header.isSectionHidden(logical) or header.sectionSize(logical) <= 0:
            continue
        needed = header.sectionSizeFromContents(logical).width()
        size = header.sectionSize(logical)
        if needed > size + SLACK:
            text = header.model().headerData(logical, header.orientation(), Qt.ItemDataRole.DisplayRole)
            found.append(f"column {text!r}: its header needs {needed} px, has {size} (elided)")
    return found


def _cell_text(index: QModelIndex) -> str:
    value = index.data(Qt.ItemDataRole.DisplayRole)
    return "" if value is None else str(value)


def cell_cuts(view: QAbstractItemView) -> list[str]:
    """Cells in the visible rows: each gets the width (or, wrapped, the height) its text needs."""
    model = view.model()
    if model is None:
        return []
    area = view.viewport().rect()
    wraps = _wraps(view)
    found: list[str] = []
    root = view.rootIndex()
    for row in range(model.rowCount(root)):
        first = view.visualRect(model.index(row, _columns(view)[0] if _columns(view) else 0, root))
        if first.top() > area.bottom():
            break  # rows below the visible part are not drawn yet
        if first.bottom() < area.top():
            continue
        for column in _columns(view):
            index = model.index(row, column, root)
            rect = view.visualRect(index)
            if rect.isEmpty() or view.indexWidget(index) is not None:
                continue
            option = QStyleOptionViewItem()
            view.initViewItemOption(option)
            option.rect = rect
            hint = view.itemDelegateForIndex(index).sizeHint(option, index)
            text = _cell_text(index)
            shown = text if len(text) <= 30 else text[:27] + "…"
            if not wraps and hint.width() > rect.width() + SLACK:
                found.append(f"cell ({row}, {column}) {shown!r} needs {hint.width()} px, has {rect.width()} (elided)")
            elif hint.height() > rect.height() + SLACK:
                found.append(
                    f"cell ({row}, {column}) {shown!r} needs {hint.height()} px of height, has {rect.height()} "
                    "(clipped)"
                )
    return found


def item_view_cuts(view: QAbstractItemView, roomy: bool) -> list[str]:
    found = header_cuts(view) + cell_cuts(view)
    if roomy and isinstance(view, QTableView | QTreeView) and view.horizontalScrollBar().isVisibleTo(view):
        found.append("its columns do not fit: the table scrolls sideways")
    return found
