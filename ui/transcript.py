"""The chat transcript: one QTextBrowser, one frame per message, bodies rendered as Markdown.

While an answer streams only its frame is rebuilt (the rest of the document is left alone), so an
update costs the length of that answer, not of the conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrame,
    QTextFrameFormat,
)
from PySide6.QtWidgets import QTextBrowser, QWidget

from app.qtcompat import emit
from engines.text import printable, rich_text
from ui.theme import colors

ACTION_SCHEME = "npu-action"
# A model's answer is Markdown, never HTML: raw HTML in it (an <img src="file:..."> that the browser
# would load, a <span> that hides text) is shown as text.
MARKDOWN = QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML


@dataclass(frozen=True)
class Entry:
    """One message as shown."""

    key: int  # message id in the store
    role: str  # user | assistant
    text: str
    meta: str = ""  # after the speaker's name: model and device
    footer: str = ""  # under an answer: stats
    state: str = ""  # "" | streaming | stopped | error
    actions: tuple[str, ...] = ("copy",)


@dataclass
class _Stream:
    tail: int  # document position where the open (still changing) part of the answer starts
    committed: int = 0  # characters of the answer rendered for good, before `tail`


def committable(text: str) -> int:
    """How much of a streaming Markdown text is complete blocks: up to the last blank line that is
    not inside a fenced code block (0 when there is none)."""
    end = text.rfind("\n\n")
    while end > 0:
        if text[:end].count("```") % 2 == 0:
            return end + 2
        end = text.rfind("\n\n", 0, end)
    return 0


class Transcript(QTextBrowser):
    action_triggered = Signal(str, int)  # action, message key

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Transcript")
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._on_anchor)
        self.document().setDocumentMargin(16)
        self.entries: list[Entry] = []
        self._frames: list[QTextFrame] = []
        self._stream: _Stream | None = None  # the last frame, while it streams
        self.render_count = 0  # renders (tests, benchmarks)

    # --- public API -----------------------------------------------------------------------------
    def set_entries(self, entries: list[Entry]) -> None:
        self._stream = None
        self.document().clear()
        self.entries = []
        self._frames = []
        for entry in entries:
            self.append_entry(entry, scroll=False)
        self._scroll_to_end()

    def append_entry(self, entry: Entry, scroll: bool = True) -> None:
        at_end = self._at_end()
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        frame = cursor.insertFrame(self._frame_format(entry))
        self._fill(frame, entry)
        self.entries.append(entry)
        self._frames.append(frame)
        if scroll or at_end:
            self._scroll_to_end()

    def update_last(self, entry: Entry) -> None:
        """Re-render the last message (streaming)."""
        if not self._frames:
            self.append_entry(entry)
            return
        at_end = self._at_end()
        frame = self._frames[-1]
        start = frame.firstPosition() - 1
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        cursor.setPosition(frame.lastPosition() + 1, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        new_frame = cursor.insertFrame(self._frame_format(entry))
        self._fill(new_frame, entry)
        self._frames[-1] = new_frame
        self.entries[-1] = entry
        if at_end:
            self._scroll_to_end()

    def stream_last(self, entry: Entry) -> None:
        """Streaming update of the last message: Markdown blocks that are complete (up to the last
        blank line outside a code fence) are rendered once; only the open tail is redrawn. The cost of
        an update stays flat however long the answer grows. `update_last` renders the final text."""
        last = self.entries[-1] if self.entries else None
        stream = self._stream
        if (
            last is None
            or stream is None
            or last.key != entry.key
            or last.state != "streaming"
            or not entry.text.startswith(last.text[: stream.committed])
        ):
            self.update_last(entry)
            return
        at_end = self._at_end()
        frame = self._frames[-1]
        cursor = self._clear_tail(frame, stream.tail)
        boundary = committable(entry.text)
        if boundary > stream.committed:
            start = cursor.position()
            cursor.insertMarkdown(printable(entry.text[stream.committed : boundary]), MARKDOWN)
            self._shade_code(start, cursor.position())
            cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            stream.tail, stream.committed = cursor.position(), boundary
        self._insert_tail(cursor, entry.text[stream.committed :], frame)
        self.entries[-1] = entry
        self.render_count += 1
        if at_end:
            self._scroll_to_end()

    def _clear_tail(self, frame: QTextFrame, tail: int) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.setPosition(tail)
        cursor.setPosition(frame.lastPosition(), QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        current = cursor.currentList()
        if current is not None:
            current.remove(cursor.block())
        cursor.setBlockFormat(QTextBlockFormat())
        cursor.setCharFormat(QTextCharFormat())
        return cursor

    def _insert_tail(self, cursor: QTextCursor, text: str, frame: QTextFrame) -> None:
        start = cursor.position()
        if text:
            cursor.insertMarkdown(printable(text), MARKDOWN)
        else:
            muted = QTextCharFormat()
            muted.setForeground(QColor(colors().muted))
            cursor.insertText("…", muted)
        self._shade_code(start, frame.lastPosition())

    def update_entry(self, key: int, **changes: object) -> None:
        """Change the last entry with `key` (only the last one can be re-rendered in place)."""
        if self.entries and self.entries[-1].key == key:
            self.update_last(replace(self.entries[-1], **changes))  # type: ignore[arg-type]

    def last(self) -> Entry | None:
        return self.entries[-1] if self.entries else None

    def plain_text(self) -> str:
        return self.document().toPlainText()

    # --- rendering ------------------------------------------------------------------------------
    def _frame_format(self, entry: Entry) -> QTextFrameFormat:
        c = colors()
        fmt = QTextFrameFormat()
        fmt.setPadding(12)
        fmt.setTopMargin(6)
        fmt.setBottomMargin(6)
        if entry.role == "user":
            fmt.setBackground(QColor(c.user_bubble))
            fmt.setLeftMargin(90)
            fmt.setRightMargin(0)
        else:
            fmt.setBackground(QColor(c.surface))
            fmt.setBorder(1)
            fmt.setBorderBrush(QColor(c.border))
            fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
            fmt.setLeftMargin(0)
            fmt.setRightMargin(60)
        return fmt

    def _fill(self, frame: QTextFrame, entry: Entry) -> None:
        self.render_count += 1
        c = colors()
        cursor = frame.firstCursorPosition()
        name = QTextCharFormat()
        name.setFontWeight(QFont.Weight.DemiBold)
        name.setForeground(QColor(c.accent if entry.role == "assistant" else c.text))
        cursor.insertText("You" if entry.role == "user" else "Assistant", name)
        if entry.meta:
            muted = QTextCharFormat()
            muted.setForeground(QColor(c.muted))
            cursor.insertText(f"  ·  {printable(entry.meta)}", muted)
        body_start = cursor.position()
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
        text = entry.text
        self._stream = None
        if entry.state == "streaming":
            self._stream = _Stream(tail=cursor.position())
            if not text:
                muted = QTextCharFormat()
                muted.setForeground(QColor(c.muted))
                cursor.insertText("Thinking…", muted)
            else:
                self._insert_tail(cursor, text, frame)
            return
        if entry.role == "user":
            cursor.insertText(printable(text), QTextCharFormat())  # a user's message is shown as typed
        else:
            cursor.insertMarkdown(printable(text) or "*(no answer)*", MARKDOWN)
        self._shade_code(body_start, frame.lastPosition())
        footer = self._footer_html(entry)
        if footer:
            cursor = frame.lastCursorPosition()
            block = QTextBlockFormat()
            block.setTopMargin(6)
            cursor.insertBlock(block, QTextCharFormat())
            cursor.insertHtml(footer)

    def _shade_code(self, start: int, end: int) -> None:
        """Give fenced code blocks a background and a monospace font."""
        c = colors()
        fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        block = self.document().findBlock(start)
        while block.isValid() and block.position() <= end:
            fmt = block.blockFormat()
            if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
                fmt.setBackground(QColor(c.code_bg))
                fmt.setLeftMargin(4)
                fmt.setRightMargin(4)
                cursor = QTextCursor(block)
                cursor.setBlockFormat(fmt)
                cursor.select(QTextCursor.SelectionType.BlockUnderCursor)
                char = QTextCharFormat()
                char.setFontFamilies([fixed.family()])
                cursor.mergeCharFormat(char)
            block = block.next()

    def _footer_html(self, entry: Entry) -> str:
        c = colors()
        parts: list[str] = []
        if entry.state == "stopped":
            parts.append(f'<span style="color:{c.warn}; font-weight:600">Stopped</span>')
        elif entry.state == "error":
            parts.append(f'<span style="color:{c.error}; font-weight:600">Failed</span>')
        if entry.footer:
            parts.append(f'<span style="color:{c.muted}">{rich_text(entry.footer)}</span>')
        if entry.state != "streaming":
            labels = {"copy": "Copy", "edit": "Edit", "regenerate": "Regenerate"}
            for action in entry.actions:
                href = f"{ACTION_SCHEME}:{action}/{entry.key}"
                parts.append(f'<a href="{href}" style="color:{c.accent}; text-decoration:none">{labels[action]}</a>')
        return "&nbsp;&nbsp;·&nbsp;&nbsp;".join(parts)

    # --- behaviour ------------------------------------------------------------------------------
    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() != ACTION_SCHEME:
            return
        action, _, key = url.path().partition("/")
        if key.lstrip("-").isdigit():
            emit(self.action_triggered, action, int(key))

    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 40

    def _scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())
