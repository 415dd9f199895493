"""Settings: appearance, the shared device choice, chat defaults, downloads, the compiled-model cache,
diagnostics and the app's folders.

The view holds no state of its own: the device picker is the shared DeviceChoiceModel, the theme,
downloads switch and system prompt mirror the app's settings (set_* methods, no signal echo), and the
cache and diagnostics results come from the settings host. What the user changes goes out as signals.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QSignalBlocker, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.qtcompat import emit
from engines.errors import StudioError
from engines.models.library import format_bytes
from engines.text import rich_text
from engines.types import DeviceType, short_ep_name
from ui.device_picker import DeviceChoiceModel, DevicePicker
from ui.icons import icon
from ui.widgets import MARGIN, SPACING, BannerArea, Card, Spinner, ViewHeader, muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Settings", text)


THEMES = (("system", "System (follows your OS)"), ("light", "Light"), ("dark", "Dark"))
CACHE_COLUMNS = ("Model", "EP", "Versions", "Size", "Created")
EMPTY_CACHE = "No compiled models yet — the NPU compiles a model on its first load; CPU and GPU need none."
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
FOLDERS = (
    ("data", "Data", "conversations and your models"),
    ("logs", "Logs", "the log file and its older copies"),
    ("cache", "Cache", "compiled models"),
)


def _section(title: str) -> QLabel:
    label = QLabel(title)
    label.setObjectName("SectionTitle")
    return label


class PathLabel(QLabel):
    """A file path that fits its space: elided in the middle, the full path in the tooltip, selectable."""

    def __init__(self, path: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setProperty("muted", True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(80)
        self._path = ""
        self.set_path(path)

    @property
    def path(self) -> str:
        return self._path

    def set_path(self, path: str) -> None:
        self._path = path
        self.setToolTip(path)
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = max(40, self.width())
        self.setText(self.fontMetrics().elidedText(self._path, Qt.TextElideMode.ElideMiddle, width))


def _cache_item(text: str, tooltip: str = "", data: Any = None, right: bool = False) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled)
    if tooltip:
        item.setToolTip(tooltip)
    if data is not None:
        item.setData(Qt.ItemDataRole.UserRole, data)
    if right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


def versions_text(entry: Any) -> str:
    parts = [entry.ep_version or "EP version unknown", f"ONNX Runtime {entry.ort_version}"]
    if entry.driver_version:
        parts.append(f"driver {entry.driver_version}")
    return " · ".join(parts)


def options_summary(options: dict[str, Any]) -> str:
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
    cache_refresh_requested = Signal()
    cache_remove_requested = Signal(object)  # list of cache entry digests
    cache_clear_requested = Signal()
    diagnostics_requested = Signal(str)  # where to write the zip

    def __init__(
        self,
        choice_model: DeviceChoiceModel,
        theme: str = "system",
        allow_downloads: bool = False,
        system_prompt: str = "",
        chat_options: dict[str, Any] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.choice_model = choice_model
        self.places: dict[str, str] = {}
        self.listing: Any = None
        self.cache_busy = False
        self.diagnostics_busy = False
        self.last_export = ""
        self.last_export_dir = ""
        # Seams for tests: how the view asks for confirmations and paths, and opens folders.
        self.confirm: Callable[[str, str], bool] = self._confirm_dialog
        self.choose_zip: Callable[[], str] = self._zip_dialog
        self.open_url: Callable[[QUrl], bool] = QDesktopServices.openUrl

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
        right.addWidget(self._cache(), 1)
        right.addWidget(self._diagnostics())
        columns.addLayout(left, 2)
        columns.addLayout(right, 3)
        scroll.setWidget(content)
        scroll.viewport().setAutoFillBackground(False)
        content.setAutoFillBackground(False)
        outer.addWidget(scroll, 1)
        self._update_cache_buttons()

    # --- sections -----------------------------------------------------------------------------------
    def _appearance(self, theme: str) -> Card:
        card = Card()
        card.body.addWidget(_section("Appearance"))
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
        card.body.addWidget(_section("Device"))
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
        card.body.addWidget(_section("Privacy and network"))
        self.allow_box = QCheckBox(tr("Allow model downloads"))
        self.allow_box.setChecked(allow_downloads)
        self.allow_box.toggled.connect(lambda allowed: emit(self.allow_downloads_changed, allowed))
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

    def _chat(self, system_prompt: str, options: dict[str, Any]) -> Card:
        card = Card()
        card.body.addWidget(_section("Chat"))
        card.body.addWidget(QLabel(tr("System prompt")))
        self.prompt_edit = QPlainTextEdit()
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

    def _cache(self) -> Card:
        card = Card()
        head = QHBoxLayout()
        head.addWidget(_section("Compiled models"))
        head.addStretch(1)
        self.cache_spinner = Spinner(16)
        head.addWidget(self.cache_spinner)
        self.cache_refresh_button = QToolButton()
        self.cache_refresh_button.setIcon(icon("refresh"))
        self.cache_refresh_button.setToolTip(tr("List the compiled models again"))
        self.cache_refresh_button.clicked.connect(self.refresh_cache)
        head.addWidget(self.cache_refresh_button)
        card.body.addLayout(head)
        card.body.addWidget(
            muted_label(
                tr(
                    "An NPU compiles a model for itself on its first load; NPU Studio keeps the result (an EPContext "
                    "model) so later loads are fast. A compiled model only loads with the EP, SDK and driver that made "
                    "it: after an update it is compiled again."
                )
            )
        )
        self.cache_stack = QStackedWidget()
        self.cache_table = QTableWidget(0, len(CACHE_COLUMNS))
        self.cache_table.setHorizontalHeaderLabels(list(CACHE_COLUMNS))
        self.cache_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.cache_table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.cache_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.cache_table.verticalHeader().setVisible(False)
        self.cache_table.setAlternatingRowColors(True)
        self.cache_table.setWordWrap(False)
        header = self.cache_table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.cache_table.itemSelectionChanged.connect(self._update_cache_buttons)
        self.cache_table.setMinimumHeight(150)
        self.cache_stack.addWidget(self.cache_table)
        empty = QFrame()
        empty.setObjectName("EmptyCard")
        empty_layout = QVBoxLayout(empty)
        empty_layout.setContentsMargins(18, 18, 18, 18)
        self.cache_empty = muted_label(EMPTY_CACHE)
        self.cache_empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        empty_layout.addWidget(self.cache_empty)
        self.cache_stack.addWidget(empty)
        self.cache_stack.setCurrentIndex(1)
        card.body.addWidget(self.cache_stack, 1)
        row = QHBoxLayout()
        self.cache_summary = muted_label(tr("Not listed yet."), word_wrap=False)
        row.addWidget(self.cache_summary, 1)
        self.remove_button = QPushButton(icon("delete"), tr("Remove selected"))
        self.remove_button.clicked.connect(self._remove_selected)
        self.clear_button = QPushButton(icon("delete"), tr("Clear all"))
        self.clear_button.clicked.connect(self._clear_all)
        row.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.clear_button, 0, Qt.AlignmentFlag.AlignTop)
        card.body.addLayout(row)
        self.cache_folder_label = PathLabel()
        card.body.addWidget(self.cache_folder_label)
        return card

    def _diagnostics(self) -> Card:
        card = Card()
        card.body.addWidget(_section("Diagnostics"))
        card.body.addWidget(
            muted_label(
                tr(
                    "Checks every device as `npu-studio doctor` does (without the chat check) and saves a zip with "
                    "the report, the recent logs and your settings — no conversations, no models. Attach it to a "
                    "bug report."
                )
            )
        )
        row = QHBoxLayout()
        self.export_button = QPushButton(icon("export"), tr("Export diagnostics…"))
        self.export_button.setObjectName("Primary")
        self.export_button.clicked.connect(self._export_clicked)
        row.addWidget(self.export_button)
        self.diagnostics_spinner = Spinner(16)
        row.addWidget(self.diagnostics_spinner)
        row.addStretch(1)
        self.show_export_button = QPushButton(icon("folder"), tr("Show in folder"))
        self.show_export_button.setToolTip(tr("Open the folder that holds the exported zip"))
        self.show_export_button.clicked.connect(self._show_export)
        self.show_export_button.hide()
        row.addWidget(self.show_export_button)
        card.body.addLayout(row)
        self.diagnostics_label = muted_label()
        self.diagnostics_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.diagnostics_label.hide()
        card.body.addWidget(self.diagnostics_label)

        grid = QGridLayout()
        grid.setContentsMargins(0, 8, 0, 0)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(4)
        grid.setColumnStretch(1, 1)
        self.folder_labels: dict[str, PathLabel] = {}
        self.folder_buttons: dict[str, QPushButton] = {}
        for row_index, (key, title, what) in enumerate(FOLDERS):
            name = QLabel(title)
            name.setToolTip(what)
            grid.addWidget(name, row_index, 0)
            path = PathLabel()
            self.folder_labels[key] = path
            grid.addWidget(path, row_index, 1)
            button = QPushButton(icon("folder"), tr("Open"))
            button.setToolTip(f"Open the {title.lower()} folder ({what})")
            button.clicked.connect(lambda _=False, k=key: self.open_folder(k))
            self.folder_buttons[key] = button
            grid.addWidget(button, row_index, 2)
            grid.setRowMinimumHeight(row_index, button.sizeHint().height())
        self.log_file_label = PathLabel()
        self.settings_file_label = PathLabel()
        for row_index, (title, label) in enumerate(
            (("Log file", self.log_file_label), ("Settings file", self.settings_file_label)), start=len(FOLDERS)
        ):
            grid.addWidget(QLabel(title), row_index, 0)
            grid.addWidget(label, row_index, 1, 1, 2)
            grid.setRowMinimumHeight(row_index, self.export_button.sizeHint().height())
        card.body.addLayout(grid)
        return card

    # --- state from the app -------------------------------------------------------------------------
    def set_places(self, places: dict[str, str]) -> None:
        """Folders: data, logs, cache (opened by the buttons); log_file and settings_file (shown)."""
        self.places = dict(places)
        for key, label in self.folder_labels.items():
            label.set_path(self.places.get(key, ""))
            self.folder_buttons[key].setEnabled(bool(self.places.get(key)))
        self.log_file_label.set_path(self.places.get("log_file", ""))
        self.settings_file_label.set_path(self.places.get("settings_file", ""))

    def set_theme(self, theme: str) -> None:
        with QSignalBlocker(self.theme_box):
            self.theme_box.setCurrentIndex(max(0, self.theme_box.findData(theme)))

    def theme(self) -> str:
        return str(self.theme_box.currentData())

    def set_allow_downloads(self, allowed: bool) -> None:
        with QSignalBlocker(self.allow_box):
            self.allow_box.setChecked(allowed)

    def set_system_prompt(self, text: str) -> None:
        if text != self.prompt_edit.toPlainText():
            self._prompt_timer.stop()
            with QSignalBlocker(self.prompt_edit):
                self.prompt_edit.setPlainText(text)

    def set_chat_options(self, options: dict[str, Any]) -> None:
        self.options_label.setText(options_summary(dict(options)))

    def show_chat_settings(self, prompt: str, options: object) -> None:
        """The Chat view's panel changed the prompt or the generation settings."""
        self.set_system_prompt(prompt)
        self.set_chat_options(dict(options) if isinstance(options, dict) else {})

    def show_save_failed(self, error: object) -> None:
        """The settings could not be written (the window shows the banner): everything is kept, retry is offered."""
        message = error.user_text() if isinstance(error, StudioError) else str(error)
        self.save_label.setText(tr("Not saved yet: your changes are kept while the app runs."))
        self.save_label.setToolTip(message)
        self.retry_button.show()

    def show_saved(self) -> None:
        self.save_label.setText(SAVED_TEXT)
        self.save_label.setToolTip("")
        self.retry_button.hide()

    @property
    def save_failed(self) -> bool:
        return not self.retry_button.isHidden()

    # --- devices ------------------------------------------------------------------------------------
    def _show_devices(self) -> None:
        devices = self.choice_model.devices
        if not devices:
            self.devices_label.setText(tr("The devices of this machine show here once the Devices view has looked."))
            return
        usable = list(dict.fromkeys(d.type.value for d in devices if d.usable))
        missing = [t.value for t in (DeviceType.NPU, DeviceType.GPU, DeviceType.CPU) if t.value not in usable]
        text = f"Usable here: {', '.join(usable) or 'none'}."
        if missing:
            text += f" Not available: {', '.join(missing)} (the Devices view says why)."
        self.devices_label.setText(text)

    # --- compiled models ----------------------------------------------------------------------------
    def refresh_cache(self) -> None:
        self._set_cache_busy(True)
        emit(self.cache_refresh_requested)

    def show_cache(self, listing: Any) -> None:
        selected = set(self.selected_digests())
        self.listing = listing
        self._set_cache_busy(False)
        table = self.cache_table
        with QSignalBlocker(table):
            table.setRowCount(0)
            for entry in listing.entries:
                row = table.rowCount()
                table.insertRow(row)
                created = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created))
                details = [f"Folder: {entry.folder}", f"Compiled in {entry.compile_seconds:.1f} s"]
                if entry.options:
                    details.append("Options: " + ", ".join(f"{k}={v}" for k, v in sorted(entry.options.items())))
                cells = [
                    _cache_item(entry.model_name or entry.digest, "\n".join(details), data=entry.digest),
                    _cache_item(short_ep_name(entry.ep), entry.ep),
                    _cache_item(versions_text(entry), versions_text(entry)),
                    _cache_item(format_bytes(entry.size_bytes), f"{entry.size_bytes:,} bytes", right=True),
                    _cache_item(created),
                ]
                for column, cell in enumerate(cells):
                    table.setItem(row, column, cell)
                if entry.digest in selected:
                    table.selectRow(row)
        count = len(listing.entries)
        self.cache_stack.setCurrentIndex(0 if count else 1)
        self.cache_folder_label.set_path(str(listing.folder))
        if count:
            noun = "compiled model" if count == 1 else "compiled models"
            self.cache_summary.setText(f"{count} {noun} · {format_bytes(listing.total_bytes)} in total")
        else:
            self.cache_summary.setText(tr("Empty"))
        self._update_cache_buttons()

    def show_cache_removed(self, result: Any) -> None:
        self._set_cache_busy(False)
        if result.removed:
            noun = "compiled model" if result.removed == 1 else "compiled models"
            self.banners.show_message(
                f"Removed {result.removed} {noun} ({format_bytes(result.freed_bytes)} freed).",
                tr("Their next load on the NPU compiles them again."),
            )
        elif not result.kept:
            self.banners.show_message(tr("There was nothing to remove: the compiled-model cache is empty."))
        if result.kept:
            self.banners.show_message(
                f"Could not delete {', '.join(result.kept)}.",
                tr("A model that is loaded may still be using its compiled copy: restart NPU Studio and try again."),
                severity="warning",
            )

    def selected_digests(self) -> list[str]:
        model = self.cache_table.selectionModel()
        rows = sorted({index.row() for index in model.selectedRows()}) if model is not None else []
        digests = []
        for row in rows:
            item = self.cache_table.item(row, 0)
            if item is not None:
                digests.append(str(item.data(Qt.ItemDataRole.UserRole)))
        return digests

    def _set_cache_busy(self, busy: bool) -> None:
        self.cache_busy = busy
        if busy:
            self.cache_spinner.start()
        else:
            self.cache_spinner.stop()
        self._update_cache_buttons()

    def _update_cache_buttons(self) -> None:
        idle = not self.cache_busy
        has_entries = self.listing is not None and bool(self.listing.entries)
        self.cache_refresh_button.setEnabled(idle)
        self.remove_button.setEnabled(idle and bool(self.selected_digests()))
        self.clear_button.setEnabled(idle and has_entries)

    def _remove_selected(self) -> None:
        digests = self.selected_digests()
        if not digests or self.cache_busy:
            return
        noun = "this compiled model" if len(digests) == 1 else f"these {len(digests)} compiled models"
        if self.confirm("Remove compiled models?", f"Remove {noun}? Their next NPU load compiles them again."):
            self._set_cache_busy(True)
            emit(self.cache_remove_requested, digests)

    def _clear_all(self) -> None:
        if self.cache_busy or self.listing is None or not self.listing.entries:
            return
        total = format_bytes(self.listing.total_bytes)
        if self.confirm(
            "Clear all compiled models?",
            f"Delete every compiled model ({total})? Each model compiles again on its next NPU load.",
        ):
            self._set_cache_busy(True)
            emit(self.cache_clear_requested)

    # --- diagnostics and folders --------------------------------------------------------------------
    def _export_clicked(self) -> None:
        if self.diagnostics_busy:
            return
        target = self.choose_zip()
        if not target:
            return
        if Path(target).suffix.lower() != ".zip":
            target += ".zip"
        self.last_export_dir = str(Path(target).parent)
        self.diagnostics_busy = True
        self.export_button.setEnabled(False)
        self.show_export_button.hide()
        self.diagnostics_spinner.start()
        self.diagnostics_label.setText(tr("Starting the checks…"))
        self.diagnostics_label.show()
        emit(self.diagnostics_requested, target)

    def show_diagnostics_progress(self, text: str) -> None:
        if self.diagnostics_busy:
            self.diagnostics_label.setText(text)

    def show_diagnostics_exported(self, result: Any) -> None:
        self._diagnostics_idle()
        self.last_export = result.path
        checks = f"checks: {result.summary}" if result.summary else "no checks ran"
        name = Path(result.path).name or result.path  # the whole path is the tooltip: it is one long "word"
        text = f"Saved <b>{rich_text(name)}</b> ({rich_text(checks)}, {result.seconds:.1f} s)."
        if result.failed_checks:
            text += " Some checks failed: the report in the zip says which and why."
        self.diagnostics_label.setText(text)
        self.diagnostics_label.setToolTip(result.path)
        self.show_export_button.show()

    def _diagnostics_idle(self) -> None:
        self.diagnostics_busy = False
        self.export_button.setEnabled(True)
        self.diagnostics_spinner.stop()

    def _show_export(self) -> None:
        if self.last_export:
            self._open(str(Path(self.last_export).parent))

    def open_folder(self, key: str) -> bool:
        path = self.places.get(key, "")
        return bool(path) and self._open(path)

    def _open(self, path: str) -> bool:
        if self.open_url(QUrl.fromLocalFile(path)):
            return True
        self.banners.show_message(
            f"Could not open {path}.",
            tr("Open it from your file manager (the path can be selected and copied)."),
            severity="warning",
        )
        return False

    # --- errors -------------------------------------------------------------------------------------
    def show_error(self, error: object) -> None:
        """A cache or diagnostics job failed: show why; the view is usable again."""
        if self.diagnostics_busy:
            self._diagnostics_idle()
            self.diagnostics_label.setText(tr("The export did not finish (see above)."))
        self._set_cache_busy(False)
        self.banners.show_error(error)

    # --- edits --------------------------------------------------------------------------------------
    def _theme_picked(self, _index: int) -> None:
        emit(self.theme_changed, self.theme())

    def _prompt_typed(self) -> None:
        self._prompt_timer.start()

    def flush(self) -> None:
        """Send a system prompt still being typed now (before the app closes)."""
        if self._prompt_timer.isActive():
            self._prompt_timer.stop()
            self._send_prompt()

    def _send_prompt(self) -> None:
        emit(self.system_prompt_changed, self.prompt_edit.toPlainText())

    # --- default dialogs ----------------------------------------------------------------------------
    def _confirm_dialog(self, title: str, text: str) -> bool:
        return QMessageBox.question(self, title, text) == QMessageBox.StandardButton.Yes

    def _zip_dialog(self) -> str:
        folder = self.last_export_dir or str(Path.home())
        name = time.strftime("npu-studio-diagnostics-%Y%m%d-%H%M%S.zip")
        path, _ = QFileDialog.getSaveFileName(
            self, tr("Export diagnostics"), str(Path(folder) / name), "Zip archives (*.zip)"
        )
        return path
