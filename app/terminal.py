"""The CLI's terminal: every text-mode write goes through `engines.text.printable`.

Wrapping stdout and stderr once, for the whole command, is what makes the rule hold everywhere: a
label, a model name, a file name, a streamed chat token or an error message that quotes any of them
cannot move the cursor, retitle the window or write the clipboard, and a file name that is not UTF-8
prints as `\\xNN` instead of stopping the command with a `UnicodeEncodeError`. The few writes that
are the CLI's own control (a progress line redrawn with a carriage return, JSON already escaped by
`engines.text.json_text`) go through `write_raw`.
"""

from __future__ import annotations

import codecs
import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from engines.text import printable


class SafeStream:
    """A text stream that shows control characters as visible escapes before writing them on."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        encoding = getattr(inner, "encoding", None) or "utf-8"
        try:
            self._utf = codecs.lookup(encoding).name.startswith("utf")
        except LookupError:
            self._utf = False
        self._encoding = encoding

    def write(self, text: str) -> int:
        safe = printable(text)
        if not self._utf:  # e.g. a cp1252 console: what it cannot show becomes an escape, not an error
            safe = safe.encode(self._encoding, "backslashreplace").decode(self._encoding)
        self.inner.write(safe)
        return len(text)

    def write_raw(self, text: str) -> None:
        self.inner.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer...
        return getattr(self.inner, name)


def write_raw(stream: Any, text: str) -> None:
    """Write the CLI's own control text (a carriage return, escaped JSON) past the escaping."""
    raw = getattr(stream, "write_raw", None)
    if callable(raw):
        raw(text)
    else:
        stream.write(text)


@contextlib.contextmanager
def safe_terminal() -> Iterator[None]:
    """stdout and stderr escape control characters for the duration of a command."""
    out, err = sys.stdout, sys.stderr
    wrapped = [s if isinstance(s, SafeStream) or s is None else SafeStream(s) for s in (out, err)]
    sys.stdout, sys.stderr = wrapped[0], wrapped[1]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def print_json(data: Any) -> None:
    """Print `data` as JSON, whole: it is serialized before the first byte is written, so a value that
    cannot be written never leaves half a document behind."""
    from engines.text import json_text

    write_raw(sys.stdout, json_text(data) + "\n")
