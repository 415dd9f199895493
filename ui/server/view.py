"""Server: the app's OpenAI-compatible endpoint, like a developer tab. On/off, the URL with Copy, the API
key (generate, copy), the model it serves with its placement chip, and a live request log (time, client,
model, device, prompt / completion tokens, tok/s, status).

The view emits intents (`start_requested(port, api_key)`, `stop_requested`) and shows what the app's server
host reports (`set_running`, `set_stopped`, `set_model`, `add_record`). Every string is plain text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from engines import Placement
from ui.common.placement_chip import PlacementChip
from ui.common.plain import plain_label, set_plain
from ui.common.widgets import Card, ViewHeader, muted_label, set_badge, table_item

LOG_COLUMNS = ("Time", "Client", "Model", "Device", "Prompt", "Completion", "tok/s", "Status")
MAX_LOG_ROWS = 500


def tr(text: str) -> str:
    return QCoreApplication.translate("ServerView", text)


class ServerView(QWidget):
    start_requested = Signal(int, str)  # port, API key ("" for none)
    stop_requested = Signal()
    start_with_app_changed = Signal(bool)

    def __init__(self, default_port: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.running = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 20)
        layout.setSpacing(14)
        layout.addWidget(ViewHeader(tr("Server"), tr("An OpenAI-compatible endpoint on this machine that says "
                                                    "where every answer ran.")))

        control = Card()
        row = QHBoxLayout()
        self.state = plain_label(tr("Stopped"), word_wrap=False)
        set_badge(self.state, "neutral", tr("Stopped"))
        row.addWidget(self.state)
        self.toggle = QPushButton(tr("Start server"))
        self.toggle.setObjectName("PrimaryButton")
        self.toggle.clicked.connect(self._toggle)
        row.addWidget(self.toggle)
        row.addWidget(plain_label(tr("Port"), word_wrap=False))
        self.port = QSpinBox()
        self.port.setRange(0, 65535)
        self.port.setValue(default_port)
        self.port.setToolTip(tr("0 picks a free port"))
        row.addWidget(self.port)
        row.addStretch(1)
        self.start_with_app = QCheckBox(tr("Start with the app"))
        self.start_with_app.toggled.connect(self.start_with_app_changed.emit)
        row.addWidget(self.start_with_app)
        control.body.addLayout(row)
        url_row = QHBoxLayout()
        url_row.addWidget(plain_label(tr("URL"), word_wrap=False))
        self.url = QLineEdit()
        self.url.setReadOnly(True)
        self.url.setPlaceholderText(tr("Start the server to get its URL"))
        url_row.addWidget(self.url, 1)
        self.copy_url = QPushButton(tr("Copy"))
        self.copy_url.clicked.connect(lambda: self._copy(self.url.text()))
        url_row.addWidget(self.copy_url)
        control.body.addLayout(url_row)
        key_row = QHBoxLayout()
        key_row.addWidget(plain_label(tr("API key"), word_wrap=False))
        self.api_key = QLineEdit()
        self.api_key.setPlaceholderText(tr("None: loopback only"))
        self.api_key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        key_row.addWidget(self.api_key, 1)
        self.generate_key = QPushButton(tr("Generate"))
        self.generate_key.clicked.connect(self._generate_key)
        key_row.addWidget(self.generate_key)
        self.copy_key = QPushButton(tr("Copy"))
        self.copy_key.clicked.connect(lambda: self._copy(self.api_key.text()))
        key_row.addWidget(self.copy_key)
        control.body.addLayout(key_row)
        model_row = QHBoxLayout()
        model_row.addWidget(plain_label(tr("Model"), word_wrap=False))
        self.model = plain_label(tr("Not loaded"), word_wrap=False)
        model_row.addWidget(self.model)
        self.chip = PlacementChip()
        model_row.addWidget(self.chip)
        model_row.addStretch(1)
        control.body.addLayout(model_row)
        self.message = muted_label(tr("Listens on 127.0.0.1 only. Clients: base URL above, any API key unless you "
                                      "set one."))
        control.body.addWidget(self.message)
        layout.addWidget(control)

        layout.addWidget(plain_label(tr("Requests"), word_wrap=False))
        self.log = QTableWidget(0, len(LOG_COLUMNS))
        self.log.setHorizontalHeaderLabels([tr(c) for c in LOG_COLUMNS])
        self.log.verticalHeader().setVisible(False)
        self.log.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        header = self.log.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        layout.addWidget(self.log, 1)

    # -- intents ------------------------------------------------------------------------------

    def show_settings(self, port: int, api_key: str, start_with_app: bool) -> None:
        self.port.setValue(port)
        self.api_key.setText(api_key)
        self.start_with_app.blockSignals(True)
        self.start_with_app.setChecked(start_with_app)
        self.start_with_app.blockSignals(False)

    def _generate_key(self) -> None:
        import secrets  # OpenSSL's hashing comes with it: loaded when a key is made, not with the window

        self.api_key.setText(secrets.token_urlsafe(24))

    def _toggle(self) -> None:
        if self.running:
            self.stop_requested.emit()
        else:
            self.toggle.setEnabled(False)
            self.start_requested.emit(self.port.value(), self.api_key.text().strip())

    def _copy(self, text: str) -> None:
        clipboard = QGuiApplication.clipboard()
        if text and clipboard is not None:
            clipboard.setText(text)

    # -- what the host reports ----------------------------------------------------------------

    def set_running(self, url: str) -> None:
        self.running = True
        self.toggle.setEnabled(True)
        self.toggle.setText(tr("Stop server"))
        set_badge(self.state, "ok", tr("Running"))
        self.url.setText(f"{url}/v1")
        self.port.setEnabled(False)
        self.api_key.setEnabled(False)
        self.generate_key.setEnabled(False)
        self.message.setText(tr("Serving at {url}").format(url=url))

    def set_stopped(self, reason: str = "") -> None:
        self.running = False
        self.toggle.setEnabled(True)
        self.toggle.setText(tr("Start server"))
        set_badge(self.state, "error" if reason else "neutral", tr("Stopped"))
        self.url.clear()
        self.port.setEnabled(True)
        self.api_key.setEnabled(True)
        self.generate_key.setEnabled(True)
        set_plain(self.message, reason or tr("Stopped."))

    def set_model(self, name: str, placement: Placement | None) -> None:
        set_plain(self.model, name or tr("Not loaded"))
        if placement is None:
            self.chip.clear()
        else:
            self.chip.set_placement(placement)

    def add_record(self, values: Sequence[object]) -> None:
        """One request: (time, client, model, device, prompt tokens, completion tokens, tok/s, status)."""
        when, client, model, device, prompt, completion, speed, status = values
        row = self.log.rowCount()
        self.log.insertRow(row)
        shown = [time.strftime("%H:%M:%S", time.localtime(float(str(when)))), str(client), str(model), str(device),
                 str(prompt), str(completion), f"{float(str(speed)):.1f}", str(status)]
        for column, text in enumerate(shown):
            self.log.setItem(row, column, table_item(text, right=column in (4, 5, 6)))
        while self.log.rowCount() > MAX_LOG_ROWS:
            self.log.removeRow(0)
        self.log.scrollToBottom()
