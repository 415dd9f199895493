"""The one device choice shared by Classify and Chat: a model object plus pickers that mirror it."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QObject, QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QWidget

from engines import (
    CPU_EP,
    MEANING,
    Device,
    DeviceChoice,
    Policy,
    StudioError,
    best_first,
    predict_device,
    short_ep_name,
)


def tr(text: str) -> str:
    return QCoreApplication.translate("DevicePicker", text)


class DeviceChoiceModel(QObject):
    """Holds the device text (`auto`, `npu`, ... or an EP name) and the strict flag; emits `changed`."""

    changed = Signal(object)  # DeviceChoice
    devices_changed = Signal()

    def __init__(self, text: str = "auto", strict: bool = False, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._text = self._valid(text)
        self._strict = strict
        self._devices: tuple[Device, ...] = ()

    @staticmethod
    def _valid(text: str) -> str:
        try:
            DeviceChoice.parse(text)
        except StudioError:
            return Policy.AUTO.value
        return text

    @property
    def text(self) -> str:
        return self._text

    @property
    def strict(self) -> bool:
        return self._strict

    @property
    def devices(self) -> tuple[Device, ...]:
        return self._devices

    def choice(self) -> DeviceChoice:
        return DeviceChoice.parse(self._text, strict=self._strict)

    def set_text(self, text: str) -> None:
        text = self._valid(text)
        if text != self._text:
            self._text = text
            self.changed.emit(self.choice())

    def set_strict(self, strict: bool) -> None:
        if strict != self._strict:
            self._strict = strict
            self.changed.emit(self.choice())

    def set_devices(self, devices: Sequence[Device]) -> None:
        self._devices = tuple(devices)
        self.devices_changed.emit()

    def falls_back(self, choice: DeviceChoice) -> bool | None:
        """Whether the planner forecasts a fallback for `choice` on these devices (None before discovery)."""
        forecast = predict_device(choice, self._devices)
        return None if forecast is None else forecast.falls_back


class DevicePicker(QWidget):
    """A combo box (policies, plus explicit EPs found on this machine) and a strict toggle."""

    def __init__(self, model: DeviceChoiceModel, parent: QWidget | None = None, compact: bool = False) -> None:
        super().__init__(parent)
        self.model = model
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        if not compact:
            layout.addWidget(QLabel(tr("Run on")))
        self.combo = QComboBox()
        self.combo.setMinimumWidth(170)
        self.combo.setToolTip(tr("Which device ONNX Runtime should use for Classify and Chat"))
        self.combo.setAccessibleName(tr("Device"))
        layout.addWidget(self.combo)
        self.strict = QCheckBox(tr("Strict"))
        self.strict.setAccessibleName(tr("Strict: no fallback"))
        self.strict.setToolTip(
            tr("Strict: the chosen device must run the whole model; anything else is an error instead of a fallback.")
        )
        layout.addWidget(self.strict)
        self._fill()
        self.combo.currentIndexChanged.connect(self._on_index)
        self.strict.toggled.connect(model.set_strict)
        model.changed.connect(self._sync)
        model.devices_changed.connect(self._fill)

    def _fill(self) -> None:
        with QSignalBlocker(self.combo):
            self.combo.clear()
            for policy in Policy:
                label = policy.label
                if self.model.falls_back(DeviceChoice(policy=policy)):  # the device it names is missing
                    label += " — " + tr("not found")
                self.combo.addItem(label, policy.value)
                # What the choice means, the same for Classify and Chat (the one planner's words).
                self.combo.setItemData(self.combo.count() - 1, tr(MEANING[policy]), Qt.ItemDataRole.ToolTipRole)
            # "CPU only" already is the CPU execution provider: no second entry for the same thing.
            usable = best_first(d for d in self.model.devices if d.usable and d.ep != CPU_EP)
            explicit = list(dict.fromkeys(d.ep for d in usable))  # in the planner's order
            if self.model.text not in {p.value for p in Policy} and self.model.text not in explicit:
                explicit.append(self.model.text)
            for ep in explicit:
                self.combo.addItem(tr("{ep} only (explicit provider)").format(ep=short_ep_name(ep)), ep)
        self._sync()

    def _sync(self, *_: object) -> None:
        with QSignalBlocker(self.combo):
            index = self.combo.findData(self.model.text)
            self.combo.setCurrentIndex(max(0, index))
        with QSignalBlocker(self.strict):
            self.strict.setChecked(self.model.strict)

    def _on_index(self, index: int) -> None:
        data = self.combo.itemData(index)
        if isinstance(data, str):
            self.model.set_text(data)
