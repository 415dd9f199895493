"""Benchmark: the setup card (which models, which devices, how many runs, the batch size; run and
cancel; the progress of a run) and the benchmark configuration it makes. It holds the models to choose
from and says when the choice changed; running is the view's business (run_clicked, cancel_clicked)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QWidget,
)

from engines import ALL_DEVICES, BenchConfig, BenchModel, BenchProgress, Device, DeviceType
from ui.common.plain import plain_text, plain_tooltip
from ui.common.widgets import Card, muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Benchmark", text)


DEFAULT_MODELS = ("efficientnet-lite0", "smollm2-135m-instruct")  # checked at first; others on request
LIST_ROWS = 3  # model rows shown without scrolling


def list_label(model: BenchModel) -> str:
    """The model's short name and, for a second build of it, what sets that build apart: the
    title's own words after the first parenthesis ("EfficientNet-Lite0 (ImageNet-1k), QDQ for the NPU
    (uint16 ...)" -> "EfficientNet-Lite0 · QDQ for the NPU"), else the folder name. The full title is
    the tooltip."""
    short = model.title.split(" (", 1)[0]
    if model.name.lower() == short.lower():
        return short
    _, _, rest = model.title.partition("), ")
    detail = rest.split(" (", 1)[0].strip() if rest else ""
    return f"{short} · {detail or model.name}"


class BenchSetupCard(Card):
    run_clicked = Signal()
    cancel_clicked = Signal()
    changed = Signal()  # models or devices checked or unchecked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.models: list[BenchModel] = []
        grid = QGridLayout()
        grid.setHorizontalSpacing(18)
        grid.setVerticalSpacing(6)
        grid.addWidget(muted_label(tr("Models"), word_wrap=False), 0, 0)
        self.model_list = QListWidget()
        self.model_list.setAccessibleName(tr("Models to benchmark"))
        self.model_list.setMinimumWidth(300)
        self.model_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.model_list.itemChanged.connect(lambda _item: self.changed.emit())
        grid.addWidget(self.model_list, 1, 0, 2, 1)
        grid.addWidget(muted_label(tr("Devices"), word_wrap=False), 0, 1)
        devices = QHBoxLayout()
        devices.setSpacing(14)
        self.device_boxes: dict[DeviceType, QCheckBox] = {}
        for device in ALL_DEVICES:
            box = QCheckBox(device.value)
            box.setChecked(True)
            box.toggled.connect(lambda _on: self.changed.emit())
            self.device_boxes[device] = box
            devices.addWidget(box)
        devices.addStretch(1)
        grid.addLayout(devices, 1, 1)
        self.device_note = muted_label(tr("Devices this machine lacks are listed with the reason, not skipped."))
        grid.addWidget(self.device_note, 2, 1, Qt.AlignmentFlag.AlignTop)
        grid.addWidget(muted_label(tr("Runs"), word_wrap=False), 0, 2)
        self.runs_box = QSpinBox()
        self.runs_box.setRange(10, 5000)
        self.runs_box.setValue(100)
        self.runs_box.setAccessibleName(tr("Runs"))
        self.runs_box.setToolTip(tr("Timed calls per path at batch 1 (the engine and raw ONNX Runtime each)"))
        grid.addWidget(self.runs_box, 1, 2)
        grid.addWidget(muted_label(tr("Batch"), word_wrap=False), 0, 3)
        self.batch_box = QSpinBox()
        self.batch_box.setRange(1, 64)
        self.batch_box.setValue(8)
        self.batch_box.setAccessibleName(tr("Batch"))
        self.batch_box.setToolTip(tr("Batch size for the throughput run (image models)"))
        grid.addWidget(self.batch_box, 1, 3)
        buttons = QHBoxLayout()
        self.run_button = QPushButton(tr("Run benchmark"))
        self.run_button.setObjectName("Primary")
        self.run_button.clicked.connect(self.run_clicked)
        self.cancel_button = QPushButton(tr("Cancel"))
        self.cancel_button.clicked.connect(self.cancel_clicked)
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        grid.addLayout(buttons, 1, 4)
        # The progress of a run under its settings, beside the model list: no extra row.
        progress = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(8)
        self.progress.setAccessibleName(tr("Benchmark progress"))
        self.progress.hide()
        self.stage_label = muted_label("", word_wrap=True)
        progress.addWidget(self.progress, 1)
        progress.addWidget(self.stage_label, 2)
        grid.addLayout(progress, 2, 2, 1, 3, Qt.AlignmentFlag.AlignTop)
        grid.setColumnStretch(0, 3)  # the spare width goes to the model names, the longest text here
        grid.setColumnStretch(1, 2)
        self.body.addLayout(grid)
        self._fit_list()

    # --- the choice ---------------------------------------------------------------------------------
    def selected_models(self) -> list[BenchModel]:
        chosen = []
        for row in range(self.model_list.count()):
            item = self.model_list.item(row)
            if item.checkState() == Qt.CheckState.Checked:
                chosen.append(self.models[row])
        return chosen

    def selected_devices(self) -> list[DeviceType]:
        return [d for d, box in self.device_boxes.items() if box.isChecked()]

    def ready(self) -> bool:
        return bool(self.selected_models()) and bool(self.selected_devices())

    def config(self) -> BenchConfig:
        return BenchConfig(
            models=tuple(m.folder for m in self.selected_models()),
            devices=tuple(self.selected_devices()),
            runs=self.runs_box.value(),
            batch=self.batch_box.value(),
        )

    def set_models(self, models: Sequence[BenchModel]) -> None:
        checked = {m.folder for m in self.selected_models()} if self.models else None
        self.models = list(models)
        with QSignalBlocker(self.model_list):
            self.model_list.clear()
            for model in self.models:
                kind = tr("classifier") if model.kind == "vision" else tr("chat")
                item = QListWidgetItem(plain_text(f"{list_label(model)} · {kind}", one_line=True))
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                on = model.folder in checked if checked is not None else self._checked_at_first(model)
                item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
                item.setToolTip(plain_tooltip(f"{model.title}\n{model.folder}"))
                self.model_list.addItem(item)
        self._fit_list()
        self.changed.emit()

    def _checked_at_first(self, model: BenchModel) -> bool:
        """The demo models when they are there; otherwise the first model of each kind."""
        if any(m.name in DEFAULT_MODELS for m in self.models):
            return model.name in DEFAULT_MODELS
        return next(m for m in self.models if m.kind == model.kind) == model

    def _fit_list(self) -> None:
        """As tall as LIST_ROWS rows: the models are read whole, a longer library scrolls."""
        row = self.model_list.sizeHintForRow(0) if self.model_list.count() else self.fontMetrics().height() + 6
        self.model_list.setFixedHeight(LIST_ROWS * row + 2 * self.model_list.frameWidth() + 2)

    def set_devices(self, devices: Sequence[Device]) -> None:
        """Say which device types this machine lacks (they still run: the results list the reason)."""
        missing = []
        for device_type, box in self.device_boxes.items():
            usable = any(d.usable and d.type == device_type for d in devices)
            reasons = [d.reason for d in devices if d.type == device_type and d.reason]
            why = "" if usable else (reasons[0] if reasons else f"No {device_type.value} found.")
            box.setToolTip(plain_tooltip(why))
            if not usable:
                missing.append(device_type.value)
        if missing:
            self.device_note.setText(
                f"Not on this machine: {', '.join(missing)}. They stay in the results, with the reason."
            )
        else:
            self.device_note.setText(tr("Every device type is available on this machine."))

    # --- a run --------------------------------------------------------------------------------------
    def set_running(self, running: bool, ready: bool) -> None:
        self.run_button.setEnabled(ready and not running)
        self.cancel_button.setEnabled(running)

    def start(self) -> None:
        self.progress.setValue(0)
        self.progress.show()
        self.stage_label.setText(tr("Starting…"))

    def show_progress(self, progress: BenchProgress) -> None:
        self.progress.setValue(round(progress.fraction * 1000))
        self.stage_label.setText(f"{progress.stage} · {progress.detail}" if progress.detail else progress.stage)

    def stop(self, text: str) -> None:
        self.progress.hide()
        self.stage_label.setText(text)
