"""An answer in the transcript is text to read: it loads no resource from outside the app (images are shown
as a "blocked image" chip with their alt text), and a link opens only on a click, only http(s), in the OS
browser, with its URL shown (ui/chat/safe_markdown.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QImage, QTextDocument

from ui.chat.safe_markdown import SafeDocument, app_resource, markdown_fragment, openable
from ui.chat.transcript import Transcript
from ui.chat.transcript_render import Entry

IMAGE = QTextDocument.ResourceType.ImageResource.value


@pytest.mark.parametrize(
    ("url", "opens"),
    [
        ("https://example.com/docs", True),
        ("http://example.com", True),
        ("HTTPS://EXAMPLE.COM/", True),
        ("file:///etc/passwd", False),
        ("file://host/share/x.png", False),  # UNC on Windows: an SMB fetch that leaks the user's NTLM hash
        ("//host/share/x.png", False),
        ("smb://host/share", False),
        ("data:text/html,<b>x</b>", False),
        ("javascript:alert(1)", False),
        ("qrc:/icons/x.svg", False),
        ("mailto:someone@example.com", False),
        ("https:///no-host", False),
        ("docs/readme.md", False),
    ],
)
def test_only_http_links_with_a_host_are_opened(url: str, opens: bool) -> None:
    assert openable(QUrl(url)) is opens


@pytest.mark.parametrize(
    ("url", "own"),
    [
        ("qrc:/icons/x.png", True),
        ("file:///etc/passwd", False),
        ("file://host/share/x.png", False),
        ("//host/share/x.png", False),
        ("http://127.0.0.1:9/x.png", False),
        ("data:image/png;base64,iVBORw0KGgo=", False),
        ("/etc/passwd", False),
    ],
)
def test_only_the_apps_own_resources_are_loaded(url: str, own: bool) -> None:
    assert app_resource(QUrl(url)) is own


def test_the_transcript_document_reads_no_file_it_is_asked_for(tmp_path: Path, qtbot: Any) -> None:
    picture = tmp_path / "private.png"
    QImage(40, 30, QImage.Format.Format_RGB32).save(str(picture))
    document = SafeDocument()
    for url in (picture.as_uri(), str(picture), "file://host/share/x.png", "data:image/png;base64,iVBORw0KGgo="):
        loaded = document.loadResource(IMAGE, QUrl(url))
        assert isinstance(loaded, QImage) and loaded.size().width() == 1, url  # a blank stand-in, never the file
    assert document.loadResource(QTextDocument.ResourceType.StyleSheetResource.value, QUrl(picture.as_uri())) == b""


def _images(document: QTextDocument) -> list[str]:
    names = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isImageFormat():
                names.append(fmt.toImageFormat().name())
            it += 1
        block = block.next()
    return names


def test_images_become_blocked_chips_with_their_alt_text() -> None:
    fragment = markdown_fragment(
        "A ![tabby *cat*](file:///etc/passwd \"t\") and ![](//host/share/x.png) and ![ref][r] "
        "and [![inside a link](http://a.b/i.png)](https://example.com)\n\n[r]: data:image/png;base64,AAAA\n"
    )
    document = QTextDocument()
    from PySide6.QtGui import QTextCursor

    QTextCursor(document).insertFragment(fragment)
    assert _images(document) == []
    text = document.toPlainText()
    assert "[image not loaded: tabby cat]" in text and "[image not loaded: ref]" in text
    assert "[image not loaded: inside a link]" in text


def test_links_show_where_they_go_and_only_http_stays_a_link() -> None:
    from PySide6.QtGui import QTextCursor

    document = QTextDocument()
    QTextCursor(document).insertFragment(
        markdown_fragment(
            "[the docs](https://evil.example/x) · <https://a.b/> · www.example.org · [notes](file:///etc/passwd) · "
            "[share](file://host/share/x) · [run](javascript:alert(1))"
        )
    )
    text = document.toPlainText()
    assert "the docs (https://evil.example/x)" in text  # the text says something else: the URL follows it
    assert "https://a.b/ ·" in text and "www.example.org ·" in text  # already the URL: not repeated
    for shown in ("notes (file:///etc/passwd)", "share (file://host/share/x)", "run (javascript:alert(1))"):
        assert shown in text
    anchors: dict[str, str] = {}
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor() and fmt.anchorHref():
                anchors[fmt.anchorHref()] = fmt.toolTip()
            it += 1
        block = block.next()
    assert set(anchors) == {"https://evil.example/x", "https://a.b/", "http://www.example.org"}
    assert all(href in tip and tip.startswith("<p") for href, tip in anchors.items())  # escaped, shown as text


def test_a_click_opens_http_in_the_os_browser_and_nothing_else(qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toString()) or True)
    transcript = Transcript()
    qtbot.addWidget(transcript)
    transcript.set_entries([Entry(1, "assistant", "[docs](https://example.com/docs) [f](file:///etc/passwd)")])
    assert set(transcript.link_labels()) >= {"https://example.com/docs"}
    assert "file:///etc/passwd" not in transcript.link_labels()
    for href in ("https://example.com/docs", "file:///etc/passwd", "file://host/share/x", "smb://host/x"):
        transcript.anchorClicked.emit(QUrl(href))
    assert opened == ["https://example.com/docs"]


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A named pipe: reading it blocks until someone writes. A watchdog lets a blocked reader go after 10 s
    (so a regression fails the test instead of hanging it) and says whether anyone was blocked."""
    path = tmp_path / "pipe.png"
    os.mkfifo(path)
    blocked: list[bool] = []

    def release() -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # succeeds only while a reader waits
        except OSError:
            return
        blocked.append(True)
        os.close(fd)

    watchdog = threading.Timer(10.0, release)
    watchdog.start()
    yield path
    watchdog.cancel()
    release()
    assert not blocked, "the transcript opened a file named by an answer"


ISSUE_EXAMPLE = "Here you go: ![x](file:///dev/zero)"


def test_the_reported_answer_and_a_fifo_are_shown_without_reading_anything(fifo: Path, qtbot: Any) -> None:
    transcript = Transcript()
    qtbot.addWidget(transcript)
    transcript.resize(700, 500)
    transcript.show()
    hostile = (
        f"![pipe]({fifo.as_uri()}) ![]({fifo.as_uri()}) ![ref][p] [![in a link]({fifo.as_uri()})](https://a.b)\n\n"
        f"[p]: {fifo.as_uri()}\n\n{ISSUE_EXAMPLE}\n\n" + "x" * 10_000
    )
    transcript.set_entries([Entry(1, "user", hostile), Entry(2, "assistant", hostile)])
    transcript.stream_last(Entry(2, "assistant", hostile + "\n\n" + hostile, state="streaming"))
    transcript.grab()  # laid out and painted: what would load an image, has
    assert _images(transcript.document()) == []
    assert "[image not loaded: x]" in transcript.toPlainText()
