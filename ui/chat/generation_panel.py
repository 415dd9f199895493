"""System prompt and generation settings. Only values that differ from the engine's defaults are kept
(as overrides), so a new engine default reaches users who never touched the setting."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QCoreApplication, QSignalBlocker, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ui.common.widgets import muted_label

# Shown until the chat host reports the engine's own defaults (it does when the model loads).
Value = int | float | bool  # a generation option's value
FALLBACK_DEFAULTS: dict[str, Value] = {
    "max_new_tokens": 256,
    "temperature": 0.7,
    "top_p": 0.9,
    "top_k": 40,
    "repetition_penalty": 1.15,
    "do_sample": False,
}


def tr(text: str) -> str:
    return QCoreApplication.translate("GenerationPanel", text)


class GenerationPanel(QWidget):
    changed = Signal()  # debounced: system prompt or options changed by the user
    enter_sends_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumWidth(250)
        self.setMaximumWidth(340)
        self._defaults = dict(FALLBACK_DEFAULTS)
        self._overrides: dict[str, Value] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 0, 0, 0)
        layout.setSpacing(10)
        title = QLabel(tr("System prompt"))
        title.setObjectName("SectionTitle")
        layout.addWidget(title)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText(tr("How the assistant should behave…"))
        self.system_prompt.setAccessibleName(tr("System prompt"))
        self.system_prompt.setFixedHeight(110)
        layout.addWidget(self.system_prompt)
        title = QLabel(tr("Generation"))
        title.setObjectName("SectionTitle")
        layout.addWidget(title)
        form = QFormLayout()
        form.setSpacing(8)
        self.max_new_tokens = QSpinBox()
        self.max_new_tokens.setRange(1, 4096)
        self.max_new_tokens.setToolTip(tr("The longest answer, in tokens"))
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.05, 2.0)
        self.temperature.setSingleStep(0.05)
        self.top_p = QDoubleSpinBox()
        self.top_p.setRange(0.05, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_k = QSpinBox()
        self.top_k.setRange(1, 500)
        self.repetition_penalty = QDoubleSpinBox()
        self.repetition_penalty.setRange(1.0, 2.0)
        self.repetition_penalty.setSingleStep(0.05)
        self.repetition_penalty.setToolTip(tr("Above 1.0 discourages repeating words; small models need it"))
        self.do_sample = QCheckBox(tr("Sample (off: always the likeliest token)"))
        for label, widget in (
            (tr("Max answer tokens"), self.max_new_tokens),
            (tr("Temperature"), self.temperature),
            (tr("Top-p"), self.top_p),
            (tr("Top-k"), self.top_k),
            (tr("Repetition penalty"), self.repetition_penalty),
        ):
            widget.setAccessibleName(label)
            form.addRow(label, widget)
        form.addRow(self.do_sample)
        layout.addLayout(form)
        layout.addWidget(muted_label(tr("Temperature, top-p and top-k apply when sampling is on.")))
        reset = QPushButton(tr("Reset to defaults"))
        reset.clicked.connect(self.reset)
        layout.addWidget(reset)
        title = QLabel(tr("Keys"))
        title.setObjectName("SectionTitle")
        layout.addWidget(title)
        self.enter_sends = QCheckBox(tr("Enter sends (Shift+Enter: new line)"))
        self.enter_sends.setToolTip(tr("Off: Enter starts a new line and Ctrl+Enter sends"))
        self.enter_sends.setChecked(True)
        self.enter_sends.toggled.connect(self.enter_sends_changed)
        layout.addWidget(self.enter_sends)
        layout.addStretch(1)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(400)
        self._debounce.timeout.connect(self.changed)
        self._widgets: dict[str, QSpinBox | QDoubleSpinBox] = {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "repetition_penalty": self.repetition_penalty,
        }
        for key, widget in self._widgets.items():
            widget.valueChanged.connect(lambda _v, k=key: self._edited(k))
        self.do_sample.toggled.connect(lambda _v: self._edited("do_sample"))
        self.system_prompt.textChanged.connect(self._debounce.start)
        self._show()

    # --- values ---------------------------------------------------------------------------------
    def options(self) -> dict[str, Value]:
        """The overrides (what differs from the defaults)."""
        return dict(self._overrides)

    def set_options(self, overrides: Mapping[str, object]) -> None:
        self._overrides = {k: v for k, v in overrides.items() if k in FALLBACK_DEFAULTS and isinstance(v, Value)}
        self._show()

    def set_defaults(self, defaults: Mapping[str, object]) -> None:
        given = {k: v for k, v in defaults.items() if isinstance(v, Value)}
        self._defaults = {k: given.get(k, v) for k, v in FALLBACK_DEFAULTS.items()}
        self._overrides = {k: v for k, v in self._overrides.items() if v != self._defaults.get(k)}
        self._show()

    def set_enter_sends(self, enter_sends: bool) -> None:
        with QSignalBlocker(self.enter_sends):
            self.enter_sends.setChecked(enter_sends)

    def prompt(self) -> str:
        return self.system_prompt.toPlainText()

    def set_prompt(self, text: str) -> None:
        with QSignalBlocker(self.system_prompt):
            self.system_prompt.setPlainText(text)

    def reset(self) -> None:
        self._overrides = {}
        self._show()
        self._debounce.start()

    def flush(self) -> None:
        """Emit a pending change now (before a send, or on close)."""
        if self._debounce.isActive():
            self._debounce.stop()
            self.changed.emit()

    # --- internals ------------------------------------------------------------------------------
    def _value(self, key: str) -> Value:
        return self._overrides.get(key, self._defaults[key])

    def _show(self) -> None:
        for key, widget in self._widgets.items():
            with QSignalBlocker(widget):
                value = self._value(key)
                if isinstance(widget, QSpinBox):
                    widget.setValue(int(value))
                else:
                    widget.setValue(float(value))
        with QSignalBlocker(self.do_sample):
            self.do_sample.setChecked(bool(self._value("do_sample")))
        sampling = bool(self._value("do_sample"))
        for key in ("temperature", "top_p", "top_k"):
            self._widgets[key].setEnabled(sampling)

    def _edited(self, key: str) -> None:
        widget = self._widgets.get(key)
        value: Value = self.do_sample.isChecked() if widget is None else widget.value()
        if isinstance(value, float):
            value = round(value, 4)
        if value == self._defaults[key]:
            self._overrides.pop(key, None)
        else:
            self._overrides[key] = value
        if key == "do_sample":
            self._show()
        self._debounce.start()
