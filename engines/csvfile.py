"""The one CSV writer of NPU Studio (batch results, benchmark exports, `bench --csv`): a CSV is data, never
code.

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula (`=HYPERLINK(...)`, DDE
payloads), and some also after a leading tab, carriage return or line feed; the full-width forms
(`＝＋－＠`) act the same in East Asian locales. Labels, model and file names, reasons and notes come from
model folders and users, so every cell whose first non-blank character is one of these is written with a
single quote in front (OWASP's CSV-injection rule): the spreadsheet shows the text, with the quote hidden.

A cell that is a plain decimal number (`-0.5`, `+3`, `-1.25e-3`: digits, one point, an exponent) is left as
it is, whoever wrote it: it cannot be a formula, and a spreadsheet must read a negative latency or
overhead NPU Studio measured as the number it is. Pure Python.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import TextIO

TRIGGERS = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: object) -> str:
    """`value` as the text of one cell that no spreadsheet runs as a formula."""
    text = "" if value is None else str(value)
    first = text.lstrip(" ")[:1]
    if first and first in TRIGGERS and not _NUMBER.fullmatch(text.strip()):
        return "'" + text
    return text


class SafeWriter:
    """`csv.writer` whose every cell goes through `safe_cell`."""

    def __init__(self, out: TextIO, lineterminator: str = "\r\n") -> None:
        self._writer = csv.writer(out, lineterminator=lineterminator)

    def writerow(self, cells: Iterable[object]) -> None:
        self._writer.writerow([safe_cell(cell) for cell in cells])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(out: TextIO, lineterminator: str = "\r\n") -> SafeWriter:
    """The writer for `out` (opened with newline=""); rows end with CRLF as RFC 4180 says, unless told."""
    return SafeWriter(out, lineterminator)
