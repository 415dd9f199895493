"""The model picker shared by Classify and Chat: the library's models that fit the view, each with its
size, precision and devices, so two builds of one model never read the same."""

from __future__ import annotations

import re
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QWidget

from engines import ModelEntry, format_bytes
from ui.common.plain import plain_text, plain_tooltip


def tr(text: str) -> str:
    return QCoreApplication.translate("ModelPicker", text)


_PRECISION_WORDS = {
    "fp32": "32-bit float",
    "fp16": "16-bit float",
    "bf16": "bfloat16",
    "int8": "8-bit",
    "uint8": "8-bit",
    "int4": "4-bit",
}
_QDQ = re.compile(r"qdq-a(\d+)w(\d+)")


def precision_words(precision: str) -> str:
    """A precision as a person says it: "qdq-a16w8" -> "8-bit quantized" (its weights), "fp32" ->
    "32-bit float"; an unknown one stays as written."""
    key = precision.strip().lower()
    qdq = _QDQ.fullmatch(key)
    if qdq is not None:
        return f"{qdq.group(2)}-bit quantized"
    return _PRECISION_WORDS.get(key, precision)


def short_name(entry: ModelEntry) -> str:
    """ "EfficientNet-Lite0 (ImageNet-1k), QDQ for the NPU ..." -> "EfficientNet-Lite0"."""
    name = entry.display_name or entry.name
    return name.split(" (", 1)[0].split(", ", 1)[0].strip() or entry.name


def entry_line(entry: ModelEntry) -> str:
    """One line per model: name · precision · devices (its size and full name are the tooltip)."""
    parts = [short_name(entry)]
    if entry.precision:
        parts.append(precision_words(entry.precision))
    if entry.devices:
        parts.append("/".join(d.upper() for d in entry.devices))
    return plain_text(" · ".join(parts), one_line=True)


def entry_tooltip(entry: ModelEntry) -> str:
    lines = [entry.display_name or entry.name, tr("Folder name: {name}").format(name=entry.name)]
    if entry.precision:
        words = precision_words(entry.precision)
        lines.append(tr("Precision: {words} ({raw})").format(words=words, raw=entry.precision))
    if entry.size_bytes:
        lines.append(tr("Size: {size}").format(size=format_bytes(entry.size_bytes)))
    if entry.problem:
        lines.append(tr("Not usable: {problem}").format(problem=entry.problem))
    return plain_tooltip("\n".join(lines))


class ModelPicker(QWidget):
    """A combo of the library's models of one kind. `model_chosen(name)` when the user picks one."""

    model_chosen = Signal(str)

    def __init__(self, kind: str, parent: QWidget | None = None, label: str = "") -> None:
        super().__init__(parent)
        self.kind = kind
        self._current = ""
        self._listed = False  # "not installed" is said only once the library has been read
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        if label:
            caption = QLabel(label)
            layout.addWidget(caption)
        self.combo = QComboBox()
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.setSizePolicy(QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Fixed)  # its entry is never cut
        self.combo.setAccessibleName(tr("Model"))
        self.combo.setToolTip(tr("Which model of the library this view uses"))
        layout.addWidget(self.combo)
        self.combo.currentIndexChanged.connect(self._on_index)
        self.setAccessibleName(tr("Model picker"))

    # --- API ----------------------------------------------------------------------------------------
    def set_entries(self, entries: Sequence[ModelEntry]) -> None:
        """Library entries; only this picker's kind is listed."""
        fitting = [e for e in entries if e.kind == self.kind]
        with QSignalBlocker(self.combo):
            self.combo.clear()
            for entry in fitting:
                text = entry_line(entry)
                if not entry.usable:
                    text += " " + tr("(not usable)")
                self.combo.addItem(text, entry.name)
                self.combo.setItemData(self.combo.count() - 1, entry_tooltip(entry), Qt.ItemDataRole.ToolTipRole)
            self._listed = True
            if self._current and self.combo.findData(self._current) < 0:
                # The remembered model is not in the library (removed, or not built): say so, keep it.
                shown = plain_text(self._current, one_line=True)
                self.combo.addItem(tr("{name} (not installed)").format(name=shown), self._current)
            self._select(self._current)
        # Qt's size hint for the longest entry leaves the style a few pixels short of the whole text: the
        # entry in use is never cut, so the box asks for the text's own width plus its frame and arrow.
        widest = max((self.combo.fontMetrics().horizontalAdvance(self.combo.itemText(i))
                      for i in range(self.combo.count())), default=0)  # fmt: skip
        self.combo.setMinimumWidth(widest + self.combo.sizeHint().height() + 24)
        self._update_tooltip()

    def set_current(self, name: str) -> None:
        """Show `name` as the model in use (no signal)."""
        self._current = name
        with QSignalBlocker(self.combo):
            if name and self.combo.findData(name) < 0:
                shown = plain_text(name, one_line=True)
                text = tr("{name} (not installed)").format(name=shown) if self._listed else shown
                self.combo.addItem(text, name)
            self._select(name)
        self._update_tooltip()

    def names(self) -> list[str]:
        return [str(self.combo.itemData(i)) for i in range(self.combo.count())]

    def choose(self, name: str) -> None:
        """Pick `name` as a user would (emits model_chosen when it changes)."""
        index = self.combo.findData(name)
        if index >= 0:
            self.combo.setCurrentIndex(index)

    # --- internals ----------------------------------------------------------------------------------
    def _select(self, name: str) -> None:
        index = self.combo.findData(name)
        self.combo.setCurrentIndex(max(0, index) if self.combo.count() else -1)

    def _update_tooltip(self) -> None:
        index = self.combo.currentIndex()
        tip = self.combo.itemData(index, Qt.ItemDataRole.ToolTipRole) if index >= 0 else ""
        self.combo.setToolTip(str(tip or tr("Which model of the library this view uses")))

    def _on_index(self, index: int) -> None:
        name = self.combo.itemData(index)
        self._update_tooltip()
        if isinstance(name, str) and name != self._current:
            self._current = name
            self.model_chosen.emit(name)
