"""Text from a model folder or the file system, made safe to show.

Labels, model names, file names and generated chat text come from elsewhere. Shown raw, an escape
sequence in them can clear the terminal, retitle the window, write the clipboard (OSC 52) or reverse
the reading order of a line (bidi overrides); a file name that is not UTF-8 (held as lone surrogates
by Python's `surrogateescape`) cannot even be encoded. `printable` is the one rule for all of it:
every such character is shown as a visible escape (`\\x1b`, `\\u202e`), everything else is kept.
`json_text` applies the same rule to JSON, where the escape is a JSON `\\uXXXX` (same value, valid
JSON), and `rich_text` to Qt rich text (also HTML-escaped). Pure Python: the CLI, the engines and the
views all use it.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0 controls except tab and newline, DEL, C1 controls (0x9b is a one-byte CSI), the bidi embeddings,
# overrides and isolates, the Arabic letter mark, line/paragraph separators, and lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
# The same set without the C0 controls, which json.dumps escapes itself.
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape): show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object, *, newlines: bool = True) -> str:
    """`text` with every control, bidi and undecodable character shown as a visible escape.

    Tabs are kept; newlines too unless `newlines=False` (one-line fields such as a label or a file
    name, where a newline could forge a line of output)."""
    value = str(text)
    value = _UNSAFE.sub(_escape, value)
    if not newlines:
        value = value.replace("\n", "\\n")
    return value


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """`data` as JSON text that is safe on a terminal and encodable as UTF-8.

    Non-ASCII text stays readable; the characters `printable` escapes become `\\uXXXX` escapes, so a
    JSON reader gets the very same strings back (a non-UTF-8 file name comes back as Python's
    surrogate-escaped name, which `os.fsencode` turns into the original bytes)."""
    return _UNSAFE_IN_JSON.sub(_json_escape, json.dumps(data, indent=indent, ensure_ascii=False, default=str))


def rich_text(text: object) -> str:
    """`text` for a Qt widget that renders rich text: printable, then HTML-escaped."""
    import html  # here: only the views render rich text (~2 ms of every command's start)

    return html.escape(printable(text), quote=True)
