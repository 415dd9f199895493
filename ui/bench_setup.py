"""Benchmark: the setup card (which models, which devices, how many runs, the batch size; run and
cancel; the progress of a run) and the benchmark configuration it makes.

A mixin of BenchView (ui.bench_view): it works on the view's models, banners and buttons, declared
below."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QCoreApplication, Qt
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

from engines.bench.data import ALL_DEVICES, BenchConfig, BenchModel
from engines.types import Device, DeviceType
from ui.widgets import BannerArea, Card, muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Benchmark", text)


DEFAULT_MODELS = ("efficientnet-lite0", "smollm2-135m-instruct")  # checked at first; others on request


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


class BenchSetup:
    models: list[BenchModel]
    banners: BannerArea
    _update_buttons: Callable[[], None]
    request_run: Callable[[], bool]
    request_cancel: Callable[[], None]

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
        grid.setColumnStretch(0, 1)  # the spare width goes to the model names, the longest text here
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

    def set_models(self, models: Sequence[BenchModel]) -> None:
        checked = {m.folder for m in self.selected_models()} if self.models else None
        self.models = list(models)
        self.model_list.blockSignals(True)
        self.model_list.clear()
        for model in self.models:
            label = list_label(model)
            kind = "classifier" if model.kind == "vision" else "chat"
            item = QListWidgetItem(f"{label} · {kind}")
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
