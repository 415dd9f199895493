"""The chat composer: the message box (Enter sends, Shift+Enter starts a new line; a setting swaps
them), the send / stop button, a live token count of the draft against the model's context, and the
edit-mode strip ("Editing your last message").

A draft is counted with the model's tokenizer when the chat host can (an exact count, asked for as
the user types) and estimated from its length until then. A draft that cannot fit the context window
is refused before anything is sent or stored, and stays in the box.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ui.common.icons import icon
from ui.common.plain import plain_tooltip
from ui.common.theme import colors
from ui.common.widgets import muted_label

CHARS_PER_TOKEN = 4.0  # English prose through a BPE tokenizer; only until the exact count arrives
ANSWER_RESERVE = 16  # a prompt must leave at least this many tokens for the answer (and the template)
COUNT_DELAY_MS = 150


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


def estimate_tokens(text: str) -> int:
    return round(len(text) / CHARS_PER_TOKEN) if text.strip() else 0


class MessageBox(QPlainTextEdit):
    """A plain-text box where Enter sends (or, swapped, Shift+Enter / Ctrl+Enter sends)."""

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.enter_sends = True

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
            plain = mods == Qt.KeyboardModifier.NoModifier
            ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
            shift = bool(mods & Qt.KeyboardModifier.ShiftModifier)
            if ctrl or (plain and self.enter_sends) or (shift and not self.enter_sends):
                event.accept()
                self.submitted.emit()
                return
            if shift or plain:
                self.insertPlainText("\n")
                event.accept()
                return
        super().keyPressEvent(event)


class Composer(QWidget):
    """Everything under the transcript."""

    send_clicked = Signal()
    stop_clicked = Signal()
    cancel_edit_clicked = Signal()
    count_requested = Signal(str)  # the draft changed: count its tokens exactly (the host answers)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)

        self.edit_strip = QFrame()
        self.edit_strip.setObjectName("EditStrip")
        strip = QHBoxLayout(self.edit_strip)
        strip.setContentsMargins(10, 4, 4, 4)
        self.edit_label = QLabel(tr("Editing your last message"))
        self.edit_label.setObjectName("SectionTitle")
        strip.addWidget(self.edit_label)
        strip.addWidget(muted_label(tr("Send to replace it and its answer · Esc cancels"), word_wrap=True), 1)
        self.cancel_edit_button = QPushButton(tr("Cancel"))
        self.cancel_edit_button.setAccessibleName(tr("Cancel editing"))
        self.cancel_edit_button.clicked.connect(self.cancel_edit_clicked)
        strip.addWidget(self.cancel_edit_button)
        self.edit_strip.hide()
        layout.addWidget(self.edit_strip)

        row = QHBoxLayout()
        row.setSpacing(8)
        self.input = MessageBox()
        self.input.setAccessibleName(tr("Message"))
        self.input.setFixedHeight(72)
        self.input.submitted.connect(self.send_clicked)
        self.input.textChanged.connect(self._draft_changed)
        row.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        buttons.setSpacing(4)
        self.send_button = QPushButton(icon("send", colors().accent_text), tr("Send"))
        self.send_button.setObjectName("Primary")
        self.send_button.setMinimumHeight(40)
        self.send_button.setAccessibleName(tr("Send the message"))
        self.send_button.clicked.connect(self.send_clicked)
        buttons.addWidget(self.send_button)
        self.stop_button = QPushButton(icon("stop"), tr("Stop"))
        self.stop_button.setMinimumHeight(40)
        self.stop_button.setToolTip(tr("Stop the answer (Esc)"))
        self.stop_button.setAccessibleName(tr("Stop the answer"))
        self.stop_button.clicked.connect(self.stop_clicked)
        self.stop_button.hide()
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        row.addLayout(buttons)
        layout.addLayout(row)

        info = QHBoxLayout()
        info.setSpacing(8)
        self.context_label = muted_label(tr("Context: —"), word_wrap=False)
        self.context_label.setSizePolicy(QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Preferred)
        info.addWidget(self.context_label)
        self.context_bar = QProgressBar()
        self.context_bar.setTextVisible(False)
        self.context_bar.setFixedSize(110, 8)
        self.context_bar.setRange(0, 1)
        self.context_bar.setValue(0)
        self.context_bar.setAccessibleName(tr("Context used"))
        info.addWidget(self.context_bar)
        self.draft_label = muted_label("", word_wrap=False)
        self.draft_label.setAccessibleName(tr("Draft length"))
        self.draft_label.setSizePolicy(QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Preferred)
        info.addWidget(self.draft_label)
        info.addStretch(1)
        self.keys_label = muted_label("", word_wrap=False)
        info.addWidget(self.keys_label)
        layout.addLayout(info)

        self.context_used = 0
        self.context_length = 0
        self._enter_sends = True
        self._send_reason = ""  # why nothing can be sent now ("" when a message can be)
        self.overhead = 0  # tokens the system prompt adds to every request (estimated)
        self._exact: tuple[str, int] | None = None  # (text, tokens) as counted by the model's tokenizer
        self._count_timer = QTimer(self)
        self._count_timer.setSingleShot(True)
        self._count_timer.setInterval(COUNT_DELAY_MS)
        self._count_timer.timeout.connect(lambda: self.count_requested.emit(self.input.toPlainText()))
        self.set_enter_sends(True)

    def restyle(self) -> None:
        self.send_button.setIcon(icon("send", colors().accent_text))
        self.stop_button.setIcon(icon("stop"))
        self._show_draft()

    # --- keys -----------------------------------------------------------------------------------
    def set_enter_sends(self, enter_sends: bool) -> None:
        self.input.enter_sends = enter_sends
        if enter_sends:
            keys, hint = tr("Enter to send · Shift+Enter for a new line"), tr("Message the model…")
        else:
            keys, hint = tr("Ctrl+Enter to send · Enter for a new line"), tr("Message the model…")
        self.keys_label.setText(keys)
        self.input.setPlaceholderText(hint)
        self._enter_sends = enter_sends
        self._show_send_state()

    # --- busy / edit ----------------------------------------------------------------------------
    def set_busy(self, busy: bool) -> None:
        self.send_button.setVisible(not busy)
        self.stop_button.setVisible(busy)
        self.stop_button.setEnabled(busy)
        self.stop_button.setText(tr("Stop"))

    def set_send_reason(self, reason: str) -> None:
        """Why no message can be sent now (no model can answer): Send is disabled and says why. "" enables it."""
        if reason != self._send_reason:
            self._send_reason = reason
            self._show_send_state()

    def _show_send_state(self) -> None:
        self.send_button.setEnabled(not self._send_reason)
        if self._send_reason:
            self.send_button.setToolTip(plain_tooltip(self._send_reason))  # an error's words: shown as text
        else:
            keys = "Enter" if self._enter_sends else "Ctrl+Enter"
            self.send_button.setToolTip(tr("Send ({keys})").format(keys=keys))

    def set_stopping(self) -> None:
        self.stop_button.setEnabled(False)
        self.stop_button.setText(tr("Stopping…"))

    def set_editing(self, editing: bool) -> None:
        c = colors()
        self.edit_strip.setStyleSheet(
            f"#EditStrip {{ background: {c.info_bg}; border: 1px solid {c.border}; border-radius: 6px; }}"
        )
        self.edit_strip.setVisible(editing)
        self.send_button.setText(tr("Resend") if editing else tr("Send"))

    # --- counting -------------------------------------------------------------------------------
    def set_context(self, used: int, length: int) -> None:
        self.context_used, self.context_length = used, length
        if not length:
            self.context_label.setText(tr("Context: —"))
            self.context_bar.setRange(0, 1)
            self.context_bar.setValue(0)
        else:
            self.context_bar.setRange(0, length)
            self.context_bar.setValue(min(used, length))
            self.context_label.setText(
                tr("Context: {used} / {length} tokens").format(used=f"{used:,}", length=f"{length:,}")
            )
            self.context_bar.setToolTip(
                tr("{share} of the model's context window is used").format(share=f"{used / length:.0%}")
            )
        self._show_draft()

    def recount(self) -> None:
        """Another model (another tokenizer): forget the count and ask again."""
        self._exact = None
        self._show_draft()
        if self.input.toPlainText().strip():
            self._count_timer.start()

    def set_exact_count(self, text: str, tokens: int) -> None:
        """The chat host counted `text` with the model's tokenizer."""
        self._exact = (text, tokens)
        self._show_draft()

    def draft_tokens(self, text: str | None = None) -> tuple[int, bool]:
        """(tokens of the draft, or of `text`; exact?)."""
        text = self.input.toPlainText() if text is None else text
        if self._exact is not None and self._exact[0].strip() == text.strip():
            return self._exact[1], True
        return estimate_tokens(text), False

    def too_long(self, text: str | None = None) -> str:
        """Why the draft (or `text`) cannot be sent (it cannot fit the context window), or "" when it can."""
        if not self.context_length:
            return ""
        tokens, exact = self.draft_tokens(text)
        room = self.context_length - self.overhead - ANSWER_RESERVE
        if tokens <= room:
            return ""
        about = "" if exact else tr("about ")
        return tr(
            "This message is {about}{tokens} tokens; the model's context holds {length} "
            "(with the system prompt and room for an answer, at most {room} for a message)."
        ).format(about=about, tokens=f"{tokens:,}", length=f"{self.context_length:,}", room=f"{max(room, 0):,}")

    def _draft_changed(self) -> None:
        self._show_draft()
        if self.input.toPlainText().strip():
            self._count_timer.start()

    def _show_draft(self) -> None:
        text = self.input.toPlainText()
        if not text.strip():
            self.draft_label.setText("")
            self.keys_label.setVisible(True)
            return
        tokens, exact = self.draft_tokens()
        shown = f"{tokens:,}" if exact else f"≈{tokens:,}"
        if tokens == 1:
            label = tr("Draft: 1 token") if exact else tr("Draft: ≈1 token")
        else:
            label = tr("Draft: {tokens} tokens").format(tokens=shown)
        over = bool(self.too_long())
        self.draft_label.setText(label + (tr(" · too long for the context") if over else ""))
        style = f"color: {colors().error};" if over else ""
        if self.draft_label.styleSheet() != style:  # a style sheet pass only when it changes
            self.draft_label.setStyleSheet(style)
        self.keys_label.setVisible(not over)  # the refusal is what matters now: give it the room
