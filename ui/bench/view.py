"""Benchmark: pick models and devices, run with progress and cancel, see latency per device and its
distribution, the results table with where each device really ran, and the history of runs; export
CSV and PNG.

Composed of two cards: the setup (ui.bench.setup: models, devices, runs, batch, progress) and the
results (ui.bench.results: charts, table, history). The view holds the runs and the run in progress;
requests go out as signals (wired to the bench host by the app), results come back to slots.

At 1280x720 the whole view fits without scrolling (the charts and the table's rows above the fold);
below its usable minimum (960x540, a 1920x1080 screen at 200 %) it scrolls rather than squash the
charts into each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QShowEvent
from PySide6.QtWidgets import QFileDialog, QFrame, QScrollArea, QVBoxLayout, QWidget

from engines import (
    BenchModel,
    BenchProgress,
    BenchRun,
    Device,
    DeviceResult,
    StudioError,
    default_path,
    write_bench_csv,
)
from ui.bench.results import BenchResultsCard
from ui.bench.setup import BenchSetupCard
from ui.common.widgets import MARGIN, SPACING, BannerArea, ViewHeader


def tr(text: str) -> str:
    return QCoreApplication.translate("Benchmark", text)


class BenchView(QWidget):
    run_requested = Signal(object)  # BenchConfig
    cancel_requested = Signal()
    clear_history_requested = Signal()
    status_changed = Signal(str)  # what the worker is doing, for the status bar ("" when idle)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[BenchRun] = []  # history, oldest first
        self.current: BenchRun | None = None
        self.live: list[DeviceResult] = []  # results of the run in progress
        self.busy = False
        self.last_export_dir = str(Path.home())

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
        layout.addWidget(
            ViewHeader(
                tr("Benchmark"),
                tr("The same model on every device of this machine, side by side, against raw ONNX Runtime in the "
                   "same run."),
            )
        )
        self.banners = BannerArea()
        layout.addWidget(self.banners)
        self.setup = BenchSetupCard()
        self.setup.run_clicked.connect(self.request_run)
        self.setup.cancel_clicked.connect(self.request_cancel)
        self.setup.changed.connect(self._update_buttons)
        layout.addWidget(self.setup)
        self.results = BenchResultsCard()
        self.results.run_chosen.connect(self._history_selected)
        self.results.clear_clicked.connect(self.clear_history_requested)
        self.results.csv_clicked.connect(lambda: self._export("CSV files (*.csv)", ".csv", self.export_csv))
        self.results.png_clicked.connect(lambda: self._export("PNG images (*.png)", ".png", self.export_png))
        layout.addWidget(self.results, 1)
        self._update_buttons()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.results.redraw()  # charts made while hidden are laid out at their real size

    def _update_buttons(self) -> None:
        self.setup.set_running(self.busy, self.setup.ready())
        self.results.set_buttons(self.current is not None, bool(self.runs) and not self.busy)

    # --- requests -----------------------------------------------------------------------------------
    def request_run(self) -> bool:
        if self.busy:
            return False
        try:
            config = self.setup.config()
        except StudioError as exc:
            self.banners.show_error(exc, cause="run")
            return False
        self.banners.clear()
        self.busy = True
        self.live = []
        self.current = None
        self.setup.start()
        self.results.show_results([])
        self._update_buttons()
        self.run_requested.emit(config)
        return True

    def request_cancel(self) -> None:
        if self.busy:
            self.setup.stage_label.setText(tr("Cancelling…"))
            self.setup.cancel_button.setEnabled(False)
            self.cancel_requested.emit()

    # --- slots wired to the bench host ---------------------------------------------------------------
    def show_status(self, text: str) -> None:
        """Re-emitted in the GUI thread, for the window's status bar."""
        self.status_changed.emit(text)

    def set_models(self, models: Sequence[BenchModel]) -> None:
        self.setup.set_models(models)
        if models:
            self.banners.clear("models")
        else:
            self.banners.show_message(
                tr("No models to benchmark."),
                tr("Build the demo models or import a model in the Models view."),
                "warning",
                cause="models",
            )

    def set_devices(self, devices: Sequence[Device]) -> None:
        self.setup.set_devices(devices)

    def show_progress(self, progress: BenchProgress) -> None:
        self.setup.show_progress(progress)

    def add_result(self, result: DeviceResult) -> None:
        self.live.append(result)
        self.results.show_results(self.live)

    def show_finished(self, run: BenchRun) -> None:
        self.busy = False
        self.live = []
        self.setup.stop(f"Finished in {run.seconds:.0f} s.")
        if all(r.run_id != run.run_id for r in self.runs):
            self.runs.append(run)
        self.show_run(run)

    def show_cancelled(self) -> None:
        self.busy = False
        kept = len(self.live)
        self.setup.stop(f"Cancelled ({kept} device result{'s' if kept != 1 else ''} measured, not saved).")
        self._update_buttons()

    def show_error(self, error: object) -> None:
        """A run that failed as a whole, or a history that could not be read or written."""
        if self.busy:
            self.busy = False
            self.setup.stop("")
        self.banners.show_error(error, cause="run")
        self._update_buttons()

    def set_history(self, runs: Sequence[BenchRun]) -> None:
        self.runs = list(runs)
        if self.current is not None and all(r.run_id != self.current.run_id for r in self.runs):
            self.current = None  # the history was cleared
        if self.current is None and self.runs and not self.busy:
            self.show_run(self.runs[-1])
            return
        if self.current is None and not self.busy:
            self.results.show_results([])
        self.results.set_history(self.runs, self.current.run_id if self.current else "")
        self._update_buttons()

    # --- showing a run ------------------------------------------------------------------------------
    def show_run(self, run: BenchRun) -> None:
        self.current = run
        self.results.show_results(run.results)
        self.results.set_history(self.runs, run.run_id)
        self._update_buttons()

    def _history_selected(self, run_id: str) -> None:
        if self.busy:
            if self.current is not None:
                self.results.select_run(self.current.run_id)
            return
        run = next((r for r in self.runs if r.run_id == run_id), None)
        if run is not None:
            self.show_run(run)

    # --- export -------------------------------------------------------------------------------------
    def export_csv(self, path: str | Path) -> int:
        """Write the shown run as CSV. Returns the number of rows."""
        run = self.current
        if run is None:
            raise StudioError("There is no benchmark to export yet.", "Run a benchmark first.")
        try:
            with open(path, "w", encoding="utf-8", newline="") as handle:
                return write_bench_csv([run], handle)
        except OSError as exc:
            raise StudioError(f"Could not write {path}: {exc.strerror or exc}.", "Choose another folder.") from exc

    def export_png(self, path: str | Path) -> None:
        """Save the charts as shown (at screen resolution)."""
        if self.current is None or self.results.charts is None:
            raise StudioError("There is no chart to export yet.", "Run a benchmark first.")
        if not self.results.charts.grab().save(str(path)):
            raise StudioError(f"Could not write {path}.", "Choose another folder or file name (.png).")

    def _export(self, filter_text: str, suffix: str, write: Callable[[str], object]) -> None:
        run = self.current
        if run is None:
            return
        default = default_path(self.last_export_dir, f"npu-studio-bench-{run.run_id}", suffix=suffix)
        path, _ = QFileDialog.getSaveFileName(self, tr("Export benchmark"), default, filter_text)
        if not path:
            return
        if not path.lower().endswith(suffix):
            path += suffix
        self.last_export_dir = str(Path(path).parent)
        try:
            write(path)
        except StudioError as exc:
            self.banners.show_error(exc, cause="export")
            return
        saved = self.banners.show_message(f"Saved {path}.", severity="info", cause="export")
        folder = str(Path(path).parent)
        saved.add_action(tr("Show in folder"), lambda: self._open_folder(folder))

    @staticmethod
    def _open_folder(folder: str) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(folder))
