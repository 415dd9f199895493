"""Benchmark: pick models and devices, run with progress and cancel, see latency per device and its
distribution, the full results table, and the history of runs; export CSV and PNG.

Requests go out as signals (wired to the bench host by the app); results come back to slots. The
charts (pyqtgraph) are created the first time the view is shown or has something to draw.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engines.bench.data import (
    ALL_DEVICES,
    BenchConfig,
    BenchModel,
    BenchProgress,
    BenchRun,
    DeviceResult,
    write_csv,
)
from engines.errors import StudioError
from engines.types import Device, DeviceType
from ui.icons import icon
from ui.placement_chip import chip_color, chip_icon_name, describe_placement, placement_from_dict
from ui.widgets import MARGIN, SPACING, BannerArea, Card, EmptyState, ViewHeader, muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Benchmark", text)


RAN_ON_WIDTH = 280  # the full reason is in the cell's tooltip
DEFAULT_MODELS = ("efficientnet-lite0", "smollm2-135m-instruct")  # checked at first; others on request
COLUMNS = (
    "Model",
    "Device",
    "Ran on",
    "Session first / cached (s)",
    "p50",
    "p90",
    "p99",
    "Unit",
    "Batch 1 /s",
    "Batch N /s",
    "vs raw",
    "First token (ms)",
    "Prefill tok/s",
    "Decode tok/s",
    "CPU %",
    "Peak RSS (MB)",
)


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def result_cells(r: DeviceResult) -> list[str]:
    """One table row (plain text)."""
    if not r.ok:
        return [r.model, r.device, f"{r.status}: {r.reason}"] + ["—"] * (len(COLUMNS) - 3)
    s, lat, res, chat = r.sessions, r.latency, r.resources, r.chat
    ratio = chat.decode_ratio if chat is not None else r.overhead_ratio
    placement = placement_from_dict(r.placement)
    if placement is not None:
        ran_on = describe_placement(placement, r.device).text
    else:
        ran_on = r.ran_on + (f" (fell back: {r.fallback_reason})" if r.fell_back else "")
    return [
        r.model,
        r.label,
        ran_on,
        f"{s.first_s:.2f} / {s.cached_s:.2f}" if s else "—",
        _num(lat.p50_ms if lat else None),
        _num(lat.p90_ms if lat else None),
        _num(lat.p99_ms if lat else None),
        r.latency_unit,
        _num(r.throughput_batch1, 1),
        f"{_num(r.throughput_batch_n, 1)} (×{r.batch})" if r.throughput_batch_n is not None else "—",
        _num(ratio, 3),
        _num(chat.time_to_first_token_ms if chat else None, 0),
        _num(chat.prefill_tokens_per_s if chat else None, 0),
        _num(chat.decode_tokens_per_s if chat else None, 1),
        _num(res.cpu_percent if res else None, 0),
        _num(res.peak_rss_mb if res else None, 0),
    ]


def run_title(run: BenchRun) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started))
    parts = []
    for model in run.models():
        measured = [r for r in run.for_model(model) if r.ok and r.latency is not None]
        best = min(measured, key=lambda r: r.latency.p50_ms if r.latency else 0.0, default=None)
        if best is not None and best.latency is not None:
            parts.append(f"{model}: {best.label} {best.latency.p50_ms:.1f} {best.latency_unit}")
        else:
            parts.append(f"{model}: not measured")
    return f"{when} · " + " · ".join(parts)


class BenchView(QWidget):
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
    def _build_setup(self) -> QWidget:
        card = Card()
        grid = QGridLayout()
        grid.setHorizontalSpacing(18)
        grid.setVerticalSpacing(6)
        grid.addWidget(muted_label(tr("Models"), word_wrap=False), 0, 0)
        self.model_list = QListWidget()
        self.model_list.setMaximumHeight(78)
        self.model_list.setMinimumWidth(330)
        self.model_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.model_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.model_list.itemChanged.connect(lambda _item: self._update_buttons())
        grid.addWidget(self.model_list, 1, 0, 2, 1)
        grid.addWidget(muted_label(tr("Devices"), word_wrap=False), 0, 1)
        devices = QHBoxLayout()
        self.device_boxes: dict[DeviceType, QCheckBox] = {}
        for device in ALL_DEVICES:
            box = QCheckBox(device.value)
            box.setChecked(True)
            box.toggled.connect(lambda _on: self._update_buttons())
            self.device_boxes[device] = box
            devices.addWidget(box)
        grid.addLayout(devices, 1, 1)
        self.device_note = muted_label(tr("Devices this machine lacks are listed with the reason, not skipped."))
        grid.addWidget(self.device_note, 2, 1)
        grid.addWidget(muted_label(tr("Runs"), word_wrap=False), 0, 2)
        self.runs_box = QSpinBox()
        self.runs_box.setRange(10, 5000)
        self.runs_box.setValue(100)
        self.runs_box.setToolTip(tr("Timed calls per path at batch 1 (the engine and raw ONNX Runtime each)"))
        grid.addWidget(self.runs_box, 1, 2)
        grid.addWidget(muted_label(tr("Batch"), word_wrap=False), 0, 3)
        self.batch_box = QSpinBox()
        self.batch_box.setRange(1, 64)
        self.batch_box.setValue(8)
        self.batch_box.setToolTip(tr("Batch size for the throughput run (image models)"))
        grid.addWidget(self.batch_box, 1, 3)
        buttons = QHBoxLayout()
        self.run_button = QPushButton(tr("Run benchmark"))
        self.run_button.setObjectName("Primary")
        self.run_button.clicked.connect(self.request_run)
        self.cancel_button = QPushButton(tr("Cancel"))
        self.cancel_button.clicked.connect(self.request_cancel)
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        grid.addLayout(buttons, 1, 4)
        grid.setColumnStretch(1, 1)
        card.body.addLayout(grid)
        progress_row = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(8)
        self.stage_label = muted_label("", word_wrap=False)
        progress_row.addWidget(self.progress, 1)
        progress_row.addWidget(self.stage_label, 2)
        card.body.addLayout(progress_row)
        self.progress.hide()
        return card

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

    # --- state --------------------------------------------------------------------------------------
    def selected_models(self) -> list[BenchModel]:
        chosen = []
        for row in range(self.model_list.count()):
            item = self.model_list.item(row)
            if item.checkState() == Qt.CheckState.Checked:
                chosen.append(self.models[row])
        return chosen

    def selected_devices(self) -> list[DeviceType]:
        return [d for d, box in self.device_boxes.items() if box.isChecked()]

    def config(self) -> BenchConfig:
        return BenchConfig(
            models=tuple(m.folder for m in self.selected_models()),
            devices=tuple(self.selected_devices()),
            runs=self.runs_box.value(),
            batch=self.batch_box.value(),
        )

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
    def set_models(self, models: Sequence[BenchModel]) -> None:
        checked = {m.folder for m in self.selected_models()} if self.models else None
        self.models = list(models)
        self.model_list.blockSignals(True)
        self.model_list.clear()
        for model in self.models:
            # The folder name tells two builds of one model apart ("...-qdq"); the full title is the tooltip.
            short = model.title.split(" (", 1)[0]
            label = short if model.name.lower() == short.lower() else f"{short} · {model.name}"
            kind = "image classifier" if model.kind == "vision" else "chat"
            item = QListWidgetItem(f"{label}  ·  {kind}")
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            on = model.folder in checked if checked is not None else self._checked_at_first(model)
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
            item.setToolTip(f"{model.title}\n{model.folder}")
            self.model_list.addItem(item)
        self.model_list.blockSignals(False)
        if not self.models:
            self.banners.show_message(
                tr("No models to benchmark."),
                tr("Build the demo models or import a model in the Models view."),
                "warning",
            )
        self._update_buttons()

    def _checked_at_first(self, model: BenchModel) -> bool:
        """The demo models when they are there; otherwise the first model of each kind."""
        if any(m.name in DEFAULT_MODELS for m in self.models):
            return model.name in DEFAULT_MODELS
        return next(m for m in self.models if m.kind == model.kind) == model

    def set_devices(self, devices: Sequence[Device]) -> None:
        """Say which device types this machine lacks (they still run: the results list the reason)."""
        missing = []
        for device_type, box in self.device_boxes.items():
            usable = any(d.usable and d.type == device_type for d in devices)
            reasons = [d.reason for d in devices if d.type == device_type and d.reason]
            box.setToolTip("" if usable else (reasons[0] if reasons else f"No {device_type.value} found."))
            if not usable:
                missing.append(device_type.value)
        if missing:
            self.device_note.setText(
                f"Not on this machine: {', '.join(missing)}. They stay in the results, with the reason."
            )
        else:
            self.device_note.setText(tr("Every device type is available on this machine."))

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
