"""Devices: every NPU / GPU / CPU ONNX Runtime reports, with its EP, vendor, versions, and whether it
is usable (and why not); plus the device picker shared by Classify and Chat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import QCoreApplication, Qt, Signal
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

from engines import MEANING, RANKING, Device, DeviceChoice, DeviceType, Policy, predict_device, rich_text
from ui.common.device_picker import DeviceChoiceModel, DevicePicker
from ui.common.icons import icon
from ui.common.plain import plain_label, plain_tooltip, rich_label, set_plain
from ui.common.widgets import MARGIN, SPACING, BannerArea, Card, Glyph, Spinner, ViewHeader, muted_label, set_badge
from ui.devices.ep_download import EpDownloadCard

_TYPE_ICON = {DeviceType.NPU: "npu", DeviceType.GPU: "gpu", DeviceType.CPU: "cpu"}


def tr(text: str) -> str:
    return QCoreApplication.translate("Devices", text)


# Part of every ONNX Runtime build, for calling cloud endpoints; an offline app never uses it, and
# listing it among "providers" alarms people who chose an offline app.
NOT_SHOWN_EPS = {"AzureExecutionProvider"}


def device_title(device: Device) -> str:
    """ "AMD EPYC 7B13", "Qualcomm Hexagon NPU (QNN)": the EP in brackets only when it says more."""
    name = device.description or f"{device.vendor} {device.type.value}".strip()
    if device.short_ep.lower() in {device.type.value.lower(), ""} or device.short_ep in name:
        return name
    return f"{name} ({device.short_ep})"


def device_subtitle(device: Device) -> str:
    if device.short_ep == device.type.value:
        return tr("{kind} · ONNX Runtime's built-in {ep} provider").format(kind=device.type.value, ep=device.short_ep)
    return tr("{kind} · {ep} execution provider").format(kind=device.type.value, ep=device.short_ep)


def capability_sentence(devices: Sequence[Device]) -> str:
    """What this machine can do, in one sentence: where the planner puts the automatic choice."""
    forecast = predict_device(DeviceChoice(), devices)
    plan = forecast.plan if forecast is not None else None
    usable = [d for d in devices if d.usable]
    runs = None if plan is None else next((d for d in usable if (d.ep, d.type) == (plan.ep, plan.device_type)), None)
    if runs is None:
        return tr("ONNX Runtime found no device it can use on this machine.")
    if runs.type == DeviceType.NPU:
        return tr("This machine has an NPU ({name}): photos and chat can run on it, with the CPU as fallback.").format(
            name=device_title(runs)
        )
    if runs.type == DeviceType.GPU:
        return tr("No NPU here, but the GPU ({name}) can run photos and chat; the CPU always can.").format(
            name=device_title(runs)
        )
    vendor = f" ({runs.vendor})" if runs.vendor else ""
    return tr("No NPU or GPU that ONNX Runtime can use here: photos and chat run on the CPU{vendor}, offline.").format(
        vendor=vendor
    )


def summary_line(devices: Sequence[Device], info: Mapping[str, str]) -> str:
    """ONNX Runtime version, platform, what is usable and what is not (named, not just counted; best first)."""
    usable = [t.value for t in RANKING if any(d.usable and d.type == t for d in devices)]
    missing = [t.value for t in RANKING if t.value not in usable and any(d.type == t for d in devices)]
    parts = [f"ONNX Runtime {info.get('onnxruntime', '?')}", info.get("platform", "")]
    parts.append(tr("usable: {kinds}").format(kinds=", ".join(usable) or tr("none")))
    if missing:
        parts.append(tr("not available: {kinds} (why below)").format(kinds=", ".join(missing)))
    return " · ".join(p for p in parts if p)


class DeviceCard(Card):
    def __init__(self, device: Device, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.device = device
        self.setProperty("disabled", not device.usable)
        head = QHBoxLayout()
        head.setSpacing(10)
        glyph = Glyph(_TYPE_ICON[device.type], 32, "accent" if device.usable else "muted")
        head.addWidget(glyph)
        titles = QVBoxLayout()
        titles.setSpacing(0)
        title = plain_label(device_title(device))  # names and versions come from drivers: shown as written
        title.setObjectName("SectionTitle")
        titles.addWidget(title)
        titles.addWidget(muted_label(device_subtitle(device)))
        head.addLayout(titles, 1)
        self.badge = QLabel()
        if device.usable:
            set_badge(self.badge, "ok", tr("Usable"))
        else:
            set_badge(self.badge, "neutral", tr("Not available"))
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
            grid.addWidget(plain_label(value, selectable=True), row, 1)
        grid.setColumnStretch(1, 1)
        self.body.addLayout(grid)
        if not device.usable and device.reason:
            reason = rich_label(f"<b>Why not:</b> {rich_text(device.reason)}")  # the reason escaped
            reason.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.body.addWidget(reason)
        self.body.addStretch(1)


class DevicesView(QWidget):
    """Cards per device, an explicit empty state for a missing NPU, and the shared device picker."""

    refresh_requested = Signal()
    try_classify_requested = Signal()
    try_chat_requested = Signal()

    def __init__(self, choice_model: DeviceChoiceModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.choice_model = choice_model
        self.devices: tuple[Device, ...] = ()
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        outer.setSpacing(SPACING)
        self.header = ViewHeader(tr("Devices"), tr("What ONNX Runtime can really use on this machine, and why not."))
        self.spinner = Spinner()
        self.header.controls.addWidget(self.spinner)
        self.refresh_button = QPushButton(icon("refresh"), tr("Refresh"))
        self.refresh_button.setAccessibleName(tr("Look for devices again"))
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.header.controls.addWidget(self.refresh_button)
        outer.addWidget(self.header)
        self.banners = BannerArea()
        outer.addWidget(self.banners)
        self.downloads = EpDownloadCard()  # Windows ML EPs not on this PC yet: asks, shows progress, cancels
        outer.addWidget(self.downloads)

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        page = QWidget()
        page_layout = QVBoxLayout(page)
        page_layout.setContentsMargins(0, 0, 0, 0)
        page_layout.setSpacing(SPACING)
        scroll.setWidget(page)
        outer.addWidget(scroll, 1)

        # First thing on screen: what this machine can do, and two things to try.
        hero = Card()
        self.capability = plain_label(tr("Looking at what this machine can run…"))
        self.capability.setObjectName("SectionTitle")
        hero.body.addWidget(self.capability)
        tries = QHBoxLayout()
        tries.setSpacing(8)
        self.try_classify_button = QPushButton(icon("classify", "accent_text"), tr("Classify a sample photo"))
        self.try_classify_button.setObjectName("Primary")
        self.try_classify_button.clicked.connect(self.try_classify_requested)
        self.try_chat_button = QPushButton(icon("chat"), tr("Start a chat"))
        self.try_chat_button.clicked.connect(self.try_chat_requested)
        tries.addWidget(self.try_classify_button)
        tries.addWidget(self.try_chat_button)
        tries.addStretch(1)
        hero.body.addLayout(tries)
        page_layout.addWidget(hero)

        picker_card = Card()
        row = QHBoxLayout()
        row.setSpacing(SPACING)
        texts = QVBoxLayout()
        texts.setSpacing(2)
        label = QLabel(tr("Device for Classify and Chat"))
        label.setObjectName("SectionTitle")
        texts.addWidget(label)
        texts.addWidget(
            muted_label(
                tr("Automatic: {meaning} Strict turns any fallback into an error.").format(
                    meaning=tr(MEANING[Policy.AUTO])
                )
            )
        )
        row.addLayout(texts, 1)
        self.picker = DevicePicker(choice_model)
        row.addWidget(self.picker)
        picker_card.body.addLayout(row)
        page_layout.addWidget(picker_card)

        self.summary = muted_label(tr("Looking for devices…"))
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        page_layout.addWidget(self.summary)

        self._content = QWidget()
        self._content_layout = QVBoxLayout(self._content)
        self._content_layout.setContentsMargins(0, 0, 0, 0)
        self._content_layout.setSpacing(SPACING)
        page_layout.addWidget(self._content, 1)
        self.npu_notice: QWidget | None = None
        self.cards: list[DeviceCard] = []

    # --- slots the app wires to the devices host --------------------------------------------------
    def show_loading(self) -> None:
        self.spinner.start()
        self.refresh_button.setEnabled(False)
        self.summary.setText(tr("Looking for devices… (loading ONNX Runtime)"))

    def show_devices(self, devices: Sequence[Device], info: Mapping[str, str]) -> None:
        self.spinner.stop()
        self.refresh_button.setEnabled(True)
        self.devices = tuple(devices)
        self.choice_model.set_devices(self.devices)
        set_plain(self.summary, summary_line(self.devices, info))
        providers = [p.strip() for p in info.get("providers", "").split(",") if p.strip()]
        shown = [p for p in providers if f"{p}ExecutionProvider" not in NOT_SHOWN_EPS and p not in NOT_SHOWN_EPS]
        self.summary.setToolTip(
            plain_tooltip(
                tr("Execution providers in this ONNX Runtime build: {eps}.").format(eps=", ".join(shown) or tr("none"))
                + (
                    "\n" + tr("(Azure, for cloud endpoints, is in every build; NPU Studio never uses it.)")
                    if len(shown) < len(providers)
                    else ""
                )
            )
        )
        set_plain(self.capability, capability_sentence(self.devices))
        self._rebuild()

    def show_error(self, error: object) -> None:
        self.spinner.stop()
        self.refresh_button.setEnabled(True)
        self.summary.setText(tr("Device discovery failed."))
        self.capability.setText(tr("Device discovery failed; the details are above."))
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
        glyph = Glyph("npu", 40, "muted")
        glyph.setAlignment(Qt.AlignmentFlag.AlignTop)
        row.addWidget(glyph)
        texts = QVBoxLayout()
        texts.setSpacing(4)
        title = QLabel(tr("No NPU found on this machine — here is why"))
        title.setObjectName("SectionTitle")
        texts.addWidget(title)
        reasons = [d.reason for d in npus if d.reason] or [
            "ONNX Runtime reports no neural processing unit and no NPU execution provider in this build."
        ]
        for reason in reasons:
            texts.addWidget(plain_label(reason, selectable=True))
        texts.addWidget(muted_label(tr("Classify and Chat still work: Automatic runs them on the best device found.")))
        row.addLayout(texts, 1)
        card.body.addLayout(row)
        return card
