"""Classify: open, drop or paste photos (or a whole folder, or a sample photo); preview, top-5 bars,
per-photo times, one placement chip, and a results table for batches with a summary and CSV export.

Composed of named widgets, each one thing: the device line (ui.classify.device_line: where the next
run goes, derived on every change), the input strip, the drop zone with the samples, the result panel
and the batch card. The view holds the run: what was asked, how far it got, and which choice and model
it ran with. A single photo shown for another choice or model is classified again by itself (it costs
a few milliseconds once the model is loaded, and the chip then always tells the truth about the current
choice); a batch says so and offers "Classify again" (it may take minutes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QBuffer, QByteArray, QCoreApplication, QIODevice, Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDropEvent, QImage, QImageWriter
from PySide6.QtWidgets import QFrame, QScrollArea, QSplitter, QVBoxLayout, QWidget

from engines import Classification, DeviceChoice, ImageError, ModelEntry, Placement
from ui.classify.batch import batch_summary
from ui.classify.batch_card import BatchCard
from ui.classify.device_line import DeviceLine
from ui.classify.drop_zone import DropZone
from ui.classify.input_strip import InputStrip
from ui.classify.photos import PASTED, display_name, expand_paths, load_preview, skipped_summary
from ui.classify.result_panel import ResultPanel
from ui.common.device_picker import DeviceChoiceModel, DevicePicker
from ui.common.device_state import DeviceState
from ui.common.model_picker import ModelPicker
from ui.common.widgets import MARGIN, SPACING, Banner, BannerArea, ViewHeader

__all__ = ["ClassifyView"]


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


@dataclass
class Run:
    """One request: what was asked (paths, or image data and its name), with which choice and model,
    and how far it got."""

    key: tuple[DeviceChoice, str]
    asked: str  # DeviceChoice.describe()
    paths: list[str] = field(default_factory=list)
    image: tuple[bytes, str] | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    preview: str = ""  # the photo whose detail is shown while the run goes (a batch's first)
    total: int = 1
    done: int = 0
    bad_input: bool = False  # the photo itself could not be read: another device would not change that

    @property
    def single(self) -> bool:
        return self.total == 1


class ClassifyView(QWidget):
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
        self.run: Run | None = None
        self._pending: list[Classification] = []
        self._apply_timer = QTimer(self)
        self._apply_timer.setSingleShot(True)
        self._apply_timer.setInterval(100)
        self._apply_timer.timeout.connect(self._apply_pending)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader(
            tr("Classify"), tr("Which of 1,000 ImageNet classes is in the photo, and where it ran.")
        )
        self.model_picker = ModelPicker("image-classifier")
        self.model_picker.model_chosen.connect(self.model_chosen)
        self.header.controls.addWidget(self.model_picker)
        self.picker = DevicePicker(choice_model, compact=True)
        self.header.controls.addWidget(self.picker)
        outer.addWidget(self.header)
        self.device_line = DeviceLine(choice_model)
        outer.addWidget(self.device_line)
        self.banners = BannerArea()
        outer.addWidget(self.banners)
        self.inputs = InputStrip()
        self.inputs.paths_chosen.connect(self.classify_paths)
        self.inputs.image_chosen.connect(self.classify_image)
        self.inputs.nothing_to_paste.connect(
            lambda: self._input_problem(
                tr("The clipboard holds no image."), tr("Copy a photo (or an image file) first, then paste.")
            )
        )
        self.inputs.cancel_clicked.connect(self.cancel)
        outer.addWidget(self.inputs)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setChildrenCollapsible(False)
        top = QSplitter(Qt.Orientation.Horizontal)
        top.setChildrenCollapsible(False)
        self.drop_zone = DropZone()
        self.drop_zone.sample_clicked.connect(lambda path: self.classify_paths([path]))
        top.addWidget(self.drop_zone)
        self.result_panel = ResultPanel()
        self.result_panel.rerun_requested.connect(self.classify_again)
        top.addWidget(self.result_panel)
        top.setStretchFactor(0, 3)
        top.setStretchFactor(1, 2)
        splitter.addWidget(top)
        self.batch = BatchCard(lambda: self.inputs.last_open_dir)
        self.batch.row_chosen.connect(lambda result: self._show_detail(result, update_preview=True))
        self.batch.export_failed.connect(
            lambda path, why: self.banners.show_message(
                tr("Could not write {path}.").format(path=path), why, "error", cause="export"
            )
        )
        self.batch.hide()
        splitter.addWidget(self.batch)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        # Below its minimum (a small window, a large scale factor) the work area scrolls instead of
        # squeezing the photo, the result and the batch table into each other.
        area = QScrollArea()
        area.setWidget(splitter)
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        outer.addWidget(area, 1)
        self.device_line.changed.connect(self._on_state)
        self.device_line.refresh()

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

    # --- what the user asks -------------------------------------------------------------------------
    def classify_image(self, image: QImage, name: str) -> None:
        if self._refuse_while_busy():
            return
        buffer = QBuffer()
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        if not QImageWriter(buffer, QByteArray(b"PNG")).write(image):
            self._input_problem(tr("The pasted image could not be read."), tr("Copy it again, or save it as a file."))
            return
        data = bytes(buffer.data().data())
        self._begin(Run(self.device_line.key(), self._asked(), image=(data, name)))
        self.drop_zone.show_image(image, name)
        self.classify_image_requested.emit(data, name)

    def classify_paths(self, paths: Sequence[str]) -> None:
        """Classify files and folders (the entry point for open, drop, samples and tests)."""
        if self._refuse_while_busy():
            return
        found = expand_paths(paths)
        if not found.photos:
            skipped = found.said()
            hint = tr("Choose image files (JPEG, PNG, BMP, GIF, WebP, TIFF) or a folder that contains some.")
            self._input_problem(tr("No photos to classify."), f"{skipped}. {hint}" if skipped else hint)
            return
        self._begin(Run(self.device_line.key(), self._asked(), paths=list(paths), skipped=found.skipped,
                        preview=found.photos[0], total=len(found.photos)))  # fmt: skip
        preview = load_preview(found.photos[0])
        caption = tr("{n} photos").format(n=len(found.photos))
        if len(found.photos) == 1:
            sample = self.drop_zone.samples.caption_for(found.photos[0])
            name = display_name(found.photos[0])
            caption = tr("{caption} (sample photo {name})").format(caption=sample, name=name) if sample else name
        if not preview.isNull():
            self.drop_zone.show_image(preview, caption)
        else:
            self.drop_zone.show_placeholder(display_name(found.photos[0]))
        self.classify_requested.emit(found.photos)

    def classify_again(self) -> None:
        """The last request once more, with the current device and model."""
        run = self.run
        if run is None or self.busy:
            return
        if run.image is not None:
            data, name = run.image
            image = QImage.fromData(data)
            self._begin(Run(self.device_line.key(), self._asked(), image=run.image))
            self.drop_zone.show_image(image, name)
            self.classify_image_requested.emit(data, name)
        else:
            self.classify_paths(run.paths)

    def cancel(self) -> None:
        if self.busy:
            self.inputs.set_status(tr("Cancelling…"))
            self.cancel_requested.emit()

    # --- slots wired to the app ---------------------------------------------------------------------
    def set_model(self, name: str) -> None:
        """The library model this view uses (shown in the picker; the state re-derives)."""
        self.model_picker.set_current(name)
        self.device_line.set_model(name)
        self._sync_result()

    def set_model_entries(self, entries: Sequence[ModelEntry]) -> None:
        self.model_picker.set_entries(entries)

    def show_busy(self, text: str) -> None:
        """Loading or compiling the model (status from the host; "" when the host's job is over)."""
        was_loading = self.device_line.loading
        if text:
            self.inputs.spinner.start()
            self.inputs.set_status(text)
        elif not self.busy:
            self.inputs.spinner.stop()
            if was_loading and self.inputs.status_text() == was_loading:
                self.inputs.set_status("")
        self.device_line.set_loading(text)

    def show_loaded(self, description: str = "", placement: Placement | None = None) -> None:
        """The model is ready (after a load or compile) and runs where `placement` says."""
        was_loading = self.device_line.loading
        if not self.busy:
            self.inputs.spinner.stop()
            if was_loading and self.inputs.status_text() == was_loading:
                self.inputs.set_status("")
        if placement is not None:
            self.device_line.ran(placement)
        else:
            self.device_line.set_loading("")

    def show_result(self, result: Classification) -> None:
        """Results arrive in bursts (a batch at a time); they are shown together, a few times a second
        at most, so that a fast batch costs the UI thread little."""
        self._pending.append(result)
        if self.run is None or self.run.single:
            self._apply_pending()
        elif not self._apply_timer.isActive():
            self._apply_timer.start()

    def show_progress(self, done: int, total: int) -> None:
        """Progress comes with each result (show_result); nothing more to draw."""

    def show_finished(self, summary: dict[str, Any] | None = None) -> None:
        self._apply_pending()
        run = self.run
        results = self.batch.results.results
        errors = [r for r in results if r.error]
        skipped = skipped_summary(run.skipped) if run else ""
        status = skipped
        if run is not None and not run.single:
            seconds = float(summary["seconds"]) if summary and "seconds" in summary else None
            self.batch.summary.setText(batch_summary(results, seconds, run.total))
            done = len(results) - len(errors)
            status = tr("{done} of {total} classified").format(done=done, total=run.total)
            status += f" · {skipped}" if skipped else ""
            if errors:
                self.banners.show_message(
                    tr("{n} of {total} photos could not be classified.").format(n=len(errors), total=run.total),
                    tr("They are listed in the table with the reason."),
                    "warning",
                    cause="run",
                )
        self._end(status)

    def show_cancelled(self) -> None:
        self._apply_pending()
        total = self.run.total if self.run else 0
        self.batch.summary.setText(batch_summary(self.batch.results.results, None, total))
        done = len(self.batch.results.results)
        self._end(tr("Cancelled after {done} of {total}").format(done=done, total=total))

    def show_error(self, error: object) -> Banner:
        """A failure of the run or the model. A bad input belongs to the input; anything else is the
        device line's (it goes when the choice or model changes)."""
        self._apply_pending()
        nothing_shown = not self.batch.results.results
        self._end("")
        if isinstance(error, ImageError):
            if self.run is not None:
                self.run.bad_input = True
            banner = self.banners.show_error(error, cause="input")
        else:
            self.device_line.failed(error)
            banner = self.banners.banner("device") or self.banners.show_error(error, cause="device")
        if nothing_shown and self.run is not None:
            self.result_panel.show_failure(self.run.preview if self.run.image is None else PASTED)
        return banner

    # --- the run ------------------------------------------------------------------------------------
    def _asked(self) -> str:
        return self.choice_model.choice().describe()

    def _refuse_while_busy(self) -> bool:
        if self.busy:
            wait = tr("Wait for the current run to finish or cancel it.")
            self._input_problem(tr("Still classifying."), wait, "info")
        return self.busy

    def _input_problem(self, message: str, hint: str, severity: str = "warning") -> None:
        """A problem with what was asked (one banner for the input: the newest replaces the older)."""
        self.banners.show_message(message, hint, severity, cause="input")

    def _begin(self, run: Run) -> None:
        self.busy = True
        self.run = run
        self._pending = []
        self.device_line.forget_failure()
        self.banners.clear("input")
        self.banners.clear("run")
        self.batch.start(run.total, run.asked)
        self.batch.show_skipped(run.skipped)
        self.batch.setVisible(not run.single)
        self.result_panel.show_note("")
        status = tr("Classifying…") if run.single else tr("Classifying 0 of {n}…").format(n=run.total)
        self.inputs.start(run.total, status)
        self.work_status.emit(tr("Classifying…") if run.single else tr("Classifying {n} photos…").format(n=run.total))
        self.device_line.set_working(status)

    def _apply_pending(self) -> None:
        self._apply_timer.stop()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        placement = next((r.placement for r in pending if r.placement is not None), None)
        self.batch.results.extend(pending)
        run = self.run
        if run is not None:
            run.done = len(self.batch.results.results)
            if not run.single:
                self.inputs.progress.setValue(run.done)
                status = tr("Classifying {done} of {total}…").format(done=run.done, total=run.total)
                self.inputs.set_status(status)
        # The detail shows the photo in the preview (the first one of a batch).
        shown = pending[0] if run is None or run.single else next(
            (r for r in pending if r.path == run.preview), None
        )
        if shown is not None:
            self._show_detail(shown, update_preview=False)
        if placement is not None and run is not None and run.key == self.device_line.key():
            self.device_line.ran(placement)

    def _end(self, status: str) -> None:
        self.busy = False
        self.inputs.end(status)
        self.work_status.emit("")
        run = self.run
        results = self.batch.results.results
        if run is not None and run.single and results and results[0].error:
            run.bad_input = True
            name = display_name(results[0].path)
            self._input_problem(tr("Could not classify {name}.").format(name=name), results[0].error, "error")
        self.device_line.set_working("")
        self._sync_result()

    def _show_detail(self, result: Classification, update_preview: bool) -> None:
        if update_preview and result.path != PASTED:
            image = load_preview(result.path)
            if not image.isNull():
                self.drop_zone.show_image(image, display_name(result.path))
        shared = self.run is not None and not self.run.single
        self.result_panel.show_result(result, self.batch.results.asked or None, shared)

    # --- one device truth ---------------------------------------------------------------------------
    def _on_state(self, state: DeviceState) -> None:
        if state.banner is not None:
            spec = state.banner
            self.banners.show_message(spec.message, spec.hint, spec.severity, cause="device")
        else:
            self.banners.clear("device")
        self._sync_result()

    def _sync_result(self) -> None:
        """A result belongs to the choice and model it ran with. Shown for another choice or model, a
        single photo is classified again (on the next event-loop turn, once every listener of the change
        has heard it); a batch says which choice its results are from and offers "Classify again"."""
        run = self.run
        if run is None or self.busy:
            return
        if run.key == self.device_line.key():
            if self.result_panel.rerun_button.isVisibleTo(self.result_panel):
                self.result_panel.show_note("")  # the note was about another choice
            return
        if run.single:
            if not run.bad_input:
                QTimer.singleShot(0, self._rerun_if_stale)
            return
        (choice, model), (now_choice, now_model) = run.key, self.device_line.key()
        if model != now_model:
            note = tr("These results are from {model}; the next run uses {now}.").format(model=model, now=now_model)
        else:
            note = tr("These results ran on {asked}; the next run uses {now}.").format(
                asked=choice.describe(), now=now_choice.describe()
            )
        self.result_panel.show_note(note, rerun=True)

    def _rerun_if_stale(self) -> None:
        run = self.run
        if run is not None and run.single and not self.busy and run.key != self.device_line.key():
            self.classify_again()
