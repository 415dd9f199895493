"""Text from a model folder or a model's answer is shown as text in the app: no HTML it carries is
rendered (no image loaded, nothing hidden) and no control character reaches a widget raw."""

from __future__ import annotations

import re

import pytest
from PySide6.QtGui import QTextDocument

from ui.classify_view import ProbabilityBars
from ui.transcript import Entry, Transcript
from ui.widgets import Banner

RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
HOSTILE = [
    '<img src="file:///etc/passwd">',
    "<b>bold</b><span style='display:none'>hidden</span>",
    "tabby\x1b]52;c;ZXZpbA==\x07",
    "cat\u202egpj.exe",
    "\x9b2J<a href='http://x'>link</a>",
]


def _visible(rich: str) -> str:
    doc = QTextDocument()
    doc.setHtml(rich)
    return doc.toPlainText()


@pytest.mark.parametrize("label", HOSTILE)
def test_a_label_is_shown_as_the_text_it_is(qtbot: object, label: str) -> None:
    bars = ProbabilityBars(rows=2)
    bars.set_scores([(label, 0.9), (label, 0.1)])
    for widget in bars.labels:
        shown = _visible(widget.text())
        assert RAW_CONTROL.search(shown) is None
        assert "<" not in label or "<" in shown  # the markup is visible text, not rendered
        assert "hidden" not in label or "hidden" in shown


@pytest.mark.parametrize("message", HOSTILE)
def test_an_error_banner_quoting_hostile_text(qtbot: object, message: str) -> None:
    banner = Banner(message, hint=message)
    shown = _visible(banner.label.text())
    assert RAW_CONTROL.search(shown) is None
    assert "<" not in message or "<" in shown


@pytest.mark.parametrize("answer", HOSTILE)
def test_an_answer_with_html_and_escapes_is_text(qtbot: object, answer: str) -> None:
    view = Transcript()
    view.set_entries([Entry(1, "user", answer), Entry(2, "assistant", answer, meta=answer)])
    shown = view.toPlainText()
    assert RAW_CONTROL.search(shown) is None
    html = view.toHtml()
    assert "<img" not in html  # no image element: the file is never loaded
    assert "hidden" not in answer or "hidden" in shown
    if "<" in answer:
        assert "<" in shown  # raw HTML in Markdown is shown as typed, never rendered


def test_a_streaming_answer_with_html_is_text(qtbot: object) -> None:
    view = Transcript()
    view.set_entries([Entry(1, "user", "hi")])
    text = ""
    for piece in ['<img src="file:///etc/passwd">', "\n\n", "\x1b[2J more", "\n\n", "end"]:
        text += piece
        if len(view.entries) == 1:
            view.append_entry(Entry(2, "assistant", text, state="streaming"))
        else:
            view.update_last(Entry(2, "assistant", text, state="streaming"))
    view.update_last(Entry(2, "assistant", text))
    assert "<img" not in view.toHtml()
    assert RAW_CONTROL.search(view.toPlainText()) is None


@pytest.mark.parametrize("text", HOSTILE)
def test_the_results_table_shows_names_and_labels_as_text(qtbot: object, text: str) -> None:
    from PySide6.QtCore import Qt

    from engines.types import Classification, ClassScore
    from ui.classify_parts import ResultsModel

    model = ResultsModel()
    model.results = [
        Classification(f"/photos/{text}.png", (ClassScore(0, text, 0.9),), 1.0, 1.0),
        Classification(f"/photos/bad{text}.png", (), 0.0, 0.0, error=f"Cannot read {text}"),
    ]
    for row in range(2):
        for column in range(2):
            shown = model.data(model.index(row, column), Qt.ItemDataRole.DisplayRole)
            assert RAW_CONTROL.search(shown) is None and "\n" not in shown
        tip = model.data(model.index(row, 0), Qt.ItemDataRole.ToolTipRole)
        visible = _visible(tip)
        assert RAW_CONTROL.search(visible) is None
        assert "<" not in text or "<" in visible  # markup in a name is shown, not rendered
