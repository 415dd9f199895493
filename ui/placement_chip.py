"""The one placement chip: where a model really ran, said in one line with colour plus icon.

"Asked NPU → Ran on CPU · 94/94 nodes" (a fallback), "NPU · 94/94 nodes" (as asked),
"Split: QNN 90 · CPU 4" (the graph was partitioned). The full reason is in the tooltip and in a
"Why?" popover. Classify, the batch rows, Benchmark and Chat all use it, so the same run reads the
same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, QPoint, Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from engines.text import rich_text
from engines.types import EP_DEVICE_TYPE, DeviceType, Placement, short_ep_name
from ui.icons import pixmap
from ui.theme import colors


def tr(text: str) -> str:
    return QCoreApplication.translate("PlacementChip", text)


# kind -> icon: colour is never the only signal
_ICONS = {"ok": "check", "warn": "warning", "info": "info", "error": "error", "neutral": "info"}


@dataclass(frozen=True)
class ChipText:
    kind: str  # ok | warn | info | error | neutral
    text: str  # the one line
    details: str  # the full explanation (tooltip and popover), plain text with newlines


def device_word(ep: str) -> str:
    """What a user calls the device behind an EP: "NPU" for QNN, "CPU" for the CPU EP; else the EP."""
    kind = EP_DEVICE_TYPE.get(ep)
    return kind.value if kind is not None else short_ep_name(ep)


def _asked_word(asked: str) -> str:
    # "NPU (strict)" -> "NPU"; "Automatic" means no particular device was asked for.
    return asked.replace(" (strict)", "").strip()


@lru_cache(maxsize=256)  # batch rows repaint often; a placement and a choice always read the same
def describe_placement(placement: Placement, asked: str | None = None) -> ChipText:
    """The chip's line, kind and details for a verified placement. `asked` is what the user chose
    (DeviceChoice.describe()); it defaults to what the placement records."""
    asked_text = _asked_word(asked if asked is not None else placement.requested)
    nodes = placement.nodes_per_ep
    total = placement.total_nodes
    primary = placement.primary_ep
    where = device_word(primary) if primary else tr("another device")
    if len(nodes) > 1:
        ran = tr("Split: ") + " · ".join(f"{short_ep_name(ep)} {count}" for ep, count in nodes)
    elif total:
        ran = f"{where} · {total}/{total} " + tr("nodes")
    else:
        ran = where
    wanted = placement.wanted_type.value if placement.wanted_type is not None else ""
    missed = bool(wanted) and wanted != where and len(nodes) <= 1  # asked for a device it did not get
    if placement.fell_back or missed:
        asked_shown = asked_text if asked_text and asked_text.lower() != "automatic" else (wanted or where)
        line, kind = tr("Asked {asked} → Ran on {ran}").format(asked=asked_shown, ran=ran), "warn"
    elif len(nodes) > 1:
        line, kind = ran, "info"
    else:
        line, kind = ran, "ok"
    details = [tr("Asked for: {asked}").format(asked=asked if asked is not None else placement.requested)]
    details.append(tr("Ran on: {ran}").format(ran=placement.ran_on()))
    if placement.requested_eps:
        details.append(
            tr("ONNX Runtime was asked for: {eps}").format(
                eps=", ".join(short_ep_name(e) for e in placement.requested_eps)
            )
        )
    if placement.active_eps:
        details.append(
            tr("Active providers: {eps}").format(eps=", ".join(short_ep_name(e) for e in placement.active_eps))
        )
    if nodes:
        details.append(
            tr("Nodes per provider: {nodes}").format(nodes=", ".join(f"{short_ep_name(e)} {n}" for e, n in nodes))
        )
    if placement.reason:
        details.append(tr("Why: {reason}").format(reason=placement.reason))
    elif len(nodes) > 1:
        details.append(tr("Why: the first device has no kernel for some operators; those nodes ran on the next one."))
    return ChipText(kind, line, "\n".join(details))


def placement_from_dict(data: Mapping[str, Any]) -> Placement | None:
    """A Placement back from its as_dict() form (how bench results and stored answers keep it)."""
    if not data or not data.get("active_eps"):
        return None
    nodes = data.get("nodes_per_ep") or {}
    wanted = data.get("wanted_type") or str(data.get("requested", "")).replace(" (strict)", "").strip()
    return Placement(
        requested=str(data.get("requested", "")),
        requested_eps=tuple(str(e) for e in data.get("asked_onnxruntime_for", ()) or ()),
        active_eps=tuple(str(e) for e in data.get("active_eps", ()) or ()),
        nodes_per_ep=tuple((str(ep), int(n)) for ep, n in dict(nodes).items()),
        fell_back=bool(data.get("fell_back", False)),
        reason=str(data.get("reason", "")),
        wanted_type=DeviceType(wanted) if wanted in {t.value for t in DeviceType} else None,
    )


def chip_icon_name(kind: str) -> str:
    return _ICONS.get(kind, "info")


def chip_color(kind: str) -> str:
    c = colors()
    return {"ok": c.ok, "warn": c.warn, "error": c.error, "info": c.accent}.get(kind, c.muted)


class WhyPopover(QFrame):
    """A small popup with the whole explanation; closes on any click outside it (Qt.Popup)."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("Popover")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        title = QLabel(tr("Where this ran, and why"))
        title.setObjectName("SectionTitle")
        layout.addWidget(title)
        self.label = QLabel(rich_text(text).replace("\n", "<br>"))
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setMinimumWidth(320)
        self.label.setMaximumWidth(480)
        layout.addWidget(self.label)
        self.setAccessibleName(tr("Placement details"))


class PlacementChip(QFrame):
    """One line: icon + text (+ "Why?" when there is something to explain). Empty until set."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PlacementChip")
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 2, 4, 2)
        layout.setSpacing(6)
        self.glyph = QLabel()
        layout.addWidget(self.glyph)
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.label)
        self.why = QToolButton()
        self.why.setText(tr("Why?"))
        self.why.setObjectName("ChipWhy")
        self.why.setAutoRaise(True)
        self.why.setAccessibleName(tr("Why it ran there"))
        self.why.clicked.connect(self.show_why)
        layout.addWidget(self.why)
        self.kind = "neutral"
        self.details = ""
        self.popover: WhyPopover | None = None
        self.setAccessibleName(tr("Where the model ran"))
        self.clear()

    # --- API ----------------------------------------------------------------------------------------
    def set_placement(self, placement: Placement | None, asked: str | None = None) -> None:
        """Show where `placement` ran; `asked` is what the user chose (DeviceChoice.describe())."""
        if placement is None:
            self.clear()
            return
        chip = describe_placement(placement, asked)
        self._set(chip.kind, chip.text, chip.details, show_why=chip.kind in {"warn", "info"})

    def set_state(self, kind: str, text: str, details: str = "") -> None:
        """A chip that is not a placement: "Loading on NPU…", "Strict: no NPU", ..."""
        self._set(kind, text, details, show_why=bool(details) and kind in {"warn", "error"})

    def clear(self) -> None:
        self._set("neutral", "", "", show_why=False)
        self.hide()

    def text(self) -> str:
        return self.label.text()

    def show_why(self) -> None:
        if not self.details:
            return
        self.popover = WhyPopover(self.details, self)
        self.popover.adjustSize()
        self.popover.move(self.mapToGlobal(QPoint(0, self.height() + 4)))
        self.popover.show()

    # --- internals ----------------------------------------------------------------------------------
    def _set(self, kind: str, text: str, details: str, show_why: bool) -> None:
        if (kind, text, details, show_why) == getattr(self, "_shown", None):
            return  # a batch re-derives the state a few times a second: nothing to redo when unchanged
        self._shown = (kind, text, details, show_why)
        restyle = kind != self.kind or not self.glyph.pixmap() or self.glyph.pixmap().isNull()
        self.kind = kind
        self.details = details
        self.label.setText(text)
        self.setToolTip(details or text)
        self.setAccessibleDescription(details or text)
        self.why.setVisible(show_why)
        self.setProperty("chip", kind)
        if restyle:
            self._restyle()
        self.setVisible(bool(text))

    def _restyle(self) -> None:
        c = colors()
        fg, bg = {
            "ok": (c.ok, c.ok_bg),
            "warn": (c.warn, c.warn_bg),
            "error": (c.error, c.error_bg),
            "info": (c.accent, c.info_bg),
        }.get(self.kind, (c.muted, c.surface_alt))
        self.glyph.setPixmap(pixmap(_ICONS.get(self.kind, "info"), 14, fg))
        # Colours set here (not only in the app style sheet) so the chip is right in any host widget.
        self.setStyleSheet(
            f"QFrame#PlacementChip {{ background: {bg}; border: 1px solid {fg}; border-radius: 10px; }}"
            f"QFrame#PlacementChip QLabel {{ color: {fg}; font-weight: 600; background: transparent; border: none; }}"
            f"QToolButton#ChipWhy {{ color: {fg}; text-decoration: underline; padding: 0 4px; border: none; }}"
        )

    def changeEvent(self, event: QEvent) -> None:
        # A live theme switch changes the palette: re-render the icon and colours with the new theme.
        live = (QEvent.Type.PaletteChange, QEvent.Type.StyleChange)
        if event.type() in live and not getattr(self, "_restyling", False):
            self._restyling = True
            try:
                self._restyle()
            finally:
                self._restyling = False
        super().changeEvent(event)
