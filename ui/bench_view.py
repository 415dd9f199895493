"""Benchmark: pick models and devices, run with progress and cancel, see latency per device and its
distribution, the full results table, and the history of runs; export CSV and PNG.

Requests go out as signals (wired to the bench host by the app); results come back to slots. The
charts (pyqtgraph) are created the first time the view is shown or has something to draw.

The setup card (models, devices, runs, batch) is ui.bench_setup; the words of the table and the
history are ui.bench_text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engines.bench.data import BenchModel, BenchProgress, BenchRun, DeviceResult
from engines.bench.export import write_csv
from engines.errors import StudioError
from ui.bench_setup import BenchSetup
from ui.bench_text import COLUMNS, result_cells, run_title
from ui.icons import icon
from ui.placement_chip import chip_color, chip_icon_name, describe_placement, placement_from_dict
from ui.widgets import MARGIN, SPACING, BannerArea, Card, EmptyState, ViewHeader, muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Benchmark", text)


RAN_ON_WIDTH = 280  # the full reason is in the cell's tooltip


class BenchView(BenchSetup, QWidget):
    run_requested = Signal(object)  # BenchConfig
    cancel_requested = Signal()
    refresh_requested = Signal()  # list the models again
    clear_history_requested = Signal()
    status_changed = Signal(str)  # what the worker is doing, for the status bar ("" when idle)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.models: list[BenchModel] = []
        self.runs: list[BenchRun] = []  # history, oldest first
        self.current: BenchRun | None = None
        self.live: list[DeviceResult] = []  # results of the run in progress
        self.busy = False
        self.charts: Any = None  # ui.bench_charts.BenchCharts, made on first use
        self.last_export_dir = str(Path.home())

        # Below its usable minimum (charts that can be read, a table with a few rows) the view scrolls
        # instead of squashing the charts into each other.
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        content = QWidget()
        self.scroll_area.setWidget(content)
        outer.addWidget(self.scroll_area)
        layout = QVBoxLayout(content)
        layout.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        layout.setSpacing(SPACING)
        header = ViewHeader(
            tr("Benchmark"),
            tr(
                "The same model on every device of this machine, side by side, with the overhead against raw "
                "ONNX Runtime measured in the same run."
            ),
        )
        layout.addWidget(header)
        self.banners = BannerArea()
        layout.addWidget(self.banners)
        layout.addWidget(self._build_setup())
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setChildrenCollapsible(False)
        split.addWidget(self._build_charts_card())
        split.addWidget(self._build_history_card())
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        vertical = QSplitter(Qt.Orientation.Vertical)
        vertical.setChildrenCollapsible(False)
        vertical.addWidget(split)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.setWordWrap(False)
        self.table.setMinimumHeight(170)  # the header and four rows
        self.table.setAccessibleName(tr("Benchmark results"))
        vertical.addWidget(self.table)
        vertical.setStretchFactor(0, 2)
        vertical.setStretchFactor(1, 1)
        layout.addWidget(vertical, 1)
        self._update_buttons()

    # --- construction -----------------------------------------------------------------------------
    def _build_charts_card(self) -> QWidget:
        card = Card()
        row = QHBoxLayout()
        title = QLabel(tr("Latency"))
        title.setObjectName("SectionTitle")
        row.addWidget(title)
        row.addStretch(1)
        row.addWidget(muted_label(tr("Model"), word_wrap=False))
        self.chart_model = QComboBox()
        self.chart_model.setAccessibleName(tr("Model shown in the charts"))
        self.chart_model.setMinimumWidth(200)
        self.chart_model.currentTextChanged.connect(lambda _t: self._draw_charts())
        row.addWidget(self.chart_model)
        self.csv_button = QPushButton(tr("Export CSV…"))
        self.csv_button.setToolTip(tr("Every result of the shown run, one row per model and device"))
        self.csv_button.clicked.connect(self._choose_csv)
        self.png_button = QPushButton(tr("Export PNG…"))
        self.png_button.setToolTip(tr("The charts as shown"))
        self.png_button.clicked.connect(self._choose_png)
        row.addWidget(self.csv_button)
        row.addWidget(self.png_button)
        card.body.addLayout(row)
        self.chart_stack = QStackedWidget()
        self.empty = EmptyState(
            "benchmark",
            tr("No benchmark yet"),
            tr("Choose models and devices, then run the benchmark (about a minute)."),
        )
        self.chart_stack.addWidget(self.empty)
        card.body.addWidget(self.chart_stack, 1)
        self.charts_card = card
        return card

    def _build_history_card(self) -> QWidget:
        card = Card()
        title = QLabel(tr("History"))
        title.setObjectName("SectionTitle")
        card.body.addWidget(title)
        self.history_list = QListWidget()
        self.history_list.setWordWrap(True)
        self.history_list.currentItemChanged.connect(self._history_selected)
        card.body.addWidget(self.history_list, 1)
        row = QHBoxLayout()
        row.addWidget(muted_label(tr("Stored locally"), word_wrap=False), 1)
        self.clear_button = QPushButton(tr("Clear"))
        self.clear_button.setToolTip(tr("Forget every stored benchmark run"))
        self.clear_button.clicked.connect(self.clear_history_requested)
        row.addWidget(self.clear_button)
        card.body.addLayout(row)
        card.setMinimumWidth(240)
        return card

    def _ensure_charts(self) -> Any:
        if self.charts is None:
            from ui.bench_charts import BenchCharts

            self.charts = BenchCharts()
            self.chart_stack.addWidget(self.charts)
        return self.charts

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.current is not None or self.live:
            self._draw_charts()

    def _update_buttons(self) -> None:
        ready = bool(self.selected_models()) and bool(self.selected_devices())
        self.run_button.setEnabled(ready and not self.busy)
        self.cancel_button.setEnabled(self.busy)
        shown = self.shown_run() is not None
        self.csv_button.setEnabled(shown)
        self.png_button.setEnabled(shown)
        self.clear_button.setEnabled(bool(self.runs) and not self.busy)

    def shown_run(self) -> BenchRun | None:
        return self.current

    # --- requests -----------------------------------------------------------------------------------
    def request_run(self) -> bool:
        if self.busy:
            return False
        try:
            config = self.config()
        except StudioError as exc:
            self.banners.show_error(exc)
            return False
        self.banners.clear()
        self.busy = True
        self.live = []
        self.current = None
        self.progress.setValue(0)
        self.progress.show()
        self.stage_label.setText(tr("Starting…"))
        self._fill_table([])
        self._update_buttons()
        self.run_requested.emit(config)
        return True

    def request_cancel(self) -> None:
        if self.busy:
            self.stage_label.setText(tr("Cancelling…"))
            self.cancel_button.setEnabled(False)
            self.cancel_requested.emit()

    # --- slots wired to the bench host ---------------------------------------------------------------
    def show_status(self, text: str) -> None:
        """Re-emitted in the GUI thread, for the window's status bar."""
        self.status_changed.emit(text)

    def show_progress(self, progress: BenchProgress) -> None:
        self.progress.setValue(round(progress.fraction * 1000))
        self.stage_label.setText(f"{progress.stage} · {progress.detail}" if progress.detail else progress.stage)

    def add_result(self, result: DeviceResult) -> None:
        self.live.append(result)
        self._fill_table(self.live)
        self._refresh_chart_models(self.live)
        self._draw_charts()

    def show_finished(self, run: BenchRun) -> None:
        self.busy = False
        self.live = []
        self.progress.hide()
        self.stage_label.setText(f"Finished in {run.seconds:.0f} s.")
        if all(r.run_id != run.run_id for r in self.runs):
            self.runs.append(run)
        self._fill_history()
        self.show_run(run)

    def show_cancelled(self) -> None:
        self.busy = False
        self.progress.hide()
        kept = len(self.live)
        self.stage_label.setText(f"Cancelled ({kept} device result{'s' if kept != 1 else ''} measured, not saved).")
        self._update_buttons()

    def show_error(self, error: object) -> None:
        """A run that failed as a whole, or a history that could not be read or written."""
        if self.busy:
            self.busy = False
            self.progress.hide()
            self.stage_label.setText("")
        self.banners.show_error(error)
        self._update_buttons()

    def set_history(self, runs: Sequence[BenchRun]) -> None:
        self.runs = list(runs)
        self._fill_history()
        if self.current is None and self.runs and not self.busy:
            self.show_run(self.runs[-1])
        if not self.runs and not self.busy:
            self.current = None
            self._fill_table([])
            self.chart_stack.setCurrentWidget(self.empty)
        self._update_buttons()

    # --- showing a run ------------------------------------------------------------------------------
    def show_run(self, run: BenchRun) -> None:
        self.current = run
        self._fill_table(run.results)
        self._refresh_chart_models(run.results)
        self._draw_charts()
        self._select_history(run.run_id)
        self._update_buttons()

    def _refresh_chart_models(self, results: Sequence[DeviceResult]) -> None:
        models = list(dict.fromkeys(r.model for r in results))
        current = self.chart_model.currentText()
        self.chart_model.blockSignals(True)
        self.chart_model.clear()
        self.chart_model.addItems(models)
        if current in models:
            self.chart_model.setCurrentText(current)
        self.chart_model.blockSignals(False)

    def _draw_charts(self) -> None:
        results = self.live if self.busy else (self.current.results if self.current else ())
        model = self.chart_model.currentText()
        chosen = [r for r in results if r.model == model]
        if not chosen:
            self.chart_stack.setCurrentWidget(self.empty)
            return
        charts = self._ensure_charts()
        charts.show_results(chosen)
        self.chart_stack.setCurrentWidget(charts)

    def _fill_table(self, results: Sequence[DeviceResult]) -> None:
        self.table.setRowCount(len(results))
        for row, result in enumerate(results):
            for column, text in enumerate(result_cells(result)):
                item = QTableWidgetItem(text)
                if column == 2:
                    placement = placement_from_dict(result.placement) if result.ok else None
                    if placement is not None:
                        chip = describe_placement(placement, result.device)
                        item.setIcon(icon(chip_icon_name(chip.kind), chip_color(chip.kind)))
                        item.setToolTip(chip.details)
                    else:
                        item.setToolTip(text)
                if column >= 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, column, item)
        self.table.resizeColumnsToContents()
        self.table.setColumnWidth(2, min(self.table.columnWidth(2), RAN_ON_WIDTH))

    def _fill_history(self) -> None:
        self.history_list.blockSignals(True)
        self.history_list.clear()
        for run in reversed(self.runs):
            item = QListWidgetItem(run_title(run))
            item.setData(Qt.ItemDataRole.UserRole, run.run_id)
            item.setToolTip(f"Run {run.run_id}, {run.seconds:.0f} s")
            self.history_list.addItem(item)
        self.history_list.blockSignals(False)
        if self.current is not None:
            self._select_history(self.current.run_id)

    def _select_history(self, run_id: str) -> None:
        self.history_list.blockSignals(True)
        for row in range(self.history_list.count()):
            item = self.history_list.item(row)
            if item.data(Qt.ItemDataRole.UserRole) == run_id:
                self.history_list.setCurrentRow(row)
        self.history_list.blockSignals(False)

    def _history_selected(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if item is None or self.busy:
            return
        run_id = item.data(Qt.ItemDataRole.UserRole)
        run = next((r for r in self.runs if r.run_id == run_id), None)
        if run is not None:
            self.show_run(run)

    # --- export -------------------------------------------------------------------------------------
    def export_csv(self, path: str | Path) -> int:
        """Write the shown run as CSV. Returns the number of rows."""
        run = self.shown_run()
        if run is None:
            raise StudioError("There is no benchmark to export yet.", "Run a benchmark first.")
        try:
            with open(path, "w", encoding="utf-8", newline="") as handle:
                return write_csv([run], handle)
        except OSError as exc:
            raise StudioError(f"Could not write {path}: {exc.strerror or exc}.", "Choose another folder.") from exc

    def export_png(self, path: str | Path) -> None:
        """Save the charts as shown (the chart card, at screen resolution)."""
        if self.shown_run() is None:
            raise StudioError("There is no chart to export yet.", "Run a benchmark first.")
        self._draw_charts()
        if not self.charts_card.grab().save(str(path)):
            raise StudioError(f"Could not write {path}.", "Choose another folder or file name (.png).")

    def _choose_csv(self) -> None:
        self._export("CSV files (*.csv)", ".csv", self.export_csv)

    def _choose_png(self) -> None:
        self._export("PNG images (*.png)", ".png", self.export_png)

    def _export(self, filter_text: str, suffix: str, write: Any) -> None:
        run = self.shown_run()
        if run is None:
            return
        default = str(Path(self.last_export_dir) / f"npu-studio-bench-{run.run_id}{suffix}")
        path, _ = QFileDialog.getSaveFileName(self, tr("Export benchmark"), default, filter_text)
        if not path:
            return
        if not path.lower().endswith(suffix):
            path += suffix
        self.last_export_dir = str(Path(path).parent)
        try:
            write(path)
        except StudioError as exc:
            self.banners.show_error(exc)
            return
        self.banners.show_message(f"Saved {path}.", severity="info")
