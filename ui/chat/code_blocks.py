"""Fenced code blocks in chat answers: found in the Markdown, drawn as one shaded box that wraps its
long lines inside itself, highlighted with Pygments, with a header that names the language and offers
"Copy".

Qt's own Markdown reader draws a fence as loose per-line block backgrounds that never wrap (one long
line widens the whole transcript) and knows no colours, so fences are taken out of the Markdown and
drawn here; the prose between them still goes through `QTextCursor.insertMarkdown`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
    QTextFrame,
    QTextFrameFormat,
    QTextLength,
)

from engines import printable
from ui.common.theme import Colors

if TYPE_CHECKING:
    from pygments.token import _TokenType

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
LIGHT_STYLE = "default"
DARK_STYLE = "one-dark"
CODE_PROPERTY = 0x100100  # QTextFormat.UserProperty + n: marks a code box frame (index of the block)
MAX_RUNS_PER_LINE = 200  # a line with more coloured runs is drawn plain (see plain_long_lines)
MAX_HIGHLIGHTED_LINE = 2000  # a block with a longer line (minified, generated) is not highlighted at all


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


@dataclass(frozen=True)
class Segment:
    kind: str  # "markdown" | "code"
    text: str
    language: str = ""
    closed: bool = True  # a code fence that has not ended yet (the answer is still streaming)


def split_markdown(text: str) -> list[Segment]:
    """Prose and fenced code blocks, in order. A fence closes on a line of at least as many of the
    same fence characters; an unclosed fence runs to the end (CommonMark's rule)."""
    segments: list[Segment] = []
    prose: list[str] = []
    code: list[str] = []
    fence = ""
    language = ""
    for line in text.split("\n"):
        if not fence:
            match = _FENCE.match(line)
            if match:
                if prose:
                    segments.append(Segment("markdown", "\n".join(prose)))
                    prose = []
                fence, language, code = match.group(1), match.group(2), []
            else:
                prose.append(line)
            continue
        stripped = line.strip()
        if (
            stripped
            and set(stripped) == {fence[0]}
            and len(stripped) >= len(fence)
            and len(line) - len(line.lstrip()) < 4
        ):
            segments.append(Segment("code", "\n".join(code), language))
            fence = ""
        else:
            code.append(line)
    if fence:
        segments.append(Segment("code", "\n".join(code), language, closed=False))
    elif prose:
        segments.append(Segment("markdown", "\n".join(prose)))
    return segments


def code_blocks(text: str) -> list[str]:
    """The code of each fenced block (what "Copy" puts on the clipboard)."""
    return [s.text for s in split_markdown(text) if s.kind == "code"]


# Pygments is imported on the first code block, not at start: the window needs none of it.
@lru_cache(maxsize=64)
def _lexer(language: str) -> object | None:
    if not language:
        return None
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(language.lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=4)
def _style(name: str) -> dict[_TokenType, tuple[str, bool, bool]]:
    """Token type -> (colour, bold, italic) for a Pygments style."""
    from pygments.styles import get_style_by_name

    style = get_style_by_name(name)
    # Pygments gives colours as bare hex ("c678dd"); QColor needs the "#".
    return {
        ttype: (f"#{spec['color']}" if spec["color"] else "", bool(spec["bold"]), bool(spec["italic"]))
        for ttype, spec in style
    }


def warm_up(language: str) -> None:
    """Load a language's lexer (and Pygments' styles) in the background. The first use of a lexer
    imports its module (5-45 ms): done while a block is still streaming, it is ready when the fence
    closes instead of stalling the UI thread then."""
    key = language.lower()
    if not key or key in _warming:
        return
    _warming.add(key)

    def load() -> None:
        _lexer(key)
        _style(LIGHT_STYLE)
        _style(DARK_STYLE)

    threading.Thread(target=load, name="pygments-warm-up", daemon=True).start()


_warming: set[str] = set()


def highlight(code: str, language: str, dark: bool) -> list[tuple[str, str, bool, bool]]:
    """(text, colour or "", bold, italic) runs of `code`; one plain run for an unknown language."""
    lexer = _lexer(language.lower())
    if lexer is None:
        return [(code, "", False, False)]
    from pygments.token import Token

    styles = _style(DARK_STYLE if dark else LIGHT_STYLE)
    runs: list[tuple[str, str, bool, bool]] = []
    for ttype, value in lexer.get_tokens(code):  # type: ignore[attr-defined]
        while ttype not in styles and ttype.parent is not None:
            ttype = ttype.parent
        color, bold, italic = styles.get(ttype, styles.get(Token, ("", False, False)))
        if runs and runs[-1][1:] == (color, bold, italic):
            runs[-1] = (runs[-1][0] + value, color, bold, italic)
        else:
            runs.append((value, color, bold, italic))
    return runs


def plain_long_lines(runs: list[tuple[str, str, bool, bool]]) -> list[tuple[str, str, bool, bool]]:
    """The runs, with a line of more than MAX_RUNS_PER_LINE coloured runs drawn plain (one run): every run
    put into a line costs Qt a pass over the whole line, so a 10,000-character line of highlighted code
    (thousands of runs) held the UI thread for minutes."""
    lines: list[list[tuple[str, str, bool, bool]]] = [[]]
    for text, color, bold, italic in runs:
        for i, piece in enumerate(text.split("\n")):
            if i:
                lines.append([])
            if piece:
                lines[-1].append((piece, color, bold, italic))
    out: list[tuple[str, str, bool, bool]] = []
    for i, line in enumerate(lines):
        if i:
            out.append(("\n", "", False, False))
        out.extend([("".join(run[0] for run in line), "", False, False)] if len(line) > MAX_RUNS_PER_LINE else line)
    return out


def copy_href(scheme: str, key: int, index: int) -> str:
    return f"{scheme}:copy-code/{key}/{index}"


def insert_code(cursor: QTextCursor, segment: Segment, key: int, index: int, c: Colors, scheme: str) -> QTextCursor:
    """Insert one code box at `cursor` (which must be at the start of an empty block) and return a cursor
    after it. The box is a frame: one background behind every line, its own padding, and lines that
    wrap inside it (the transcript wraps anywhere), so a long line never widens the conversation."""
    fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    frame_format = QTextFrameFormat()
    frame_format.setBackground(QColor(c.code_bg))
    frame_format.setBorder(1)
    frame_format.setBorderBrush(QColor(c.border))
    frame_format.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
    frame_format.setPadding(8)
    frame_format.setTopMargin(4)
    frame_format.setBottomMargin(4)
    frame_format.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
    frame_format.setProperty(CODE_PROPERTY, index)
    frame: QTextFrame = cursor.insertFrame(frame_format)
    inner = frame.firstCursorPosition()
    header = QTextCharFormat()
    header.setForeground(QColor(c.muted))
    header.setFontPointSize(max(7.0, fixed.pointSizeF() * 0.9))
    inner.insertText(printable(segment.language or tr("code")) + "   ", header)
    if segment.closed:
        link = QTextCharFormat(header)
        link.setAnchor(True)
        link.setAnchorHref(copy_href(scheme, key, index))
        link.setForeground(QColor(c.accent))
        link.setFontWeight(QFont.Weight.DemiBold)
        inner.insertText(tr("Copy"), link)
    spacing = QTextBlockFormat()
    spacing.setTopMargin(4)
    inner.insertBlock(spacing, QTextCharFormat())
    # A block still being written is drawn plain (one run): it is redrawn on every streamed update, and
    # highlighting it each time would cost the UI thread milliseconds per frame. It is highlighted once,
    # when its fence closes.
    if not segment.closed:
        warm_up(segment.language)
    longest = max((len(line) for line in segment.text.split("\n")), default=0)
    language = segment.language if segment.closed and longest <= MAX_HIGHLIGHTED_LINE else ""
    runs = plain_long_lines(highlight(printable(segment.text), language, c.dark))
    # The runs go into a scratch document (no layout) and in as one fragment: inserted one by one into the
    # transcript, each run would lay out its whole line again.
    scratch = QTextDocument()
    code = QTextCursor(scratch)
    for text, color, bold, italic in runs:
        fmt = QTextCharFormat()
        fmt.setFontFamilies([fixed.family()])
        fmt.setForeground(QColor(color) if color else QColor(c.text))
        if bold:
            fmt.setFontWeight(QFont.Weight.Bold)
        if italic:
            fmt.setFontItalic(True)
        code.insertText(text, fmt)
    inner.insertFragment(QTextDocumentFragment(scratch))
    after = QTextCursor(cursor.document())
    after.setPosition(frame.lastPosition() + 1)
    return after
