"""The model picker shared by Classify and Chat: the library's models that fit the view, each with its
size, precision and devices, so two builds of one model never read the same."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QCoreApplication, QSignalBlocker, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QWidget

from app.qtcompat import emit
from engines.models.library import format_bytes


def tr(text: str) -> str:
    return QCoreApplication.translate("ModelPicker", text)


def short_name(entry: Any) -> str:
    """ "EfficientNet-Lite0 (ImageNet-1k), QDQ for the NPU ..." -> "EfficientNet-Lite0"."""
    name = str(getattr(entry, "display_name", "") or getattr(entry, "name", ""))
    return name.split(" (", 1)[0].split(", ", 1)[0].strip() or str(getattr(entry, "name", ""))


def entry_line(entry: Any) -> str:
    """One line per model: name · precision · devices · size."""
    parts = [short_name(entry)]
    if getattr(entry, "precision", ""):
        parts.append(str(entry.precision))
    devices = tuple(getattr(entry, "devices", ()) or ())
    if devices:
        parts.append("/".join(d.upper() for d in devices))
    size = int(getattr(entry, "size_bytes", 0) or 0)
    if size:
        parts.append(format_bytes(size))
    return " · ".join(parts)


def entry_tooltip(entry: Any) -> str:
    lines = [str(getattr(entry, "display_name", "") or entry.name), tr("Folder name: {name}").format(name=entry.name)]
    if getattr(entry, "problem", ""):
        lines.append(tr("Not usable: {problem}").format(problem=entry.problem))
    return "\n".join(lines)


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
        self.combo.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.combo.setAccessibleName(tr("Model"))
        self.combo.setToolTip(tr("Which model of the library this view uses"))
        layout.addWidget(self.combo)
        self.combo.currentIndexChanged.connect(self._on_index)
        self.setAccessibleName(tr("Model picker"))

    # --- API ----------------------------------------------------------------------------------------
    def set_entries(self, entries: Sequence[Any]) -> None:
        """Library entries (engines.models.library.ModelEntry); only this picker's kind is listed."""
        fitting = [e for e in entries if getattr(e, "kind", "") == self.kind]
        with QSignalBlocker(self.combo):
            self.combo.clear()
            for entry in fitting:
                text = entry_line(entry)
                if not getattr(entry, "usable", True):
                    text += " " + tr("(not usable)")
                self.combo.addItem(text, entry.name)
                self.combo.setItemData(self.combo.count() - 1, entry_tooltip(entry), 3)  # ToolTipRole
            self._listed = True
            if self._current and self.combo.findData(self._current) < 0:
                # The remembered model is not in the library (removed, or not built): say so, keep it.
                self.combo.addItem(tr("{name} (not installed)").format(name=self._current), self._current)
            self._select(self._current)
        self._update_tooltip()

    def set_current(self, name: str) -> None:
        """Show `name` as the model in use (no signal)."""
        self._current = name
        with QSignalBlocker(self.combo):
            if name and self.combo.findData(name) < 0:
                text = tr("{name} (not installed)").format(name=name) if self._listed else name
                self.combo.addItem(text, name)
            self._select(name)
        self._update_tooltip()

    def current_name(self) -> str:
        return self._current

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
        tip = self.combo.itemData(self.combo.currentIndex(), 3) if self.combo.currentIndex() >= 0 else ""
        self.combo.setToolTip(str(tip or tr("Which model of the library this view uses")))

    def _on_index(self, index: int) -> None:
        name = self.combo.itemData(index)
        self._update_tooltip()
        if isinstance(name, str) and name != self._current:
            self._current = name
            emit(self.model_chosen, name)
