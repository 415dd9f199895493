"""Text from outside the app on screen: one rule.

A string from a model folder, a file name, a conversation, a device driver or the user is shown as
the text it is. Qt's default (AutoText) guesses: a string that looks like HTML is rendered, and an
`<img src=...>` in it is read from disk. So:

- labels that show such text are `plain_label()`s (Qt.PlainText, never AutoText), and every label the
  shared helpers make (`muted_label`, view titles, empty states) is one;
- tooltips are rich text whenever Qt thinks they look like it, so text from outside becomes a tooltip
  only through `plain_tooltip()`, which escapes it and marks it as rich text that shows it literally;
- where a label mixes the app's own markup (a bold word) with outside text, `rich_label()` says so
  explicitly (Qt.RichText) and each outside part goes through `engines.text.rich_text` (escaped).

Control, bidi and undecodable characters (NUL, a lone surrogate, a right-to-left override) become
visible escapes (`engines.text.printable`), so what is shown is what the string holds.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from engines import printable, rich_text


def plain_text(text: object, one_line: bool = False) -> str:
    """`text` as it will be shown: control and bidi characters escaped; `one_line` escapes newlines too."""
    return printable(text, newlines=not one_line)


ZERO_WIDTH_SPACE = "\u200b"
LONGEST_RUN = 32  # characters without a break opportunity before one is added


def breakable(text: str) -> str:
    """`text` with a zero-width space after each path separator, and within any run of LONGEST_RUN
    characters that has none: a long path or name wraps instead of being cut or widening the window."""
    out: list[str] = []
    run = 0
    for char in text:
        out.append(char)
        run = 0 if char.isspace() else run + 1
        if char in "/\\" or run >= LONGEST_RUN:
            out.append(ZERO_WIDTH_SPACE)
            run = 0
    return "".join(out)


def plain_tooltip(text: object) -> str:
    """A tooltip that shows `text` literally (Qt renders a tooltip as rich text when it looks like it)."""
    shown = str(text)
    if not shown:
        return ""
    return "<p style='white-space:pre-wrap'>" + rich_text(shown) + "</p>"


def plain_label(
    text: object = "",
    *,
    muted: bool = False,
    word_wrap: bool = True,
    selectable: bool = False,
    parent: QWidget | None = None,
) -> QLabel:
    """A label that shows its text as typed, whatever it holds (no rich text, no links, no images)."""
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(plain_text(text))
    label.setWordWrap(word_wrap)
    if muted:
        label.setProperty("muted", True)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def set_plain(label: QLabel, text: object) -> None:
    """Show outside text in an existing label, as text."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(plain_text(text))


def rich_label(html: str, *, word_wrap: bool = True, parent: QWidget | None = None) -> QLabel:
    """A label with the app's own markup: every outside part of `html` must have gone through
    `engines.text.rich_text`. Rich on purpose (Qt.RichText), never guessed."""
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setText(html)
    label.setWordWrap(word_wrap)
    return label


def ask(parent: QWidget, title: str, text: str) -> bool:
    """A Yes / No question whose words (a model's name, a folder) are shown as plain text."""
    box = QMessageBox(QMessageBox.Icon.Question, plain_text(title, one_line=True), plain_text(text),
                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, parent)  # fmt: skip
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setDefaultButton(QMessageBox.StandardButton.No)
    return box.exec() == QMessageBox.StandardButton.Yes
