"""The last conversation reopens after a restart, from its newest message, whatever it holds: a conversation
started by a starter prompt reports itself as the current one, and a stored conversation full of hostile
text (images of /dev/zero and a FIFO, a title that is HTML, 10,000-character lines) cannot stop the app
from starting (a child process under a watchdog)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl

from app.storage.conversations import ConversationStore
from app.storage.settings import load_settings, save_settings
from tests.ui.fakes import FakeChatModel, loader_for

TIMEOUT = 60_000
REPO = Path(__file__).resolve().parents[2]
LONG_ANSWER = ["A paragraph of the answer, long enough to need scrolling.\n\n"] * 60


def test_a_chat_started_from_a_starter_prompt_reopens_at_its_newest_message(make_studio: Any, qtbot: Any) -> None:
    studio = make_studio(chat_loader=loader_for(FakeChatModel(pieces=LONG_ANSWER)))
    studio.show()
    studio.window.resize(1280, 720)
    studio.window.show_view("chat")
    studio.chat.load("fake-model", studio.choice_model.choice())
    session = studio.chat_view.session
    qtbot.waitUntil(lambda: bool(studio.chat_view.status.info), timeout=TIMEOUT)
    studio.chat_view.transcript.anchorClicked.emit(QUrl("npu-action:starter/0"))  # the first screen's one click
    qtbot.waitUntil(lambda: not session.generating and len(session.messages) == 2, timeout=TIMEOUT)
    conversation = session.conversation
    assert conversation is not None
    studio.window.close()  # Ctrl+Q's path: the window closes, the settings are saved
    qtbot.waitUntil(lambda: not studio.window.isVisible(), timeout=TIMEOUT)
    assert studio.shutdown()
    assert load_settings()[0].last_conversation == conversation.id

    again = make_studio(chat_loader=loader_for(FakeChatModel()))
    again.show()
    reopened = again.chat_view.session
    qtbot.waitUntil(lambda: reopened.conversation is not None, timeout=TIMEOUT)
    assert again.window.current_view() == "chat" and reopened.conversation.id == conversation.id
    assert again.chat_view.title.text() == conversation.title
    bar = again.chat_view.transcript.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum(), timeout=TIMEOUT)


STARTS = textwrap.dedent(
    """
    import sys, time
    from app.gui import Studio, create_application
    app = create_application()
    studio = Studio(app, preload=False)
    studio.show()
    deadline = time.monotonic() + 30
    while studio.chat_view.session.conversation is None and time.monotonic() < deadline:
        app.processEvents()
    studio.chat_view.grab()  # laid out and painted
    for _ in range(20):
        app.processEvents()
    print("STARTED", studio.window.current_view(), studio.chat_view.session.conversation is not None, flush=True)
    title = studio.chat_view.title
    print("TITLE", title.textFormat().name, title.text(), flush=True)
    print("LISTED", studio.chat_view.conversations.list.item(0).text(), flush=True)
    studio.window.close()
    sys.exit(0 if studio.shutdown() else 3)
    """
)


def test_a_hostile_stored_conversation_cannot_stop_the_app_from_starting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    store = ConversationStore()  # the test's own NPU_STUDIO_HOME
    hostile = (
        f"![zero](file:///dev/zero) ![pipe]({fifo.as_uri()}) ![]({fifo.as_uri()}) [share](file://host/share/x.png)\n\n"
        + ("0123456789" * 1000 + "\n") * 5
    )
    conversation = store.create('<img src="/dev/zero"><b>bold</b>')
    store.add_message(conversation.id, "user", hostile)
    code = "```python\n" + "x = 1  " * 1500 + "\n```\n"  # one 10,500-character line of code
    store.add_message(conversation.id, "assistant", hostile + code, stop_reason="eos")
    store.close()
    settings, _ = load_settings()
    settings.last_view, settings.last_conversation = "chat", conversation.id
    save_settings(settings)

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    child = subprocess.Popen(
        [sys.executable, "-c", STARTS], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = child.communicate(timeout=90)  # the watchdog: a blocked UI thread never gets here
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        raise AssertionError(f"the app did not start within 90 s (blocked on a file?):\n{err[-2000:]}") from None
    finally:
        with contextlib.suppress(OSError):  # a reader stuck on the FIFO would be let go here
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert child.returncode == 0, err[-3000:]
    assert "STARTED chat True" in out
    title = '<img src="/dev/zero"><b>bold</b>'
    assert f"TITLE PlainText {title}" in out and f"LISTED {title}" in out  # shown as the text it is
