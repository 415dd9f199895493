"""The layout check (ui.common.layout_check) sees every way text gets cut on screen, from geometry and
font metrics: each rule on a window built to break it, and a window laid out well that passes."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.common.layout_check import check_layout

LONG = "Asked NPU → Ran on CPU · 94/94 nodes"


def window(qtbot: Any, width: int = 600, height: int = 400) -> QWidget:
    root = QWidget()
    qtbot.addWidget(root)
    root.resize(width, height)
    return root


def shown(root: QWidget) -> list[str]:
    root.show()
    for _ in range(3):
        QApplication.processEvents()
    return [str(p) for p in check_layout(root)]


def test_a_window_laid_out_well_has_no_problem(qtbot: Any) -> None:
    root = window(qtbot)
    layout = QVBoxLayout(root)
    layout.addWidget(QLabel(LONG))
    table = QTableWidget(2, 2)
    table.setWordWrap(False)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.setHorizontalHeaderLabels(["Model", "Ran on"])
    for row in range(2):
        table.setItem(row, 0, QTableWidgetItem("efficientnet-lite0"))
        table.setItem(row, 1, QTableWidgetItem(LONG))
    layout.addWidget(table)
    assert shown(root) == []


def test_a_label_narrower_than_its_text(qtbot: Any) -> None:
    root = window(qtbot)
    label = QLabel(LONG, root)
    label.setGeometry(10, 10, 80, 30)
    assert any("(cut)" in p for p in shown(root))


def test_a_label_shorter_than_its_font(qtbot: Any) -> None:
    root = window(qtbot)
    label = QLabel("go-kart", root)
    label.setGeometry(10, 10, 200, label.fontMetrics().height() // 2)
    assert any("(clipped)" in p and "go-kart" in p for p in shown(root))


def test_a_label_half_outside_its_parent(qtbot: Any) -> None:
    root = window(qtbot)
    box = QWidget(root)
    box.setGeometry(10, 10, 300, 12)  # the label is tall enough, its parent is not
    label = QLabel("punching bag", box)
    label.setGeometry(0, 0, 200, 30)
    problems = shown(root)
    assert any("clipped by its parent" in p and "punching bag" in p for p in problems)


def test_a_squeezed_placement_chip(qtbot: Any) -> None:
    root = window(qtbot)
    chip = QFrame(root)
    chip.setObjectName("PlacementChip")
    row = QHBoxLayout(chip)
    row.addWidget(QLabel(LONG))
    chip.setGeometry(10, 10, chip.sizeHint().width() // 2, chip.sizeHint().height())
    assert any("chip cut" in p for p in shown(root))


def _table(columns: int = 2) -> QTableWidget:
    table = QTableWidget(6, columns)
    table.setWordWrap(False)
    table.setHorizontalHeaderLabels(["Peak RSS (MB)", "Ran on", "p50", "p90", "p99"][:columns])
    for row in range(6):
        for column in range(columns):
            table.setItem(row, column, QTableWidgetItem(LONG if column == 1 else "123.4"))
    return table


def test_a_cell_and_a_header_the_table_elides(qtbot: Any) -> None:
    root = window(qtbot)
    layout = QVBoxLayout(root)
    table = _table()
    table.setColumnWidth(0, 30)
    table.setColumnWidth(1, 80)
    layout.addWidget(table)
    problems = shown(root)
    assert any("cell (0, 1)" in p and "(elided)" in p for p in problems)
    assert any("'Peak RSS (MB)': its header needs" in p for p in problems)


def test_rows_shorter_than_their_text(qtbot: Any) -> None:
    root = window(qtbot)
    layout = QVBoxLayout(root)
    table = _table()
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.verticalHeader().setMinimumSectionSize(4)
    for row in range(6):
        table.setRowHeight(row, 8)
    layout.addWidget(table)
    assert any("px of height" in p and "(clipped)" in p for p in shown(root))


def test_a_table_below_the_fold_and_a_sideways_table_at_a_size_that_must_fit(qtbot: Any) -> None:
    root = window(qtbot, 400, 300)
    layout = QVBoxLayout(root)
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    page = QWidget()
    column = QVBoxLayout(page)
    spacer = QWidget()
    spacer.setMinimumHeight(500)  # a tall card above the table
    column.addWidget(spacer)
    table = _table(5)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.setMinimumHeight(200)
    column.addWidget(table)
    scroll.setWidget(page)
    layout.addWidget(scroll)
    assert shown(root) == []  # where scrolling is allowed (the usable minimum), scrolling is fine
    roomy = [str(p) for p in check_layout(root, roomy=True)]
    assert any("below the fold" in p for p in roomy)
    assert any("scrolls sideways" in p for p in roomy)
