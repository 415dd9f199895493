"""Devices: every NPU / GPU / CPU ONNX Runtime reports, with its EP, vendor, versions, and whether it
is usable (and why not); plus the device picker shared by Classify and Chat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from engines.text import rich_text
from engines.types import Device, DeviceType
from ui.device_picker import DeviceChoiceModel, DevicePicker
from ui.ep_download import EpDownloadCard
from ui.icons import icon, pixmap
from ui.theme import colors
from ui.widgets import MARGIN, SPACING, BannerArea, Card, Spinner, ViewHeader, muted_label, set_badge

_TYPE_ICON = {DeviceType.NPU: "npu", DeviceType.GPU: "gpu", DeviceType.CPU: "cpu"}


class DeviceCard(Card):
    def __init__(self, device: Device, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.device = device
        self.setProperty("disabled", not device.usable)
        c = colors()
        head = QHBoxLayout()
        head.setSpacing(10)
        glyph = QLabel()
        glyph.setPixmap(pixmap(_TYPE_ICON[device.type], 32, c.accent if device.usable else c.muted))
        head.addWidget(glyph)
        titles = QVBoxLayout()
        titles.setSpacing(0)
        title = QLabel(device.title())
        title.setObjectName("SectionTitle")
        title.setWordWrap(True)
        titles.addWidget(title)
        titles.addWidget(muted_label(f"{device.type.value} · {device.short_ep}"))
        head.addLayout(titles, 1)
        self.badge = QLabel()
        if device.usable:
            set_badge(self.badge, "ok", "Usable")
        else:
            set_badge(self.badge, "neutral", "Not available")
        head.addWidget(self.badge, 0, Qt.AlignmentFlag.AlignTop)
        self.body.addLayout(head)
        grid = QGridLayout()
        grid.setHorizontalSpacing(16)
        grid.setVerticalSpacing(4)
        rows = [
            ("Execution provider", device.ep),
            ("Source", device.source or "—"),
            ("Vendor", device.vendor or "—"),
            ("EP vendor", device.ep_vendor or "—"),
            ("EP version", device.ep_version or "—"),
            ("Driver", device.driver_version or "—"),
        ]
        if device.plugin_library:
            rows.append(("Plugin library", device.plugin_library))
        for row, (key, value) in enumerate(rows):
            grid.addWidget(muted_label(key, word_wrap=False), row, 0, Qt.AlignmentFlag.AlignTop)
            label = QLabel(value)
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            grid.addWidget(label, row, 1)
        grid.setColumnStretch(1, 1)
        self.body.addLayout(grid)
        if not device.usable and device.reason:
            reason = QLabel(f"<b>Why not:</b> {rich_text(device.reason)}")
            reason.setWordWrap(True)
            reason.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.body.addWidget(reason)
        self.body.addStretch(1)


class DevicesView(QWidget):
    """Cards per device, an explicit empty state for a missing NPU, and the shared device picker."""

    refresh_requested = Signal()

    def __init__(self, choice_model: DeviceChoiceModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.choice_model = choice_model
        self.devices: tuple[Device, ...] = ()
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader("Devices", "What ONNX Runtime can really use on this machine, and why not.")
        self.spinner = Spinner()
        self.header.controls.addWidget(self.spinner)
        self.refresh_button = QPushButton(icon("refresh"), "Refresh")
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.header.controls.addWidget(self.refresh_button)
        outer.addWidget(self.header)
        self.banners = BannerArea()
        outer.addWidget(self.banners)
        self.downloads = EpDownloadCard()  # Windows ML EPs not on this PC yet: asks, shows progress, cancels
        outer.addWidget(self.downloads)

        picker_card = Card()
        row = QHBoxLayout()
        row.setSpacing(SPACING)
        texts = QVBoxLayout()
        texts.setSpacing(2)
        label = QLabel("Device for Classify and Chat")
        label.setObjectName("SectionTitle")
        texts.addWidget(label)
        texts.addWidget(
            muted_label(
                "Automatic prefers the NPU, then the GPU, then the CPU. Strict turns any fallback into an error."
            )
        )
        row.addLayout(texts, 1)
        self.picker = DevicePicker(choice_model)
        row.addWidget(self.picker)
        picker_card.body.addLayout(row)
        outer.addWidget(picker_card)

        self.summary = muted_label("Looking for devices…")
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.summary)

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._content = QWidget()
        self._content_layout = QVBoxLayout(self._content)
        self._content_layout.setContentsMargins(0, 0, 0, 0)
        self._content_layout.setSpacing(SPACING)
        scroll.setWidget(self._content)
        outer.addWidget(scroll, 1)
        self.npu_notice: QWidget | None = None
        self.cards: list[DeviceCard] = []

    # --- slots the app wires to the devices host --------------------------------------------------
    def show_loading(self) -> None:
        self.spinner.start()
        self.refresh_button.setEnabled(False)
        self.summary.setText("Looking for devices… (loading ONNX Runtime)")

    def show_devices(self, devices: Sequence[Device], info: Mapping[str, str]) -> None:
        self.spinner.stop()
        self.refresh_button.setEnabled(True)
        self.devices = tuple(devices)
        self.choice_model.set_devices(self.devices)
        usable = [d for d in self.devices if d.usable]
        parts = [f"ONNX Runtime {info.get('onnxruntime', '?')}", info.get("platform", "")]
        if info.get("providers"):
            parts.append(f"providers in this build: {info['providers']}")
        self.summary.setText(" · ".join(p for p in parts if p) + f" · {len(usable)} usable of {len(devices)}")
        self._rebuild()

    def show_error(self, error: object) -> None:
        self.spinner.stop()
        self.refresh_button.setEnabled(True)
        self.summary.setText("Device discovery failed.")
        self.banners.show_error(error)

    # --- layout -----------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        while self._content_layout.count():
            item = self._content_layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.cards = []
        self.npu_notice = None
        npus = [d for d in self.devices if d.type == DeviceType.NPU]
        if not any(d.usable for d in npus):
            self.npu_notice = self._npu_notice(npus)
            self._content_layout.addWidget(self.npu_notice)
        grid_host = QWidget()
        grid = QGridLayout(grid_host)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(SPACING)
        shown = [d for d in self.devices if d.usable or d.type != DeviceType.NPU]
        for index, device in enumerate(shown):
            card = DeviceCard(device)
            self.cards.append(card)
            grid.addWidget(card, index // 2, index % 2)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(1, 1)
        self._content_layout.addWidget(grid_host)
        self._content_layout.addStretch(1)

    def _npu_notice(self, npus: Sequence[Device]) -> QWidget:
        card = Card(object_name="EmptyCard")
        row = QHBoxLayout()
        row.setSpacing(14)
        glyph = QLabel()
        glyph.setPixmap(pixmap("npu", 40, colors().muted))
        glyph.setAlignment(Qt.AlignmentFlag.AlignTop)
        row.addWidget(glyph)
        texts = QVBoxLayout()
        texts.setSpacing(4)
        title = QLabel("No NPU found on this machine — here is why")
        title.setObjectName("SectionTitle")
        texts.addWidget(title)
        reasons = [d.reason for d in npus if d.reason] or [
            "ONNX Runtime reports no neural processing unit and no NPU execution provider in this build."
        ]
        for reason in reasons:
            label = QLabel(rich_text(reason))
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            texts.addWidget(label)
        texts.addWidget(muted_label("Classify and Chat still work: Automatic runs them on the best device found."))
        row.addLayout(texts, 1)
        card.body.addLayout(row)
        return card
