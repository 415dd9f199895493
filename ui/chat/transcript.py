"""The chat transcript: one QTextBrowser, one frame per message, bodies rendered as Markdown with
fenced code drawn by ui.chat.code_blocks (a wrapping, highlighted box with "Copy").

What an answer may make the transcript do is ui.chat.safe_markdown's rule: no resource from outside the
app is loaded (its document is a SafeDocument, and images never reach it), and a link opens only on a
click, only http(s), in the OS browser. The transcript follows the newest message (also once a reopened
conversation has been laid out) until the user scrolls up.

While an answer streams only its frame is rebuilt (the rest of the document is left alone), so an
update costs the length of that answer, not of the conversation. A theme switch re-renders the whole
document in the new colours; a long message of the user's is shown collapsed, with "Show all".
How one message is drawn (frame, Markdown, code, footer, starters) is ui.chat.transcript_render.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QEvent, QPoint, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QCursor,
    QDesktopServices,
    QFont,
    QShowEvent,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFragment,
    QTextFrame,
    QTextOption,
)
from PySide6.QtWidgets import QApplication, QTextBrowser, QWidget

from engines import printable
from ui.chat.code_blocks import code_blocks, split_markdown, warm_up
from ui.chat.safe_markdown import SafeDocument, openable
from ui.chat.transcript_render import (
    ACTION_SCHEME,
    CHIP_GLYPHS,
    Entry,
    collapsed,
    footer_parts,
    frame_format,
    insert_rich,
    insert_starters,
    link_format,
    muted_format,
)
from ui.common.placement_chip import WhyPopover
from ui.common.plain import plain_tooltip
from ui.common.theme import colors

__all__ = ["Transcript", "committable"]

FEEDBACK_MS = 1500  # how long "Copied" replaces "Copy"
AT_END_PX = 40  # this close to the bottom counts as reading the newest message


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


@dataclass
class _Stream:
    tail: int  # document position where the open (still changing) part of the answer starts
    committed: int = 0  # characters of the answer rendered for good, before `tail`
    codes: int = 0  # code blocks in the committed part (their "Copy" links are numbered in order)


def committable(text: str) -> int:
    """How much of a streaming Markdown text is complete blocks: up to the last blank line that is
    not inside a fenced code block (0 when there is none)."""
    end = text.rfind("\n\n")
    while end > 0:
        segments = split_markdown(text[:end])
        if not segments or segments[-1].closed:
            return end + 2
        end = text.rfind("\n\n", 0, end)
    return 0


class Transcript(QTextBrowser):
    action_triggered = Signal(str, int)  # action, message key
    starter_chosen = Signal(str)  # a starter prompt was clicked in the empty chat

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDocument(SafeDocument(self))
        self.setObjectName("Transcript")
        self.setAccessibleName(tr("Conversation"))
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._on_anchor)
        self.document().setDocumentMargin(16)
        # Long words and code lines wrap inside their bubble: nothing scrolls the conversation sideways.
        option = self.document().defaultTextOption()
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.document().setDefaultTextOption(option)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.entries: list[Entry] = []
        self.starters: list[str] = []
        self.expanded: set[int] = set()  # keys of long messages the user expanded
        self._frames: list[QTextFrame] = []
        self._stream: _Stream | None = None  # the last frame, while it streams
        self._follow = True  # keep the newest message in view (until the user scrolls up)
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)
        self.popover: WhyPopover | None = None  # an answer's "Why?", while open
        self._feedback: list[tuple[str, str]] = []  # (href, label) to put back when the timer ends
        self._feedback_timer = QTimer(self)
        self._feedback_timer.setSingleShot(True)
        self._feedback_timer.timeout.connect(self._end_feedback)
        self._restyle = QTimer(self)  # a theme switch sends several change events: re-render once
        self._restyle.setSingleShot(True)
        self._restyle.timeout.connect(self.rerender)
        self._dark = colors().dark

    # --- public API -----------------------------------------------------------------------------
    def set_entries(self, entries: list[Entry]) -> None:
        self._stream = None
        self.document().clear()
        self.entries = []
        self._frames = []
        self._dark = colors().dark
        if not entries and self.starters:
            insert_starters(QTextCursor(self.document()), self.starters, self.font().pointSizeF())
        for entry in entries:
            self.append_entry(entry, scroll=False)
        self._follow = True  # a conversation opens at its newest message, also once it is laid out
        self._scroll_to_end()

    def set_starters(self, prompts: list[str]) -> None:
        """Prompts offered in an empty chat; one click sends one."""
        self.starters = list(prompts)
        if not self.entries:
            self.set_entries([])

    def rerender(self) -> None:
        """Draw everything again (the theme changed), keeping the scroll position."""
        bar = self.verticalScrollBar()
        at_end, value = self._follow, bar.value()
        self.set_entries(list(self.entries))
        if not at_end:
            self._follow = False
            bar.setValue(value)

    def append_entry(self, entry: Entry, scroll: bool = True) -> None:
        if not self.entries and self.starters:
            self.document().clear()  # the starter prompts make way for the first message
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        frame = cursor.insertFrame(frame_format(entry))
        self._fill(frame, entry)
        self.entries.append(entry)
        self._frames.append(frame)
        if scroll:
            self._follow = True
        if self._follow:
            self._scroll_to_end()

    def update_last(self, entry: Entry) -> None:
        """Re-render the last message (streaming)."""
        if not self._frames:
            self.append_entry(entry)
            return
        frame = self._frames[-1]
        start = frame.firstPosition() - 1
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        cursor.setPosition(frame.lastPosition() + 1, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        new_frame = cursor.insertFrame(frame_format(entry))
        self._fill(new_frame, entry)
        self._frames[-1] = new_frame
        self.entries[-1] = entry
        if self._follow:
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
        frame = self._frames[-1]
        cursor = self._clear_tail(frame, stream.tail)
        boundary = committable(entry.text)
        if boundary > stream.committed:
            cursor, codes = insert_rich(cursor, entry.text[stream.committed : boundary], entry.key, stream.codes)
            cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            stream.tail, stream.committed, stream.codes = cursor.position(), boundary, stream.codes + codes
        self._insert_tail(cursor, entry.text[stream.committed :], entry.key, stream.codes)
        self.entries[-1] = entry
        if self._follow:
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

    def _insert_tail(self, cursor: QTextCursor, text: str, key: int, first_code: int) -> None:
        if text:
            insert_rich(cursor, text, key, first_code)
        else:
            muted = QTextCharFormat()
            muted.setForeground(QColor(colors().muted))
            cursor.insertText("…", muted)

    def link_labels(self) -> dict[str, str]:
        """href -> the text of its link, for every link in the document (tests, accessibility)."""
        labels: dict[str, str] = {}
        block = self.document().begin()
        while block.isValid():
            for fragment in _fragments(block):
                href = fragment.charFormat().anchorHref()
                if href:
                    labels[href] = labels.get(href, "") + fragment.text()
            block = block.next()
        return labels

    def _fill(self, frame: QTextFrame, entry: Entry) -> None:
        c = colors()
        cursor = frame.firstCursorPosition()
        name = QTextCharFormat()
        name.setFontWeight(QFont.Weight.DemiBold)
        name.setForeground(QColor(c.accent if entry.role == "assistant" else c.text))
        cursor.insertText(tr("You") if entry.role == "user" else tr("Assistant"), name)
        if entry.meta:
            muted = QTextCharFormat()
            muted.setForeground(QColor(c.muted))
            cursor.insertText(f"  ·  {printable(entry.meta)}", muted)
        kind, line, details = entry.chip
        if line:
            chip = QTextCharFormat()
            chip.setForeground(QColor({"ok": c.ok, "warn": c.warn, "error": c.error}.get(kind, c.muted)))
            chip.setToolTip(plain_tooltip(details or line))
            cursor.insertText(f"  ·  {CHIP_GLYPHS.get(kind, '')} {line}", chip)
            if details and entry.state != "streaming":
                why = link_format(f"{ACTION_SCHEME}:why/{entry.key}")
                why.setToolTip(tr("Where this answer ran, and why"))
                cursor.insertText("  ", QTextCharFormat())
                cursor.insertText(tr("Why?"), why)
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
        text = entry.text
        self._stream = None
        if entry.state == "streaming":
            self._stream = _Stream(tail=cursor.position())
            if not text:
                muted = QTextCharFormat()
                muted.setForeground(QColor(c.muted))
                cursor.insertText(tr("Thinking…"), muted)
            else:
                self._insert_tail(cursor, text, entry.key, 0)
            return
        if entry.role == "user":
            short = None if entry.key in self.expanded else collapsed(text)
            shown = printable(short if short is not None else text)
            cursor.insertText(shown, QTextCharFormat())  # a user's message is shown as typed
            if short is not None or (entry.key in self.expanded and collapsed(text) is not None):
                cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
                lines = text.count("\n") + 1
                label = (
                    tr("Show all ({lines} lines, {chars} characters)").format(
                        lines=f"{lines:,}", chars=f"{len(text):,}"
                    )
                    if short is not None
                    else tr("Show less")
                )
                cursor.insertText(label, link_format(f"{ACTION_SCHEME}:expand/{entry.key}"))
        elif text:
            insert_rich(cursor, text, entry.key, 0)
        else:
            cursor.insertText(tr("(no answer)"), muted_format())
        # Under the message: what happened (state, stats) on one line, what to do (links) on the next.
        for parts in footer_parts(entry):
            cursor = frame.lastCursorPosition()
            block = QTextBlockFormat()
            block.setTopMargin(6)
            cursor.insertBlock(block, QTextCharFormat())
            for i, (part, fmt) in enumerate(parts):
                if i:
                    cursor.insertText("  ·  ", muted_format())
                cursor.insertText(part, fmt)

    # --- behaviour ------------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        warm_up("python")  # the language small models write most: its lexer loads off the UI thread

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange) and colors().dark != self._dark:
            self._restyle.start(0)

    def _on_anchor(self, url: QUrl) -> None:
        """A click on a link: the transcript's own actions, or an http(s) link for the OS browser."""
        if url.scheme() != ACTION_SCHEME:
            if openable(url):
                QDesktopServices.openUrl(url)
            return
        action, _, rest = url.path().partition("/")
        key_text, _, index_text = rest.partition("/")
        if not key_text.lstrip("-").isdigit():
            return
        key = int(key_text)
        if action == "copy-code" and index_text.isdigit():
            self._copy_code(key, int(index_text), url.toString())
        elif action == "expand":
            self.expanded ^= {key}
            self.rerender()
        elif action == "why":
            self.show_why(key)
        elif action == "starter":
            if 0 <= key < len(self.starters):
                self.starter_chosen.emit(self.starters[key])
        else:
            if action == "copy":
                self.flash(url.toString(), tr("Copied"))
            self.action_triggered.emit(action, key)

    def show_why(self, key: int) -> None:
        """The placement chip's "Why?" popover, for one answer: the whole reason, where the mouse is."""
        entry = next((e for e in reversed(self.entries) if e.key == key), None)
        if entry is None or not entry.chip[2]:
            return
        if self.popover is not None:
            self.popover.close()
        self.popover = WhyPopover(entry.chip[2], self)
        self.popover.adjustSize()
        self.popover.move(QCursor.pos() + QPoint(0, 12))
        self.popover.show()

    def _copy_code(self, key: int, index: int, href: str) -> None:
        entry = next((e for e in reversed(self.entries) if e.key == key), None)
        blocks = code_blocks(entry.text) if entry is not None else []
        if 0 <= index < len(blocks):
            QApplication.clipboard().setText(blocks[index])
            self.flash(href, tr("Copied"))

    def flash(self, href: str, label: str) -> None:
        """Show `label` in place of a link's text for a moment ("Copy" -> "Copied")."""
        old = self.link_labels().get(href)
        if old is None or old == label:
            return
        self._replace_link_text(href, label)
        if all(h != href for h, _ in self._feedback):
            self._feedback.append((href, old))
        self._feedback_timer.start(FEEDBACK_MS)

    def _end_feedback(self) -> None:
        pending, self._feedback = self._feedback, []
        for href, label in pending:
            self._replace_link_text(href, label)

    def _replace_link_text(self, href: str, text: str) -> None:
        block = self.document().begin()
        while block.isValid():
            for fragment in _fragments(block):
                fmt = fragment.charFormat()
                if fmt.anchorHref() != href:
                    continue
                position, length = fragment.position(), fragment.length()
                cursor = QTextCursor(self.document())
                cursor.setPosition(position)
                cursor.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
                cursor.insertText(text, fmt)
                if self._stream is not None and position < self._stream.tail:
                    self._stream.tail += len(text) - length  # the open tail moved with the text
                return
            block = block.next()

    def _on_scrolled(self, value: int) -> None:
        self._follow = value >= self.verticalScrollBar().maximum() - AT_END_PX

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        """The document was laid out again (it grew, the width changed, it was first shown): the newest
        message stays in view while the user reads it."""
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    def _scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())


def _fragments(block: QTextBlock) -> list[QTextFragment]:
    fragments = (it.fragment() for it in block)  # type: ignore[attr-defined]
    return [fragment for fragment in fragments if fragment.isValid()]
