"""Text from a model folder or a model's answer is shown as text in the app: no HTML it carries is
rendered (no image loaded, nothing hidden) and no control character reaches a widget raw."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel

from engines.text import printable
from engines.types import CPU_EP, Classification, ClassScore, Placement
from ui.chat.transcript import Transcript
from ui.chat.transcript_render import Entry
from ui.classify.bars import ProbabilityBars
from ui.classify.batch import ResultsModel
from ui.common.widgets import Banner

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


def _shown(label: QLabel) -> str:
    """What a label puts on screen: its text itself when it is plain, else the rendered rich text."""
    return label.text() if label.textFormat() == Qt.TextFormat.PlainText else _visible(label.text())


@pytest.mark.parametrize("label", HOSTILE)
def test_a_label_is_shown_as_the_text_it_is(qtbot: object, label: str) -> None:
    bars = ProbabilityBars(rows=2)
    qtbot.addWidget(bars)  # type: ignore[attr-defined]
    bars.resize(1600, 100)
    bars.show()
    bars.set_scores([(label, 0.9), (label, 0.1)])
    for widget in bars.labels:
        shown = _shown(widget)
        assert widget.textFormat() == Qt.TextFormat.PlainText
        assert RAW_CONTROL.search(shown) is None
        assert "<" not in label or "<" in shown  # the markup is visible text, not rendered
        assert "hidden" not in label or "hidden" in shown
    bars.resize(150, 100)  # narrow: elided, and the whole label (escaped) in the tooltip
    bars.layout().activate()
    tip = bars.labels[0].toolTip()
    assert bars.labels[0].text().endswith("…") and RAW_CONTROL.search(_visible(tip)) is None
    assert "<" not in label or "<" in _visible(tip)


ON_CPU = Placement("CPU", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),))


@pytest.mark.parametrize("text", [*HOSTILE, '<img src="/tmp/fifo">'])
def test_the_classify_view_shows_labels_and_names_as_text(qtbot: object, text: str, tmp_path: object) -> None:
    """The result title (the top label), the file name, the bars, the chip's popover and the Copy text:
    a label from a model folder that looks like markup is shown as the text it is, never loaded."""
    from PySide6.QtWidgets import QApplication

    from ui.classify.view import ClassifyView
    from ui.common.device_picker import DeviceChoiceModel

    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    path = "/photos/" + text.replace("/", "_") + ".png"
    fell_back = Placement("NPU", (CPU_EP,), (CPU_EP,), ((CPU_EP, 94),), fell_back=True, reason=text)
    view.classify_paths([path])
    view.show_result(Classification(path, (ClassScore(0, text, 0.9), ClassScore(1, text, 0.1)), 1.0, 1.0, fell_back))
    view.show_finished(None)
    panel = view.result_panel
    for label in (panel.title, panel.file, panel.hint, panel.latency, view.drop_zone.caption):
        assert label.textFormat() == Qt.TextFormat.PlainText, label.objectName()
    assert panel.title.text() == printable(text, newlines=False)
    assert panel.file.text() == printable(Path(path).name, newlines=False)
    panel.chip.show_why()
    assert panel.chip.popover is not None
    assert panel.chip.popover.label.textFormat() == Qt.TextFormat.PlainText
    assert printable(text) in panel.chip.popover.label.text()
    assert "<" not in text or "<" in _visible(panel.chip.toolTip())
    panel.chip.popover.close()
    panel.copy()
    assert text in QApplication.clipboard().text()



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
    model = ResultsModel()
    model.results = [
        Classification(f"/photos/{text}.png", (ClassScore(0, text, 0.9),), 1.0, 1.0),
        Classification(f"/photos/bad{text}.png", (), 0.0, 0.0, error=f"Cannot read {text}"),
    ]
    for row in range(2):
        for column in range(5):
            shown = model.data(model.index(row, column), Qt.ItemDataRole.DisplayRole)
            assert RAW_CONTROL.search(shown) is None and "\n" not in shown
        for column in range(5):
            tip = model.data(model.index(row, column), Qt.ItemDataRole.ToolTipRole)
            visible = _visible(tip)
            assert RAW_CONTROL.search(visible) is None
            assert "<" not in text or column in (2, 3) or "<" in visible  # markup is shown, not rendered
