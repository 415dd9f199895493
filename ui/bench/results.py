"""Benchmark: the results card. One model at a time (the Model box): its two charts side by side and
its table (one row per device, the placement chip first), the run shown picked from the history (the
Run box), exports and clearing the history as signals for the view.

The charts (pyqtgraph, ui.bench.charts) are created the first time there is something to draw, so the
app's start-up does not pay for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QStackedWidget, QToolButton, QWidget

from engines import BenchRun, DeviceResult
from ui.bench.table import BenchTable
from ui.bench.text import run_title, run_when
from ui.common.icons import icon
from ui.common.plain import plain_text, plain_tooltip
from ui.common.widgets import Card, EmptyState, muted_label

if TYPE_CHECKING:
    from ui.bench.charts import BenchCharts


def tr(text: str) -> str:
    return QCoreApplication.translate("Benchmark", text)


class BenchResultsCard(Card):
    run_chosen = Signal(str)  # run_id picked in the history
    clear_clicked = Signal()
    csv_clicked = Signal()
    png_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.charts: BenchCharts | None = None
        self.results: list[DeviceResult] = []  # the run shown (or measured so far), every model
        row = QHBoxLayout()
        row.setSpacing(8)
        title = QLabel(tr("Results"))
        title.setObjectName("SectionTitle")
        row.addWidget(title)
        row.addStretch(1)
        row.addWidget(muted_label(tr("Model"), word_wrap=False))
        self.model_box = QComboBox()
        self.model_box.setAccessibleName(tr("Model shown"))
        self.model_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.model_box.currentIndexChanged.connect(lambda _i: self._draw())
        row.addWidget(self.model_box)
        row.addWidget(muted_label(tr("Run"), word_wrap=False))
        self.history_box = QComboBox()
        self.history_box.setAccessibleName(tr("Benchmark run shown"))
        self.history_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.history_box.setToolTip(tr("The runs stored on this computer, newest first"))
        self.history_box.currentIndexChanged.connect(self._history_picked)
        row.addWidget(self.history_box)
        self.clear_button = QToolButton()
        self.clear_button.setIcon(icon("delete"))
        self.clear_button.setAccessibleName(tr("Clear the history"))
        self.clear_button.setToolTip(tr("Forget every stored benchmark run"))
        self.clear_button.clicked.connect(self.clear_clicked)
        row.addWidget(self.clear_button)
        self.csv_button = QPushButton(icon("export"), tr("CSV…"))
        self.csv_button.setAccessibleName(tr("Export CSV"))
        self.csv_button.setToolTip(tr("Every result of the shown run, one row per model and device"))
        self.csv_button.clicked.connect(self.csv_clicked)
        self.png_button = QPushButton(icon("export"), tr("PNG…"))
        self.png_button.setAccessibleName(tr("Export PNG"))
        self.png_button.setToolTip(tr("The charts as shown"))
        self.png_button.clicked.connect(self.png_clicked)
        row.addWidget(self.csv_button)
        row.addWidget(self.png_button)
        self.body.addLayout(row)
        self.chart_stack = QStackedWidget()
        self.empty = EmptyState(
            "benchmark",
            tr("No benchmark yet"),
            tr("Choose models and devices, then run the benchmark (about a minute)."),
        )
        self.chart_stack.addWidget(self.empty)
        self.body.addWidget(self.chart_stack, 1)
        self.table = BenchTable()
        self.table.setAccessibleName(tr("Benchmark results"))
        self.table.hide()
        self.body.addWidget(self.table, 0, Qt.AlignmentFlag.AlignLeft)

    # --- what is shown ------------------------------------------------------------------------------
    def show_results(self, results: Sequence[DeviceResult]) -> None:
        """A run's results (or those measured so far): the Model box lists its models, the charts and the
        table show the one chosen."""
        self.results = list(results)
        models = list(dict.fromkeys(r.model for r in self.results))
        current = self.model_box.currentData()
        with QSignalBlocker(self.model_box):
            self.model_box.clear()
            for model in models:
                self.model_box.addItem(plain_text(model, one_line=True), model)
            index = self.model_box.findData(current)
            self.model_box.setCurrentIndex(index if index >= 0 else 0)
        self._draw()

    def shown_model(self) -> str:
        data = self.model_box.currentData()
        return data if isinstance(data, str) else ""

    def set_history(self, runs: Sequence[BenchRun], current: str) -> None:
        """The stored runs, newest first; `current` is the run_id shown."""
        with QSignalBlocker(self.history_box):
            self.history_box.clear()
            for number, run in enumerate(reversed(runs)):
                latest = tr(" (latest)") if number == 0 else ""
                self.history_box.addItem(run_when(run) + latest, run.run_id)
                self.history_box.setItemData(
                    self.history_box.count() - 1, plain_tooltip(run_title(run)), Qt.ItemDataRole.ToolTipRole
                )
            self.select_run(current)
        self.history_box.setEnabled(self.history_box.count() > 0)

    def select_run(self, run_id: str) -> None:
        with QSignalBlocker(self.history_box):
            index = self.history_box.findData(run_id)
            if index >= 0:
                self.history_box.setCurrentIndex(index)

    def set_buttons(self, exportable: bool, clearable: bool) -> None:
        self.csv_button.setEnabled(exportable)
        self.png_button.setEnabled(exportable)
        self.clear_button.setEnabled(clearable)

    def ensure_charts(self) -> BenchCharts:
        if self.charts is None:
            from ui.bench.charts import BenchCharts

            self.charts = BenchCharts()
            self.chart_stack.addWidget(self.charts)
        return self.charts

    def _draw(self) -> None:
        model = self.shown_model()
        chosen = [r for r in self.results if r.model == model]
        self.table.show_results(chosen)
        self.table.setVisible(bool(chosen))
        if not chosen:
            self.chart_stack.setCurrentWidget(self.empty)
            return
        charts = self.ensure_charts()
        charts.show_results(chosen)
        self.chart_stack.setCurrentWidget(charts)

    def redraw(self) -> None:
        if self.results:
            self._draw()

    def _history_picked(self, index: int) -> None:
        run_id = self.history_box.itemData(index)
        if isinstance(run_id, str):
            self.run_chosen.emit(run_id)
