"""The Classify view's result card (top-5, placement chip, per-photo time, low-confidence hint) and
its batch card (summary line, per-photo table, CSV of the per-photo numbers)."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableView

from engines.types import Classification
from ui.classify_parts import TOP_K, ProbabilityBars, ResultsModel, photo_ms
from ui.icons import icon
from ui.placement_chip import PlacementChip
from ui.widgets import Card, muted_label

LOW_CONFIDENCE = 0.30  # below this the top-1 is more likely a guess than an answer


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


class ResultCard(Card):
    def __init__(self) -> None:
        super().__init__()
        self.setMinimumWidth(320)
        self.result_title = QLabel(tr("No photo yet"))
        self.result_title.setObjectName("ViewTitle")
        self.result_title.setWordWrap(True)
        self.body.addWidget(self.result_title)
        self.result_file = muted_label("")
        self.body.addWidget(self.result_file)
        self.hint = muted_label(tr("Open a photo, drop one here, or click a sample photo."))
        self.body.addWidget(self.hint)
        self.body.addSpacing(6)
        self.bars = ProbabilityBars()
        self.body.addWidget(self.bars)
        self.body.addSpacing(6)
        badge_row = QHBoxLayout()
        self.placement_chip = PlacementChip()
        badge_row.addWidget(self.placement_chip)
        badge_row.addStretch(1)
        self.body.addLayout(badge_row)
        self.latency = muted_label("")
        self.body.addWidget(self.latency)
        self.body.addStretch(1)

    def reset(self) -> None:
        self.result_title.setText(tr("No photo yet"))
        self.result_file.setText("")
        self.hint.setText(tr("Open a photo, drop one here, or click a sample photo."))
        self.hint.show()
        self.bars.set_scores([])
        self.placement_chip.clear()
        self.latency.setText("")

    def show_failure(self, path: str) -> None:
        """Nothing of an earlier photo stays next to the one that failed."""
        self.result_title.setText(tr("Could not classify"))
        self.result_file.setText(Path(path).name if path and path != "<bytes>" else "")
        self.hint.hide()
        self.bars.set_scores([])
        self.placement_chip.clear()
        self.latency.setText("")

    def show_result(self, result: Classification, asked: str | None) -> None:
        name = Path(result.path).name if result.path != "<bytes>" else tr("Pasted image")
        self.result_file.setText(name)
        if result.error:
            self.show_failure(result.path)
            self.latency.setText(result.error)
            return
        top = result.top[0] if result.top else None
        self.result_title.setText(top.label if top else "—")
        if top is not None and top.probability < LOW_CONFIDENCE:
            self.hint.setText(
                tr(
                    "Low confidence: the model is not sure. It knows 1,000 ImageNet classes; "
                    "the photo may show none of them."
                )
            )
            self.hint.show()
        else:
            self.hint.hide()
        self.bars.set_scores([(s.label, s.probability) for s in result.top])
        self.latency.setText(
            tr("This photo {total:.1f} ms: inference {inf:.1f} ms · decode + preprocessing {pre:.1f} ms").format(
                total=photo_ms(result), inf=result.latency_ms, pre=result.preprocess_ms
            )
        )
        self.placement_chip.set_placement(result.placement, asked)


class BatchCard(Card):
    def __init__(self) -> None:
        super().__init__()
        table_head = QHBoxLayout()
        self.table_title = QLabel(tr("Batch results"))
        self.table_title.setObjectName("SectionTitle")
        table_head.addWidget(self.table_title)
        table_head.addStretch(1)
        self.export_button = QPushButton(icon("export"), tr("Export CSV…"))
        self.export_button.setAccessibleName(tr("Export the results as CSV"))
        table_head.addWidget(self.export_button)
        self.body.addLayout(table_head)
        self.summary = muted_label("")
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.addWidget(self.summary)
        self.results = ResultsModel()
        self.table = QTableView()
        self.table.setModel(self.results)
        self.table.setAccessibleName(tr("Batch results"))
        self.table.setAlternatingRowColors(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setDefaultSectionSize(28)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for column in (2, 3):  # fixed: ResizeToContents would measure every row on each insert
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(column, 100)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        self.body.addWidget(self.table)


def write_results_csv(results: Sequence[Classification], path: str | os.PathLike[str]) -> None:
    """Every photo with its own numbers: top-k, inference, decode + preprocessing, total, placement."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        header = ["path"]
        for rank in range(1, TOP_K + 1):
            header += [f"label_{rank}", f"probability_{rank}"]
        header += ["latency_ms", "preprocess_ms", "photo_ms", "placement", "error"]
        writer.writerow(header)
        for result in results:
            row: list[object] = [result.path]
            for rank in range(TOP_K):
                if rank < len(result.top):
                    row += [result.top[rank].label, f"{result.top[rank].probability:.6f}"]
                else:
                    row += ["", ""]
            placement = result.placement.badge() if result.placement else ""
            row += [
                f"{result.latency_ms:.3f}",
                f"{result.preprocess_ms:.3f}",
                f"{photo_ms(result):.3f}",
                placement,
                result.error,
            ]
            writer.writerow(row)
