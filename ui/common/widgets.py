"""Small shared widgets: error banners, cards, badges, a busy spinner, view headers, empty states,
read-only table cells. Every label they make is plain text and every tooltip from outside text is
escaped (ui.common.plain: the one rule for text from outside the app)."""

from __future__ import annotations

import re
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QEvent, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engines import StudioError, rich_text
from ui.common.icons import icon, pixmap, role_of
from ui.common.plain import plain_label, plain_text, plain_tooltip, rich_label
from ui.common.theme import colors


def tr(text: str) -> str:
    return QCoreApplication.translate("Widgets", text)


SPACING = 12
MARGIN = 24


def repolish(widget: QWidget) -> None:
    """Re-apply style rules after a dynamic property changed."""
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
    widget.update()


def set_badge(label: QLabel, kind: str, text: str | None = None) -> None:
    """Turn a label into a pill: kind is ok | warn | error | info | neutral."""
    if text is not None:
        label.setText(text)
    label.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
    label.setProperty("badge", kind)
    repolish(label)


def muted_label(text: str = "", word_wrap: bool = True) -> QLabel:
    """A secondary line of text (plain text, whatever it holds)."""
    return plain_label(text, muted=True, word_wrap=word_wrap)


_CLI_WORDS = (
    (re.compile(r"\s*\(`npu-studio [^`]*`\)"), ""),  # "(`npu-studio models remove x`)"
    (re.compile(r"\s*\(--[a-z-]+\)"), ""),  # "(--name)"
    (re.compile(r"Add --labels FILE"), "Choose its labels file"),
    (re.compile(r"--labels( FILE)?"), "its labels file"),
)


def gui_words(text: str) -> str:
    """Engine messages are shared with the CLI: in the app, command-line flags become plain words."""
    for pattern, replacement in _CLI_WORDS:
        text = pattern.sub(replacement, text)
    return text


def error_text(error: object) -> tuple[str, str]:
    """(message, hint) for anything a host reports as failed, in the app's words."""
    if isinstance(error, StudioError):
        return gui_words(error.message), gui_words(error.hint)
    message = str(error) or type(error).__name__
    return gui_words(message), ""


class Glyph(QLabel):
    """An icon in a label, tinted by palette role and drawn again after a live theme switch."""

    def __init__(self, name: str, size: int, color: str | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._name, self._size, self._role = name, size, role_of(color)
        self._draw()

    def _draw(self) -> None:
        self.setPixmap(pixmap(self._name, self._size, self._role))

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.StyleChange:
            self._draw()
        super().changeEvent(event)


class Banner(QFrame):
    """A non-blocking message across the top of a view: what happened, and what to do."""

    closed = Signal()

    def __init__(self, message: str, hint: str = "", severity: str = "error", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Banner")
        self.setProperty("severity", severity)
        self.message = message
        self.hint = hint
        self.severity = severity
        c = colors()
        tint = {"error": c.error, "warning": c.warn}.get(severity, c.accent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 10, 8, 10)
        layout.setSpacing(10)
        glyph = Glyph({"error": "error", "warning": "warning"}.get(severity, "info"), 20, tint)
        glyph.setAlignment(Qt.AlignmentFlag.AlignTop)
        layout.addWidget(glyph)
        text = f"<b>{rich_text(message)}</b>"  # the app's markup; the message and hint escaped
        if hint:
            text += f"<br>{rich_text(hint)}"
        self.label = rich_label(text)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.label, 1)
        close = QToolButton()
        close.setIcon(icon("close"))
        close.setToolTip(tr("Dismiss"))
        close.setAutoRaise(True)
        close.clicked.connect(self.dismiss)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)

    def add_action(self, text: str, callback: Callable[[], None]) -> QPushButton:
        """A button in the banner (before the close button); using it dismisses the banner."""
        button = QPushButton(text)
        button.clicked.connect(callback)
        button.clicked.connect(self.dismiss)
        layout = self.layout()
        assert isinstance(layout, QHBoxLayout)
        layout.insertWidget(layout.count() - 1, button, 0, Qt.AlignmentFlag.AlignTop)
        return button

    def dismiss(self) -> None:
        self.hide()
        self.closed.emit()
        self.deleteLater()


class BannerArea(QWidget):
    """The banners of one view: one per cause, the newest on top.

    A banner belongs to the state that raised it: each is shown for a cause (the view's name for it, e.g.
    "input", "device", "export"), a new banner for a cause replaces the one it had, and `clear(cause)` takes it
    away when that cause is gone. Banners with no cause given share the cause "", so the newest of them
    replaces the older. At most `limit` causes are shown at a time (the oldest goes)."""

    def __init__(self, parent: QWidget | None = None, limit: int = 3) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._limit = limit
        self._banners: dict[str, Banner] = {}  # cause -> banner, oldest first
        self.hide()

    def show_error(self, error: object, severity: str = "error", cause: str = "") -> Banner:
        message, hint = error_text(error)
        return self.show_message(message, hint, severity, cause)

    def show_message(self, message: str, hint: str = "", severity: str = "info", cause: str = "") -> Banner:
        shown = self._banners.get(cause)
        if shown is not None and shown.message == message and shown.hint == hint and shown.severity == severity:
            return shown
        if shown is not None:
            self._drop(cause)
        banner = Banner(message, hint, severity, self)
        banner.closed.connect(lambda b=banner, c=cause: self._forget(c, b))
        self._banners[cause] = banner
        self._layout.insertWidget(0, banner)  # the newest on top
        while len(self._banners) > self._limit:
            self._drop(next(iter(self._banners)))
        self.show()
        return banner

    def shown(self) -> list[Banner]:
        """The banners shown, newest first."""
        return list(reversed(self._banners.values()))

    def messages(self) -> list[str]:
        """The messages shown, newest first."""
        return [b.message for b in self.shown()]

    def banner(self, cause: str = "") -> Banner | None:
        return self._banners.get(cause)

    def clear(self, cause: str | None = None) -> None:
        """Take away the banner of `cause`, or every banner (None)."""
        for key in list(self._banners) if cause is None else [cause]:
            self._drop(key)

    def _drop(self, cause: str) -> None:
        banner = self._banners.pop(cause, None)
        if banner is not None:
            banner.dismiss()
        if not self._banners:
            self.hide()

    def _forget(self, cause: str, banner: Banner) -> None:
        if self._banners.get(cause) is banner:
            del self._banners[cause]
        if not self._banners:
            self.hide()


class Card(QFrame):
    """A rounded surface with a vertical layout and generous padding."""

    def __init__(self, parent: QWidget | None = None, object_name: str = "Card") -> None:
        super().__init__(parent)
        self.setObjectName(object_name)
        self.body = QVBoxLayout(self)
        self.body.setContentsMargins(18, 16, 18, 16)
        self.body.setSpacing(8)


class Spinner(QWidget):
    """A small busy indicator that animates only while running."""

    def __init__(self, size: int = 18, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFixedSize(size, size)
        self._angle = 0
        self._timer = QTimer(self)
        self._timer.setInterval(40)
        self._timer.timeout.connect(self._step)
        self.hide()

    def start(self) -> None:
        self.show()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self.hide()

    @property
    def running(self) -> bool:
        return self._timer.isActive()

    def _step(self) -> None:
        self._angle = (self._angle + 30) % 360
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        width = max(2.0, self.width() / 8)
        rect = QRectF(width, width, self.width() - 2 * width, self.height() - 2 * width)
        track = QColor(colors().border)
        painter.setPen(QPen(track, width))
        painter.drawEllipse(rect)
        pen = QPen(QColor(colors().accent), width)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.setPen(pen)
        painter.drawArc(rect, -self._angle * 16, 100 * 16)
        painter.end()


class ViewHeader(QWidget):
    """Title and controls on one row, the description below across the whole width (it wraps rather
    than squeezing the controls or being cut)."""

    def __init__(self, title: str, subtitle: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        texts = QVBoxLayout(self)
        texts.setContentsMargins(0, 0, 0, 0)
        texts.setSpacing(2)
        row = QHBoxLayout()
        row.setSpacing(SPACING)
        self.title = plain_label(title, word_wrap=False)
        self.title.setObjectName("ViewTitle")
        self.title.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        row.addWidget(self.title)
        row.addStretch(1)
        self.controls = QHBoxLayout()
        self.controls.setSpacing(8)
        self.controls.setAlignment(Qt.AlignmentFlag.AlignVCenter)
        row.addLayout(self.controls)
        texts.addLayout(row)
        self.subtitle = muted_label(subtitle)
        self.subtitle.setVisible(bool(subtitle))
        texts.addWidget(self.subtitle)


class EmptyState(QWidget):
    """A centred icon, a sentence and an optional action, for views with nothing to show yet."""

    action_clicked = Signal()

    def __init__(
        self, icon_name: str, title: str, text: str = "", action: str = "", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        layout.addStretch(1)
        glyph = Glyph(icon_name, 48, "muted")
        glyph.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(glyph)
        self.title = plain_label(title)
        self.title.setObjectName("SectionTitle")
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(self.title)
        self.text = muted_label(text)
        self.text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(self.text)
        if action:
            button = QPushButton(action)
            button.setObjectName("Primary")
            button.clicked.connect(self.action_clicked)
            row = QHBoxLayout()
            row.addStretch(1)
            row.addWidget(button)
            row.addStretch(1)
            layout.addLayout(row)
        layout.addStretch(2)


def table_item(text: str, tooltip: str = "", data: object = None, right: bool = False) -> QTableWidgetItem:
    """A read-only table cell: its text on one line, an optional tooltip (both shown as the text they
    are), data under UserRole, right-aligned numbers."""
    item = QTableWidgetItem(plain_text(text, one_line=True))
    item.setFlags(Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled)
    if tooltip:
        item.setToolTip(plain_tooltip(tooltip))
    if data is not None:
        item.setData(Qt.ItemDataRole.UserRole, data)
    if right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item
