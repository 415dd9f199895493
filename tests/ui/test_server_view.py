"""The Server view: its intents, what it shows of the host's news, and plain text everywhere."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from engines.types import Placement
from ui.server.view import ServerView


def test_start_asks_with_the_port_and_key_and_running_shows_the_url(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = ServerView(6780)
    qtbot.addWidget(view)
    view.generate_key.click()
    key = view.api_key.text()
    assert len(key) >= 24
    with qtbot.waitSignal(view.start_requested) as asked:
        view.toggle.click()
    assert asked.args == [6780, key]
    view.set_running("http://127.0.0.1:6780")
    assert view.url.text() == "http://127.0.0.1:6780/v1" and view.toggle.text() == "Stop server"
    with qtbot.waitSignal(view.stop_requested):
        view.toggle.click()
    view.set_stopped("Port 6780 on 127.0.0.1 is already in use.")
    assert view.url.text() == "" and "already in use" in view.message.text()


def test_the_request_log_and_model_are_plain_text(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = ServerView(6780)
    qtbot.addWidget(view)
    view.set_model("<b>model</b>", Placement("Automatic", ("CPUExecutionProvider",), ("CPUExecutionProvider",)))
    view.add_record((0.0, "127.0.0.1:5000", "<i>m</i>", "CPU", 31, 5, 88.04, "200"))
    assert view.log.rowCount() == 1 and view.log.item(0, 2).text() == "<i>m</i>"
    assert view.log.item(0, 6).text() == "88.0"
    labels = view.findChildren(QLabel)
    assert all(label.textFormat() == Qt.TextFormat.PlainText for label in labels if label is view.model)
    assert view.model.text() == "<b>model</b>"


def test_the_settings_shown_and_start_with_the_app(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = ServerView(6780)
    qtbot.addWidget(view)
    view.show_settings(0, "k3y", True)
    assert view.port.value() == 0 and view.api_key.text() == "k3y" and view.start_with_app.isChecked()
    with qtbot.waitSignal(view.start_with_app_changed) as changed:
        view.start_with_app.click()
    assert changed.args == [False]


def test_the_app_starts_its_server_when_the_setting_says_so(qtbot) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from app.hosts.server import wire_server_settings

    view = ServerView(6780)
    qtbot.addWidget(view)
    settings = SimpleNamespace(serve_port=0, serve_api_key="", serve_on_start=True)
    saved: list[int] = []
    wire_server_settings(view, None, settings, lambda: saved.append(1))
    with qtbot.waitSignal(view.start_requested, timeout=2000) as asked:
        pass
    assert asked.args == [0, ""] and saved
