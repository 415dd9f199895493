"""How one message of the chat transcript is drawn into the document: the bubble's frame, Markdown
prose and fenced code (ui.chat.code_blocks), indented code shaded, the footer (state, stats, action links)
and the starter prompts of an empty chat. `Entry` is a message as shown."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
)

from engines import printable
from ui.chat.code_blocks import insert_code, split_markdown
from ui.chat.safe_markdown import markdown_fragment
from ui.common.theme import colors

ACTION_SCHEME = "npu-action"
COLLAPSE_LINES = 14  # a user's message longer than this is shown collapsed ("Show all")
COLLAPSE_CHARS = 1500
CHIP_GLYPHS = {"ok": "\u2713", "warn": "\u26a0", "info": "\u24d8", "error": "\u2715"}  # not colour alone


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


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
    chip: tuple[str, str, str] = ("", "", "")  # where the answer ran: (kind, one line, full reason)


def collapsed(text: str) -> str | None:
    """The shortened text of a long message, or None when it is short enough to show whole."""
    lines = text.split("\n")
    if len(lines) <= COLLAPSE_LINES and len(text) <= COLLAPSE_CHARS:
        return None
    return "\n".join(lines[: COLLAPSE_LINES // 2])[: COLLAPSE_CHARS // 3].rstrip() + " …"


def frame_format(entry: Entry) -> QTextFrameFormat:
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


def insert_rich(cursor: QTextCursor, text: str, key: int, first_code: int) -> tuple[QTextCursor, int]:
    """Markdown prose through Qt's reader (made safe first: ui.chat.safe_markdown), fenced code through
    ui.chat.code_blocks. Returns a cursor at the end and the number of code blocks drawn."""
    c = colors()
    count = 0
    fresh = True  # the cursor is at the start of an empty block
    for segment in split_markdown(text):
        if segment.kind == "markdown":
            if not segment.text.strip():
                continue
            if not fresh:
                cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            start = cursor.position()
            cursor.insertFragment(markdown_fragment(printable(segment.text.strip("\n"))))
            shade_code(cursor.document(), start, cursor.position())
            fresh = False
        else:
            # A frame inserted at the end of a block starts right under it (no empty line between).
            cursor = insert_code(cursor, segment, key, first_code + count, c, ACTION_SCHEME)
            count += 1
            fresh = True
    return cursor, count


def shade_code(document: QTextDocument, start: int, end: int) -> None:
    """Indented code blocks (not fenced): a background, a monospace font, and wrapping lines."""
    c = colors()
    fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    block = document.findBlock(start)
    while block.isValid() and block.position() <= end:
        fmt = block.blockFormat()
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
            fmt.setBackground(QColor(c.code_bg))
            fmt.setNonBreakableLines(False)
            fmt.setLeftMargin(4)
            fmt.setRightMargin(4)
            cursor = QTextCursor(block)
            cursor.setBlockFormat(fmt)
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
            char = QTextCharFormat()
            char.setFontFamilies([fixed.family()])
            cursor.mergeCharFormat(char)
        block = block.next()


def muted_format() -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(colors().muted))
    return fmt


def link_format(href: str) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setAnchor(True)
    fmt.setAnchorHref(href)
    fmt.setForeground(QColor(colors().accent))
    return fmt


def footer_parts(entry: Entry) -> list[list[tuple[str, QTextCharFormat]]]:
    c = colors()
    parts: list[tuple[str, QTextCharFormat]] = []
    links: list[tuple[str, QTextCharFormat]] = []
    if entry.state in ("stopped", "error"):
        strong = QTextCharFormat()
        strong.setForeground(QColor(c.warn if entry.state == "stopped" else c.error))
        strong.setFontWeight(QFont.Weight.DemiBold)
        parts.append((tr("Stopped") if entry.state == "stopped" else tr("Failed"), strong))
    if entry.footer:
        parts.append((printable(entry.footer), muted_format()))
    if entry.state != "streaming":
        labels = {
            "copy": tr("Copy"),
            "edit": tr("Edit"),
            "regenerate": tr("Regenerate"),
            "continue": tr("Continue"),
        }
        tips = {"regenerate": tr("Write this answer again (Ctrl+R)"), "continue": tr("Write more of this answer")}
        for action in entry.actions:
            link = link_format(f"{ACTION_SCHEME}:{action}/{entry.key}")
            if action in tips:
                link.setToolTip(tips[action])
            links.append((labels[action], link))
    return [line for line in (parts, links) if line]


def insert_starters(cursor: QTextCursor, starters: list[str], point_size: float) -> None:
    c = colors()
    title = QTextCharFormat()
    title.setFontWeight(QFont.Weight.DemiBold)
    title.setFontPointSize(point_size * 1.25)
    title.setForeground(QColor(c.text))
    cursor.insertText(tr("Start a conversation"), title)
    block = QTextBlockFormat()
    block.setTopMargin(4)
    cursor.insertBlock(block, QTextCharFormat())
    cursor.insertText(tr("Type below, or pick one of these:"), muted_format())
    for i, prompt in enumerate(starters):
        item = QTextBlockFormat()
        item.setTopMargin(10)
        cursor.insertBlock(item, QTextCharFormat())
        cursor.insertText("\u2192  ", muted_format())
        cursor.insertText(prompt, link_format(f"{ACTION_SCHEME}:starter/{i}"))
