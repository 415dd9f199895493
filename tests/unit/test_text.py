"""engines.text: the one rule for showing text from elsewhere."""

from __future__ import annotations

import json
import os

import pytest

from engines.text import json_text, printable, rich_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),
        ("\x9b31m", "\\x9b31m"),
        ("a\u202eb", "a\\u202eb"),
        ("a\u2066b\u2069", "a\\u2066b\\u2069"),
        ("x\x00y\x7f", "x\\x00y\\x7f"),
        ("line\rover", "line\\x0dover"),
        (os.fsdecode(b"caf\xe9"), "caf\\xe9"),
        ("\ud800", "\\ud800"),
    ],
)
def test_controls_become_visible_escapes(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable(shown) == shown  # what is shown is shown as it is


def test_ordinary_text_is_unchanged() -> None:
    text = "Égyptian cat — 猫 🐈\ttab\nnext line"
    assert printable(text) == text
    assert printable("a\nb", newlines=False) == "a\\nb"


def test_json_text_is_valid_json_with_the_same_strings() -> None:
    data = {"name": "x\x1b[2J\x9b\u202e" + os.fsdecode(b"\xff"), "n": [1.5, None]}
    text = json_text(data)
    flat = text.replace("\n", "")
    assert printable(flat) == flat
    assert json.loads(text) == data
    text.encode("utf-8")  # encodable: no lone surrogate left raw


def test_rich_text_escapes_markup_and_controls() -> None:
    assert rich_text('<img src="x">\x1b') == "&lt;img src=&quot;x&quot;&gt;\\x1b"
