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

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QPoint, QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from engines import EP_DEVICE_TYPE, DeviceType, Placement, printable, short_ep_name
from ui.common.icons import pixmap
from ui.common.plain import plain_tooltip
from ui.common.theme import colors


def tr(text: str) -> str:
    return QCoreApplication.translate("PlacementChip", text)


QWIDGETSIZE_MAX = (1 << 24) - 1


# kind -> icon: colour is never the only signal
_ICONS = {"ok": "check", "warn": "warning", "info": "info", "error": "error", "neutral": "info"}


@dataclass(frozen=True)
class ChipText:
    kind: str  # ok | warn | info | error | neutral
    text: str  # the one line
    details: str  # the full explanation (tooltip and popover), plain text with newlines
    short: str = ""  # the same line in fewer words, for a narrow place ("NPU→CPU · 94/94"); "" = text


def device_word(ep: str) -> str:
    """What a user calls the device behind an EP: "NPU" for QNN, "CPU" for the CPU EP; else the EP."""
    kind = EP_DEVICE_TYPE.get(ep)
    return kind.value if kind is not None else short_ep_name(ep)


def _asked_word(asked: str) -> str:
    # "NPU (strict)" -> "NPU"; "Automatic" means no particular device was asked for.
    return asked.replace(" (strict)", "").strip()


def _eps(eps: tuple[str, ...]) -> str:
    return ", ".join(short_ep_name(e) for e in eps)


@lru_cache(maxsize=256)  # batch rows repaint often; a placement and a choice always read the same
def describe_placement(placement: Placement, asked: str | None = None, *, ahead: bool = False) -> ChipText:
    """The chip's line, kind and details for a verified placement. `asked` is what the user chose
    (DeviceChoice.describe()); it defaults to what the placement records. `ahead`: the line speaks of
    the next run (a loaded model: "will run on"), not of one that happened ("Ran on").

    The short form follows one rule: the words go, the devices and counts stay
    ("Asked NPU → Ran on CPU · 94/94 nodes" -> "NPU→CPU · 94/94", "Split: QNN 90 · CPU 4" -> "QNN 90 · CPU 4")."""
    asked_text = _asked_word(asked if asked is not None else placement.requested)
    nodes = placement.nodes_per_ep
    total = placement.total_nodes
    primary = placement.primary_ep
    where = device_word(primary) if primary else tr("another device")
    if len(nodes) > 1:
        counts = " · ".join(f"{short_ep_name(ep)} {count}" for ep, count in nodes)
        ran, ran_short = tr("Split: ") + counts, counts
    elif total:
        ran, ran_short = f"{where} · {total}/{total} " + tr("nodes"), f"{where} · {total}/{total}"
    else:
        ran, ran_short = where, where
    wanted = placement.wanted_type.value if placement.wanted_type is not None else ""
    missed = bool(wanted) and wanted != where and len(nodes) <= 1  # asked for a device it did not get
    if placement.fell_back or missed:
        asked_shown = asked_text if asked_text and asked_text.lower() != "automatic" else (wanted or where)
        phrase = tr("Asked {asked} → will run on {ran}") if ahead else tr("Asked {asked} → Ran on {ran}")
        line, kind = phrase.format(asked=asked_shown, ran=ran), "warn"
        short = f"{asked_shown}→{ran_short}"
    elif len(nodes) > 1:
        line, kind, short = ran, "info", ran_short
    else:
        line, kind, short = ran, "ok", ran_short
    details = [tr("Asked for: {asked}").format(asked=asked if asked is not None else placement.requested)]
    ran_on = tr("Runs on: {ran}") if ahead else tr("Ran on: {ran}")
    details.append(ran_on.format(ran=placement.ran_on()))
    if placement.reason:
        details.append(tr("Why: {reason}").format(reason=placement.reason))
    elif len(nodes) > 1:
        details.append(tr("Why: the first device has no kernel for some operators; those nodes ran on the next one."))
    # The execution providers are the how, after the what: the session's own, then (when the planner offered
    # ONNX Runtime more than it kept) what it offered, so no line reads as a second "asked for".
    if placement.active_eps:
        details.append(tr("Execution providers in the session: {eps}").format(eps=_eps(placement.active_eps)))
    if placement.requested_eps and placement.requested_eps != placement.active_eps:
        details.append(tr("Offered to ONNX Runtime: {eps}").format(eps=_eps(placement.requested_eps)))
    return ChipText(kind, line, "\n".join(details), short if short != line else "")


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
    """A small popup with the whole explanation in the window's own colours and weight (it is not a child
    of the chip, so the chip's amber bold never reaches it); closes on any click outside it (Qt.Popup)."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("Popover")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.setSpacing(6)
        title = QLabel(tr("Where it ran"))
        title.setObjectName("SectionTitle")
        layout.addWidget(title)
        self.label = QLabel(printable(text))  # a reason may quote a model's or a driver's words: plain text
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setMinimumWidth(320)
        self.label.setMaximumWidth(480)
        layout.addWidget(self.label)
        self.setAccessibleName(tr("Placement details"))


class PlacementChip(QFrame):
    """One line: icon + text (+ "Why?" when there is something to explain). Empty until set.

    The chip is never cut: its minimum width is its short form's ("NPU→CPU · 94/94"), its size hint
    the whole line's, and it shows the whole line whenever it has the room for it."""

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
        # The chip, not the label, decides the width (from both forms); the label shows the form that fits.
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.label, 1)
        self.why = QToolButton()
        self.why.setText(tr("Why?"))
        self.why.setObjectName("ChipWhy")
        self.why.setAutoRaise(True)
        self.why.setAccessibleName(tr("Why it ran there"))
        self.why.clicked.connect(self.show_why)
        layout.addWidget(self.why)
        self.kind = "neutral"
        self.details = ""
        self.full_text = ""
        self.short_text = ""
        self._shown: tuple[str, str, str, str, bool] | None = None
        self._restyling = False
        self._watched: QWidget | None = None
        self.popover: WhyPopover | None = None
        self.setAccessibleName(tr("Where the model ran"))
        self.clear()

    # --- API ----------------------------------------------------------------------------------------
    def set_placement(self, placement: Placement | None, asked: str | None = None, *, ahead: bool = False) -> None:
        """Show where `placement` ran; `asked` is what the user chose (DeviceChoice.describe()); `ahead`:
        where the next run goes (a loaded model), not where one went."""
        if placement is None:
            self.clear()
            return
        chip = describe_placement(placement, asked, ahead=ahead)
        self._set(chip.kind, chip.text, chip.short, chip.details, show_why=chip.kind in {"warn", "info"})

    def set_state(self, kind: str, text: str, details: str = "", short: str = "") -> None:
        """A chip that is not a placement: "Loading on NPU…", "Strict: no NPU", ..."""
        self._set(kind, text, short, details, show_why=bool(details) and kind in {"warn", "error"})

    def clear(self) -> None:
        self._set("neutral", "", "", "", show_why=False)
        self.hide()

    def text(self) -> str:
        """The line shown now (the short form when the chip is narrow)."""
        return self.label.text()

    def show_why(self) -> None:
        if not self.details:
            return
        if self.popover is not None:
            self.popover.close()
        self.popover = WhyPopover(self.details, self.window())
        self.popover.adjustSize()
        at = self.mapToGlobal(QPoint(0, self.height() + 4))
        screen = self.screen().availableGeometry()  # kept on the screen: a chip near the right edge opens leftwards
        x = max(screen.left(), min(at.x(), screen.right() - self.popover.width()))
        y = at.y()
        if y + self.popover.height() > screen.bottom():  # no room below: above the chip
            y = self.mapToGlobal(QPoint(0, 0)).y() - 4 - self.popover.height()
        self.popover.move(x, y)
        self.popover.show()

    # --- size: the whole line when there is room, the short form when not ----------------------------
    def width_for(self, text: str) -> int:
        """The chip's width showing `text` (from font metrics: the label's own hint is not used)."""
        self.label.ensurePolished()
        margins = self.contentsMargins()
        layout = self.layout()
        assert layout is not None
        inner = layout.contentsMargins()
        spacing = layout.spacing()
        width = margins.left() + margins.right() + inner.left() + inner.right()
        width += self.glyph.sizeHint().width() + spacing + self.label.fontMetrics().horizontalAdvance(text) + 2
        if not self.why.isHidden():
            width += spacing + self.why.sizeHint().width()
        return width

    def sizeHint(self) -> QSize:
        return QSize(self.width_for(self.full_text), super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(self.width_for(self.short_text or self.full_text), super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        fits = not self.short_text or self.width() >= self.width_for(self.full_text)
        self.label.setText(self.full_text if fits else self.short_text)
        if not fits and self.maximumWidth() == QWIDGETSIZE_MAX:
            self.setMaximumWidth(self.minimumWidth())  # hug the short form (the room is given back below)
            self._watch_parent()

    def _unclamp(self) -> None:
        if self.maximumWidth() != QWIDGETSIZE_MAX:
            self.setMaximumWidth(QWIDGETSIZE_MAX)

    def _watch_parent(self) -> None:
        parent = self.parentWidget()
        if parent is not None and parent is not self._watched:
            if self._watched is not None:
                self._watched.removeEventFilter(self)
            parent.installEventFilter(self)
            self._watched = parent

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # The room around may have grown: offer the whole line again (the layout then gives the chip what fits).
        if watched is self._watched and event.type() == QEvent.Type.Resize:
            self._unclamp()
        return False

    # --- internals ----------------------------------------------------------------------------------
    def _set(self, kind: str, text: str, short: str, details: str, show_why: bool) -> None:
        if (kind, text, short, details, show_why) == self._shown:
            return  # a batch re-derives the state a few times a second: nothing to redo when unchanged
        self._shown = (kind, text, short, details, show_why)
        restyle = kind != self.kind or not self.glyph.pixmap() or self.glyph.pixmap().isNull()
        self.kind = kind
        self.details = details
        self.full_text, self.short_text = text, (short if short != text else "")
        whole = f"{text}\n{details}" if details and text else (details or text)  # the line is never lost
        self.setToolTip(plain_tooltip(whole))
        self.setAccessibleDescription(whole)
        self.why.setVisible(show_why)
        self.setProperty("chip", kind)
        if restyle:
            self._restyle()
        self._unclamp()
        self.setMinimumWidth(self.minimumSizeHint().width() if text else 0)
        self.updateGeometry()
        self._fit()
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
        # Colours set here (not only in the app style sheet) so the chip is right in any host widget; the
        # child selectors keep them to the chip's own line.
        self.setStyleSheet(
            f"QFrame#PlacementChip {{ background: {bg}; border: 1px solid {fg}; border-radius: 10px; }}"
            f"QFrame#PlacementChip > QLabel {{ color: {fg}; font-weight: 600; background: transparent; border: none; }}"
            f"QFrame#PlacementChip > QToolButton#ChipWhy {{ color: {fg}; text-decoration: underline; padding: 0 4px;"
            " border: none; }"
        )
        if self.full_text:
            self._unclamp()
            self.setMinimumWidth(self.minimumSizeHint().width())
            self.updateGeometry()

    def changeEvent(self, event: QEvent) -> None:
        # A live theme switch changes the palette: re-render the icon and colours with the new theme.
        live = (QEvent.Type.PaletteChange, QEvent.Type.StyleChange)
        if event.type() in live and not self._restyling:
            self._restyling = True
            try:
                self._restyle()
            finally:
                self._restyling = False
        super().changeEvent(event)
