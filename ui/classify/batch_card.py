"""The batch card: title, the summary line, what was skipped, the per-photo table and the CSV export
with its confirmation ("Saved classification.csv · Show in folder")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QModelIndex, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableView

from ui.classify.batch import ResultsModel, write_results_csv
from ui.classify.photos import skipped_summary
from ui.common.icons import icon
from ui.common.plain import plain_tooltip
from ui.common.widgets import Card, muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


class BatchCard(Card):
    """Emits `row_chosen` for a clicked row and `export_failed(path, why)` when a CSV cannot be written."""

    row_chosen = Signal(object)  # Classification
    export_failed = Signal(str, str)

    def __init__(self, last_dir: Callable[[], str] = lambda: "") -> None:
        super().__init__()
        self._last_dir = last_dir
        self.open_url: Callable[[QUrl], bool] = QDesktopServices.openUrl  # the file manager (a seam for tests)
        self.choose_csv: Callable[[str], str] = self._csv_dialog
        self.last_export = ""
        head = QHBoxLayout()
        self.title = QLabel(tr("Batch results"))
        self.title.setObjectName("SectionTitle")
        head.addWidget(self.title)
        head.addStretch(1)
        self.saved = muted_label("", word_wrap=False)
        self.saved.setTextFormat(Qt.TextFormat.PlainText)
        self.saved.hide()
        head.addWidget(self.saved)
        self.show_export_button = QPushButton(icon("folder"), tr("Show in folder"))
        self.show_export_button.setToolTip(tr("Open the folder that holds the exported CSV"))
        self.show_export_button.clicked.connect(self.show_export)
        self.show_export_button.hide()
        head.addWidget(self.show_export_button)
        self.export_button = QPushButton(icon("export"), tr("Export CSV…"))
        self.export_button.setAccessibleName(tr("Export the results as CSV"))
        self.export_button.clicked.connect(self.export_dialog)
        head.addWidget(self.export_button)
        self.body.addLayout(head)
        self.summary = muted_label("")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.addWidget(self.summary)
        self.skipped = muted_label("")
        self.skipped.setTextFormat(Qt.TextFormat.PlainText)
        self.skipped.hide()
        self.body.addWidget(self.skipped)
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
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # the file name gets what is left
        # "Top-1" is as wide as its widest label so far (measured as rows come, like "Ran on").
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(1, self._text_width(tr("Top-1")))
        for column in (2, 3):  # fixed: ResizeToContents would measure every row on each insert
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(column, 100)
        # "Ran on" is as wide as its widest text (a batch has one or two placements: measured as they come).
        header.setSectionResizeMode(ResultsModel.RAN_ON, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(ResultsModel.RAN_ON, self._ran_on_width(tr("Ran on")))
        self.results.rowsInserted.connect(self._fit_ran_on)
        self.table.clicked.connect(self._row_clicked)
        self.body.addWidget(self.table)

    # --- a run --------------------------------------------------------------------------------------
    def start(self, total: int, asked: str) -> None:
        self.results.clear()
        self.results.asked = asked
        header = self.table.horizontalHeader()  # columns measured as this run's rows come
        header.resizeSection(1, self._text_width(tr("Top-1")))
        header.resizeSection(ResultsModel.RAN_ON, self._ran_on_width(tr("Ran on")))
        self.title.setText(tr("Batch results ({n} photos)").format(n=total))
        self.summary.setText("")
        self.show_skipped([])
        self.saved.hide()
        self.show_export_button.hide()

    def show_skipped(self, skipped: list[tuple[str, str]]) -> None:
        """The entries a folder held that are not photos (or could not be read), named in the tooltip."""
        text = skipped_summary(skipped)
        if 0 < len(skipped) <= 3:  # a few are named here, every one in the tooltip
            text += " (" + ", ".join(Path(path).name for path, _ in skipped) + ")"
        self.skipped.setText(text)
        listed = [f"{Path(path).name}: {reason}" for path, reason in skipped[:50]]
        if len(skipped) > 50:
            listed.append(tr("… and {n} more").format(n=len(skipped) - 50))
        self.skipped.setToolTip(plain_tooltip("\n".join(listed)))
        self.skipped.setVisible(bool(skipped))

    # --- export -------------------------------------------------------------------------------------
    def export_dialog(self) -> None:
        if not self.results.results:
            return
        path = self.choose_csv(str(Path(self._last_dir() or Path.home()) / "classification.csv"))
        if path:
            self.export_csv(path)

    def export_csv(self, path: str) -> bool:
        """Write the CSV; say "Saved …" with a way to its folder, or why it could not be written."""
        try:
            write_results_csv(self.results.results, path)
        except OSError as exc:
            self.saved.hide()
            self.show_export_button.hide()
            self.export_failed.emit(path, exc.strerror or str(exc))
            return False
        self.last_export = path
        self.saved.setText(tr("Saved {name}").format(name=Path(path).name))
        self.saved.setToolTip(plain_tooltip(path))
        self.saved.show()
        self.show_export_button.show()
        return True

    def show_export(self) -> bool:
        return bool(self.last_export) and self.open_url(QUrl.fromLocalFile(str(Path(self.last_export).parent)))

    def _csv_dialog(self, suggested: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self, tr("Export results"), suggested, tr("CSV (*.csv)"))
        return path

    # --- internals ----------------------------------------------------------------------------------
    def _row_clicked(self, index: QModelIndex) -> None:
        if 0 <= index.row() < len(self.results.results):
            self.row_chosen.emit(self.results.results[index.row()])

    def _ran_on_width(self, text: str) -> int:
        # text + the chip icon + the cell's padding
        return self.table.fontMetrics().horizontalAdvance(text) + 16 + 24

    def _text_width(self, text: str) -> int:
        return self.table.fontMetrics().horizontalAdvance(text) + 24  # the cell's padding (and a header's arrow)

    def _fit_ran_on(self, _parent: QModelIndex, first: int, last: int) -> None:
        header = self.table.horizontalHeader()
        texts = {self.results.ran_on(r) for r in self.results.results[first : last + 1] if not r.error}
        widest = max((self._ran_on_width(t) for t in texts), default=0)
        if widest > header.sectionSize(ResultsModel.RAN_ON):
            header.resizeSection(ResultsModel.RAN_ON, widest)
        rows = self.results.results[first : last + 1]
        label = max((self._text_width(self.results.cell(r, 1)) for r in rows if not r.error), default=0)
        if label > header.sectionSize(1):
            header.resizeSection(1, label)

