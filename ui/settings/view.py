"""Settings: appearance, the shared device choice, chat defaults, downloads, the compiled-model cache,
diagnostics and the app's folders.

The view holds no state of its own: the device picker is the shared DeviceChoiceModel, the theme,
downloads switch and system prompt mirror the app's settings (set_* methods, no signal echo). What the
user changes goes out as signals.

Composed of cards: appearance, device, privacy and chat (built here), the compiled models
(ui.settings.cache.CompiledModelsCard) and diagnostics with the app's folders
(ui.settings.diagnostics.DiagnosticsCard), each with its own state and signals, wired to the settings
host by the app.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QCoreApplication, QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from engines import RANKING, StudioError
from ui.common.device_picker import DeviceChoiceModel, DevicePicker
from ui.common.icons import icon
from ui.common.plain import plain_tooltip
from ui.common.widgets import MARGIN, SPACING, BannerArea, Card, ViewHeader, muted_label
from ui.settings.cache import CompiledModelsCard
from ui.settings.diagnostics import DiagnosticsCard
from ui.settings.parts import section_title

__all__ = ["SettingsView", "options_summary"]


def tr(text: str) -> str:
    return QCoreApplication.translate("Settings", text)


THEMES = (("system", "System (follows your OS)"), ("light", "Light"), ("dark", "Dark"))
PROMPT_DEBOUNCE_MS = 500
SAVED_TEXT = "Changes are saved as you make them."
OPTION_NAMES = {
    "max_new_tokens": "max answer tokens",
    "temperature": "temperature",
    "top_p": "top-p",
    "top_k": "top-k",
    "repetition_penalty": "repetition penalty",
    "do_sample": "sampling",
}


def options_summary(options: Mapping[str, object]) -> str:
    if not options:
        return "Generation settings: the model's own defaults."
    parts = []
    for key, value in options.items():
        shown = (
            ("on" if value else "off")
            if isinstance(value, bool)
            else f"{value:g}"
            if isinstance(value, float)
            else str(value)
        )
        parts.append(f"{OPTION_NAMES.get(key, key)} {shown}")
    return "Generation settings changed from the model's defaults: " + ", ".join(parts) + "."


class SettingsView(QWidget):
    theme_changed = Signal(str)
    allow_downloads_changed = Signal(bool)
    system_prompt_changed = Signal(str)  # debounced while typing
    chat_settings_requested = Signal()  # show the Chat view's generation panel
    save_retry_requested = Signal()

    def __init__(
        self,
        choice_model: DeviceChoiceModel,
        theme: str = "system",
        allow_downloads: bool = False,
        system_prompt: str = "",
        chat_options: Mapping[str, object] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.choice_model = choice_model
        outer = QVBoxLayout(self)
        outer.setContentsMargins(MARGIN, MARGIN, MARGIN, 0)
        outer.setSpacing(SPACING)
        self.header = ViewHeader(
            tr("Settings"),
            tr("How NPU Studio looks, the device it runs on, what it may download, compiled models and diagnostics."),
        )
        self.save_label = muted_label(SAVED_TEXT, word_wrap=False)
        self.header.controls.addWidget(self.save_label)
        self.retry_button = QPushButton(icon("refresh"), tr("Retry saving"))
        self.retry_button.setObjectName("Primary")
        self.retry_button.clicked.connect(self.save_retry_requested)
        self.retry_button.hide()
        self.header.controls.addWidget(self.retry_button)
        outer.addWidget(self.header)
        self.banners = BannerArea()
        outer.addWidget(self.banners)
        self.cache = CompiledModelsCard()
        self.cache.notice.connect(lambda message, hint, severity: self._notice(message, hint, severity, "cache"))
        self.diagnostics = DiagnosticsCard()
        self.diagnostics.notice.connect(
            lambda message, hint, severity: self._notice(message, hint, severity, "diagnostics")
        )

        scroll = QScrollArea()
        scroll.setObjectName("SettingsScroll")
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        content = QWidget()
        content.setObjectName("SettingsContent")
        columns = QHBoxLayout(content)
        columns.setContentsMargins(0, 0, 0, SPACING)
        columns.setSpacing(SPACING + 4)
        left = QVBoxLayout()
        left.setSpacing(SPACING)
        right = QVBoxLayout()
        right.setSpacing(SPACING)
        for card in (
            self._appearance(theme),
            self._devices(),
            self._privacy(allow_downloads),
            self._chat(system_prompt, chat_options or {}),
        ):
            left.addWidget(card)
        left.addStretch(1)
        right.addWidget(self.cache, 1)
        right.addWidget(self.diagnostics)
        columns.addLayout(left, 2)
        columns.addLayout(right, 3)
        scroll.setWidget(content)
        scroll.viewport().setAutoFillBackground(False)
        content.setAutoFillBackground(False)
        outer.addWidget(scroll, 1)

    # --- sections -----------------------------------------------------------------------------------
    def _appearance(self, theme: str) -> Card:
        card = Card()
        card.body.addWidget(section_title("Appearance"))
        form = QFormLayout()
        form.setContentsMargins(0, 4, 0, 0)
        self.theme_box = QComboBox()
        self.theme_box.setAccessibleName(tr("Theme"))
        for value, label in THEMES:
            self.theme_box.addItem(label, value)
        self.theme_box.setCurrentIndex(max(0, self.theme_box.findData(theme)))
        self.theme_box.currentIndexChanged.connect(self._theme_picked)
        form.addRow(tr("Theme"), self.theme_box)
        card.body.addLayout(form)
        card.body.addWidget(
            muted_label(
                tr(
                    "System follows your OS (light or dark) while the app runs; every view, icon and chart "
                    "changes at once."
                )
            )
        )
        return card

    def _devices(self) -> Card:
        card = Card()
        card.body.addWidget(section_title("Device"))
        self.picker = DevicePicker(self.choice_model)
        card.body.addWidget(self.picker)
        card.body.addWidget(
            muted_label(
                tr(
                    "Classify and Chat run on this choice; their pickers show the same one. Strict: the chosen device "
                    "must run the whole model, or you get an error instead of a fallback."
                )
            )
        )
        self.devices_label = muted_label()
        card.body.addWidget(self.devices_label)
        self.choice_model.devices_changed.connect(self._show_devices)
        self._show_devices()
        return card

    def _privacy(self, allow_downloads: bool) -> Card:
        card = Card()
        card.body.addWidget(section_title("Privacy and network"))
        self.allow_box = QCheckBox(tr("Allow model downloads"))
        self.allow_box.setChecked(allow_downloads)
        self.allow_box.toggled.connect(self.allow_downloads_changed)
        card.body.addWidget(self.allow_box)
        card.body.addWidget(
            muted_label(
                tr(
                    "Off by default: NPU Studio works fully offline. When on, the Models view downloads a model from "
                    "the Hugging Face Hub only when you ask (its “Allow downloads” switch is this same setting)."
                )
            )
        )
        return card

    def _chat(self, system_prompt: str, options: Mapping[str, object]) -> Card:
        card = Card()
        card.body.addWidget(section_title("Chat"))
        card.body.addWidget(QLabel(tr("System prompt")))
        self.prompt_edit = QPlainTextEdit()
        self.prompt_edit.setAccessibleName(tr("System prompt"))
        self.prompt_edit.setPlaceholderText(tr("How the assistant should behave…"))
        self.prompt_edit.setFixedHeight(66)
        self.prompt_edit.setPlainText(system_prompt)
        self.prompt_edit.textChanged.connect(self._prompt_typed)
        card.body.addWidget(self.prompt_edit)
        card.body.addWidget(
            muted_label(tr("New chats use this prompt; the Chat view's side panel edits the same one."))
        )
        row = QHBoxLayout()
        self.options_label = muted_label(options_summary(options))
        row.addWidget(self.options_label, 1)
        self.chat_settings_button = QPushButton(icon("sliders"), tr("Generation settings…"))
        self.chat_settings_button.setToolTip(tr("Answer length and sampling, in the Chat view's side panel"))
        self.chat_settings_button.clicked.connect(self.chat_settings_requested)
        row.addWidget(self.chat_settings_button, 0, Qt.AlignmentFlag.AlignTop)
        card.body.addLayout(row)
        self._prompt_timer = QTimer(self)
        self._prompt_timer.setSingleShot(True)
        self._prompt_timer.setInterval(PROMPT_DEBOUNCE_MS)
        self._prompt_timer.timeout.connect(self._send_prompt)
        return card

    # --- state from the app -------------------------------------------------------------------------
    def set_allow_downloads(self, allowed: bool) -> None:
        with QSignalBlocker(self.allow_box):
            self.allow_box.setChecked(allowed)

    def set_system_prompt(self, text: str) -> None:
        if text != self.prompt_edit.toPlainText():
            self._prompt_timer.stop()
            with QSignalBlocker(self.prompt_edit):
                self.prompt_edit.setPlainText(text)

    def show_chat_settings(self, prompt: str, options: object) -> None:
        """The Chat view's panel changed the prompt or the generation settings."""
        self.set_system_prompt(prompt)
        self.options_label.setText(options_summary(options if isinstance(options, Mapping) else {}))

    def show_save_failed(self, error: object) -> None:
        """The settings could not be written (the window shows the banner): everything is kept, retry is offered."""
        message = error.user_text() if isinstance(error, StudioError) else str(error)
        self.save_label.setText(tr("Not saved yet: your changes are kept while the app runs."))
        self.save_label.setToolTip(plain_tooltip(message))
        self.retry_button.show()

    def show_saved(self) -> None:
        self.save_label.setText(SAVED_TEXT)
        self.save_label.setToolTip("")
        self.retry_button.hide()

    def refresh_cache(self) -> None:
        self.cache.refresh()

    # --- devices ------------------------------------------------------------------------------------
    def _show_devices(self) -> None:
        devices = self.choice_model.devices
        if not devices:
            self.devices_label.setText(tr("The devices of this machine show here once the Devices view has looked."))
            return
        usable = list(dict.fromkeys(d.type.value for d in devices if d.usable))
        missing = [t.value for t in RANKING if t.value not in usable]
        text = f"Usable here: {', '.join(usable) or 'none'}."
        if missing:
            text += f" Not available: {', '.join(missing)} (the Devices view says why)."
        self.devices_label.setText(text)

    # --- errors -------------------------------------------------------------------------------------
    def show_error(self, error: object) -> None:
        """A cache or diagnostics job failed: show why; the view is usable again."""
        self.diagnostics.show_failed()
        self.cache.set_busy(False)
        self.banners.show_error(error, cause="job")

    def _notice(self, message: str, hint: str, severity: str, cause: str) -> None:
        self.banners.show_message(message, hint, severity, cause)

    # --- edits --------------------------------------------------------------------------------------
    def _theme_picked(self, _index: int) -> None:
        self.theme_changed.emit(str(self.theme_box.currentData()))

    def _prompt_typed(self) -> None:
        self._prompt_timer.start()

    def flush(self) -> None:
        """Send a system prompt still being typed now (before the app closes)."""
        if self._prompt_timer.isActive():
            self._prompt_timer.stop()
            self._send_prompt()

    def _send_prompt(self) -> None:
        self.system_prompt_changed.emit(self.prompt_edit.toPlainText())
