"""Classify: open, drop or paste photos (or a whole folder, or a sample photo); preview, top-5 bars,
per-photo times, one placement chip, and a results table for batches with a summary and CSV export.

The device chip, the device banner and the status text come from one derived state (ui.device_state)
recomputed on every change of device, strict, model and result, so they can never disagree
(ui.classify_state). What the user asks (open, paste, a folder, cancel, export) is ui.classify_requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDropEvent, QImage, QKeySequence
from PySide6.QtWidgets import (
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.qtcompat import emit
from engines.errors import ImageError
from engines.types import Classification, DeviceChoice, Placement
from ui.classify_parts import (
    IMAGE_SUFFIXES,
    DropZone,
    ProbabilityBars,
    ResultsModel,
    batch_summary,
    expand_paths,
    load_preview,
    placement_badge_kind,
)
from ui.classify_requests import ClassifyRequests
from ui.classify_result import BatchCard, ResultCard
from ui.classify_state import ClassifyDeviceState
from ui.device_picker import DeviceChoiceModel, DevicePicker
from ui.device_state import DeviceState, Outcome
from ui.icons import icon
from ui.model_picker import ModelPicker
from ui.placement_chip import PlacementChip
from ui.theme import colors
from ui.widgets import MARGIN, SPACING, Banner, BannerArea, Spinner, ViewHeader, muted_label

# The parts that moved to ui.classify_parts stay importable from here.
__all__ = ["IMAGE_SUFFIXES", "ClassifyView", "ProbabilityBars", "ResultsModel", "expand_paths", "placement_badge_kind"]


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


class ClassifyView(ClassifyRequests, ClassifyDeviceState, QWidget):
    """Requests go out as signals (wired to the vision host by the app); results come back to slots."""

    classify_requested = Signal(list)  # list[str] paths
    classify_image_requested = Signal(bytes, str)  # encoded image, display name
    cancel_requested = Signal()
    model_chosen = Signal(str)  # a library model name picked in the model picker
    work_status = Signal(str)  # what the view is doing now, for the status bar ("" when idle)

    def __init__(self, choice_model: DeviceChoiceModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.choice_model = choice_model
        self.busy = False
        self.last_open_dir = ""
        self.model_name = ""
        self.state: DeviceState | None = None
        self._outcome: Outcome | None = None
        self._loading = ""
        self._state_banner: Banner | None = None
        self._run_key: tuple[DeviceChoice, str] | None = None  # the choice and model of the shown result
        self._stale_note = False
        self._pending: list[Classification] = []
        self._preview_path = ""
        self._summary: dict[str, Any] | None = None
        self._apply_timer = QTimer(self)
        self._apply_timer.setSingleShot(True)
        self._apply_timer.setInterval(100)
        self._apply_timer.timeout.connect(self._apply_pending)
        self._total = 0
        self._done = 0
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader(
            tr("Classify"), tr("Which of 1,000 ImageNet classes is in the photo, and where it ran.")
        )
        self.model_picker = ModelPicker("image-classifier")
        self.model_picker.model_chosen.connect(self._on_model_picked)
        self.header.controls.addWidget(self.model_picker)
        self.picker = DevicePicker(choice_model, compact=True)
        self.header.controls.addWidget(self.picker)
        outer.addWidget(self.header)
        state_row = QHBoxLayout()
        state_row.setSpacing(8)
        self.device_caption = muted_label(tr("Next run:"), word_wrap=False)
        state_row.addWidget(self.device_caption)
        self.device_chip = PlacementChip()
        self.device_chip.setAccessibleName(tr("Where the next photo will run"))
        state_row.addWidget(self.device_chip)
        state_row.addStretch(1)
        outer.addLayout(state_row)
        self.banners = BannerArea()
        outer.addWidget(self.banners)

        actions = QHBoxLayout()
        actions.setSpacing(8)
        self.open_button = QPushButton(icon("open"), tr("Open photos…"))
        self.open_button.setObjectName("Primary")
        self.open_button.setIcon(icon("open", colors().accent_text))
        self.open_button.setShortcut(QKeySequence.StandardKey.Open)
        self.open_button.setToolTip(tr("Open photos (Ctrl+O)"))
        self.open_button.clicked.connect(self.open_files)
        self.folder_button = QPushButton(icon("folder"), tr("Classify a folder…"))
        self.folder_button.clicked.connect(self.open_folder)
        self.paste_button = QPushButton(icon("paste"), tr("Paste"))
        self.paste_button.setToolTip(tr("Classify the image on the clipboard (Ctrl+V)"))
        self.paste_button.setShortcut(QKeySequence.StandardKey.Paste)
        self.paste_button.clicked.connect(self.paste)
        for button in (self.open_button, self.folder_button, self.paste_button):
            actions.addWidget(button)
        actions.addStretch(1)
        self.spinner = Spinner()
        actions.addWidget(self.spinner)
        self.status = muted_label("", word_wrap=False)
        actions.addWidget(self.status)
        self.progress = QProgressBar()
        self.progress.setFixedWidth(180)
        self.progress.setTextVisible(False)
        self.progress.setAccessibleName(tr("Batch progress"))
        self.progress.hide()
        actions.addWidget(self.progress)
        self.cancel_button = QPushButton(icon("stop"), tr("Cancel"))
        self.cancel_button.setToolTip(tr("Stop the batch (Esc)"))
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        actions.addWidget(self.cancel_button)
        outer.addLayout(actions)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setChildrenCollapsible(False)
        top = QSplitter(Qt.Orientation.Horizontal)
        top.setChildrenCollapsible(False)
        self.drop_zone = DropZone()
        self.drop_zone.sample_clicked.connect(lambda path: self.classify_paths([path]))
        top.addWidget(self.drop_zone)
        self.result_card = ResultCard()
        card = self.result_card  # its parts, as the app and tests look at them
        self.result_title, self.result_file, self.hint = card.result_title, card.result_file, card.hint
        self.bars, self.placement_chip, self.latency = card.bars, card.placement_chip, card.latency
        top.addWidget(self.result_card)
        top.setStretchFactor(0, 3)
        top.setStretchFactor(1, 2)
        splitter.addWidget(top)

        self.table_card = BatchCard()
        batch = self.table_card
        self.table_title, self.export_button, self.summary = batch.table_title, batch.export_button, batch.summary
        self.results, self.table = batch.results, batch.table
        self.export_button.clicked.connect(self.export_csv_dialog)
        self.table.clicked.connect(self._row_clicked)
        self.table_card.hide()
        splitter.addWidget(self.table_card)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        outer.addWidget(splitter, 1)

        for widget, name in (
            (self.open_button, tr("Open photos")),
            (self.folder_button, tr("Classify a folder")),
            (self.paste_button, tr("Paste an image")),
            (self.cancel_button, tr("Cancel the batch")),
            (self.export_button, tr("Export the results as CSV")),
        ):
            widget.setAccessibleName(name)
        choice_model.changed.connect(self._on_choice_changed)
        choice_model.devices_changed.connect(self.refresh_state)
        self.refresh_state()

    # --- drag and drop ------------------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        mime = event.mimeData()
        if (mime.hasUrls() and any(u.isLocalFile() for u in mime.urls())) or mime.hasImage():
            event.acceptProposedAction()
            self.drop_zone.set_hover(True)

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:
        self.drop_zone.set_hover(False)

    def dropEvent(self, event: QDropEvent) -> None:
        self.drop_zone.set_hover(False)
        mime = event.mimeData()
        local = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
        if local:
            event.acceptProposedAction()
            self.classify_paths(local)
        elif mime.hasImage():
            event.acceptProposedAction()
            self.classify_image(QImage(mime.imageData()), tr("Dropped image"))

    # --- slots wired to the app -----------------------------------------------------------------------
    def set_model(self, name: str) -> None:
        """The library model this view uses (shown in the picker; the state re-derives)."""
        self.model_name = name
        self.model_picker.set_current(name)
        self.refresh_state()

    def set_model_entries(self, entries: Sequence[Any]) -> None:
        self.model_picker.set_entries(entries)

    def set_model_name(self, name: str) -> None:
        self.set_model(name)

    def show_busy(self, text: str) -> None:
        """Loading or compiling the model (status from the host; "" when the host's job is over)."""
        was_loading, self._loading = self._loading, text
        if text:
            self.spinner.start()
            self.status.setText(text)
        elif not self.busy:
            self.spinner.stop()
            if was_loading and self.status.text() == was_loading:
                self.status.setText("")
        self.refresh_state()

    def show_loaded(self, description: str = "", placement: Placement | None = None) -> None:
        """The model is ready (after a load or compile) and runs where `placement` says."""
        was_loading, self._loading = self._loading, ""
        if placement is not None:
            self._outcome = Outcome(self.choice_model.choice(), self.model_name, placement=placement)
        if not self.busy:
            self.spinner.stop()
            if was_loading and self.status.text() == was_loading:
                self.status.setText("")
        self.refresh_state()

    def show_result(self, result: Classification) -> None:
        """Results arrive in bursts (a batch at a time); they are shown together, a few times a second
        at most, so that a fast batch costs the UI thread little."""
        self._pending.append(result)
        if self._total == 1:
            self._apply_pending()
        elif not self._apply_timer.isActive():
            self._apply_timer.start()

    def _apply_pending(self) -> None:
        self._apply_timer.stop()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        placement = next((r.placement for r in pending if r.placement is not None), None)
        if placement is not None:
            self._outcome = Outcome(self.choice_model.choice(), self.model_name, placement=placement)
        self.results.extend(pending)
        self._done = len(self.results.results)
        if self._total > 1:
            self.progress.setValue(self._done)
            self._set_status(tr("Classifying {done} of {total}…").format(done=self._done, total=self._total))
        # The detail shows the photo in the preview (the first one of a batch).
        shown = next((r for r in pending if r.path == self._preview_path), None)
        if self._total == 1:
            self._show_detail(pending[0], update_preview=False)
        elif shown is not None:
            self._show_detail(shown, update_preview=False)
        if placement is not None:
            self.refresh_state()

    def show_progress(self, done: int, total: int) -> None:
        """Progress comes with each result (show_result); nothing more to draw."""

    def show_finished(self, summary: dict[str, Any] | None = None) -> None:
        self._apply_pending()
        self._summary = summary
        results = self.results.results
        errors = [r for r in results if r.error]
        if self._total > 1:
            seconds = float(summary["seconds"]) if summary and "seconds" in summary else None
            self.summary.setText(batch_summary(results, seconds, self._total))
            done = len(results) - len(errors)
            status = tr("{done} of {total} classified").format(done=done, total=self._total)
        else:
            status = ""
        self._end(status)
        if errors and self._total > 1:
            self.banners.show_message(
                tr("{n} of {total} photos could not be classified.").format(n=len(errors), total=self._total),
                tr("They are listed in the table with the reason."),
                "warning",
            )

    def show_cancelled(self) -> None:
        self._apply_pending()
        self.summary.setText(batch_summary(self.results.results, None, self._total))
        self._end(tr("Cancelled after {done} of {total}").format(done=self._done, total=self._total))

    def show_error(self, error: object) -> Banner:
        """A failure of the run or the model. A bad input belongs to the result; anything else is the
        device state's (it goes when the choice or model changes)."""
        self._apply_pending()
        was_single = self._total == 1 and not self.results.results
        self._loading = ""
        self._end("")
        if isinstance(error, ImageError):
            banner = self.banners.show_error(error)
        else:
            self._outcome = Outcome(self.choice_model.choice(), self.model_name, error=error)
            self.state = None  # force the banner to be (re)shown even if the same error repeats
            self.refresh_state()
            banner = self._state_banner if self._state_banner is not None else self.banners.show_error(error)
        if was_single or not self.results.results:
            self._show_failure(self._preview_path)
        return banner

    # --- internals ----------------------------------------------------------------------------------
    def _set_status(self, text: str) -> None:
        """The view's own status. The window's status bar hears only when a run starts and ends (see
        _begin/_end), not each count: a relayout of the status bar a few times a second costs a batch
        its smoothness."""
        self.status.setText(text)

    def _begin(self, total: int) -> None:
        self.busy = True
        self._total = total
        self._done = 0
        self._pending = []
        self._summary = None
        self._run_key = self._current_key()
        self._stale_note = False
        if self._outcome is not None and self._outcome.error is not None:
            self._outcome = None  # trying again: the old failure no longer stands
        self.results.clear()
        self.results.asked = self.choice_model.choice().describe()
        self.summary.setText("")
        self.banners.clear()
        self._state_banner = None
        self.state = None
        self.spinner.start()
        for button in (self.open_button, self.folder_button, self.paste_button):
            button.setEnabled(False)
        batch = total > 1
        self.table_card.setVisible(batch)
        self.progress.setVisible(batch)
        self.cancel_button.setVisible(batch)
        self.progress.setMaximum(total)
        self.progress.setValue(0)
        self.table_title.setText(tr("Batch results ({n} photos)").format(n=total))
        self._set_status(tr("Classifying…") if total == 1 else tr("Classifying 0 of {n}…").format(n=total))
        emit(self.work_status, tr("Classifying…") if total == 1 else tr("Classifying {n} photos…").format(n=total))
        self.refresh_state()

    def _end(self, status: str) -> None:
        self.busy = False
        self.spinner.stop()
        self.status.setText(status)
        emit(self.work_status, "")
        self.progress.hide()
        self.cancel_button.hide()
        for button in (self.open_button, self.folder_button, self.paste_button):
            button.setEnabled(True)
        single_error = self._total == 1 and self.results.results and self.results.results[0].error
        if single_error:
            result = self.results.results[0]
            name = Path(result.path).name
            self.banners.show_message(tr("Could not classify {name}.").format(name=name), result.error, "error")
        self.refresh_state()

    def _row_clicked(self, index: QModelIndex) -> None:
        if 0 <= index.row() < len(self.results.results):
            self._show_detail(self.results.results[index.row()], update_preview=True)

    def _show_failure(self, path: str) -> None:
        """Nothing of an earlier photo stays next to the one that failed."""
        self.result_card.show_failure(path)

    def _show_detail(self, result: Classification, update_preview: bool) -> None:
        name = Path(result.path).name if result.path != "<bytes>" else tr("Pasted image")
        if update_preview and result.path != "<bytes>":
            image = load_preview(result.path)
            if not image.isNull():
                self.drop_zone.show_image(image, name)
        self.result_card.show_result(result, self.results.asked or None)

    # --- model picker -------------------------------------------------------------------------------
    def _on_model_picked(self, name: str) -> None:
        emit(self.model_chosen, name)
