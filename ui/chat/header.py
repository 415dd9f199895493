"""The chat's header: the title row (the conversation-list toggle, the model picker, the device picker, the
settings toggle and the export menu) and, under it, the description with the model's load spinner and
placement chip at its right end. Icons are drawn again on a theme switch (restyle).

The chip has a line of its own: its words change with every load ("CPU", "Loading on NPU…", "Asked NPU →
Ran on CPU"), and in the title row each change slid the pickers sideways, and at 1000 px cut the chip.
Under the pickers, right-aligned, it grows into free room and moves nothing; the spinner and the chip
keep their room while hidden, so the line never changes height either."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QMargins, Signal
from PySide6.QtWidgets import QBoxLayout, QHBoxLayout, QMenu, QSizePolicy, QToolButton, QWidget

from ui.common.device_picker import DeviceChoiceModel, DevicePicker
from ui.common.icons import icon
from ui.common.model_picker import ModelPicker
from ui.common.placement_chip import PlacementChip
from ui.common.widgets import Spinner, ViewHeader


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


class ChatHeader(ViewHeader):
    export_chosen = Signal(str)  # markdown | json: export the conversation on screen

    def __init__(self, choice_model: DeviceChoiceModel, parent: QWidget | None = None) -> None:
        super().__init__(tr("Chat"), tr("A small language model, running on this machine. Nothing leaves it."), parent)
        self.list_button = QToolButton()
        self.list_button.setIcon(icon("chat"))
        self.list_button.setCheckable(True)
        self.list_button.setChecked(True)
        self.list_button.setToolTip(tr("Show or hide the conversation list"))
        self.list_button.setAccessibleName(tr("Conversation list"))
        self.controls.addWidget(self.list_button)
        self.model_picker = ModelPicker("genai-llm")
        self.controls.addWidget(self.model_picker)
        self.model_spinner = Spinner()
        self.model_badge = PlacementChip()  # where the chat model runs, derived (ui.chat.model_status)
        self.model_badge.setAccessibleName(tr("Where the chat model runs"))
        self._chip_line()
        self.picker = DevicePicker(choice_model, compact=True)
        self.controls.addWidget(self.picker)
        self.settings_button = QToolButton()
        self.settings_button.setIcon(icon("sliders"))
        self.settings_button.setToolTip(tr("System prompt and generation settings"))
        self.settings_button.setAccessibleName(tr("Chat settings"))
        self.settings_button.setCheckable(True)
        self.settings_button.setChecked(False)  # the reading column gets the room; one click opens it
        self.controls.addWidget(self.settings_button)
        self.export_button = QToolButton()
        self.export_button.setIcon(icon("export"))
        self.export_button.setToolTip(tr("Export this conversation"))
        self.export_button.setAccessibleName(tr("Export this conversation"))
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction(tr("Export as Markdown…"), lambda: self.export_chosen.emit("markdown"))
        menu.addAction(tr("Export as JSON…"), lambda: self.export_chosen.emit("json"))
        self.export_button.setMenu(menu)
        self.controls.addWidget(self.export_button)

    def _chip_line(self) -> None:
        """The description, and the spinner and chip at the right end of its line."""
        texts = self.layout()
        assert isinstance(texts, QBoxLayout)
        texts.removeWidget(self.subtitle)
        line = QHBoxLayout()
        line.setSpacing(8)
        line.addWidget(self.subtitle, 1)
        for part in (self.model_spinner, self.model_badge):
            policy = part.sizePolicy()
            policy.setRetainSizeWhenHidden(True)
            part.setSizePolicy(policy)
            line.addWidget(part)
        self.subtitle.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # it wraps
        chip = self.model_badge  # as tall with "Why?" as without: the line keeps its height
        for polished in (chip, chip.why, chip.label):
            polished.ensurePolished()  # (the style sheet's padding counts)
        margins = chip.contentsMargins() + (layout.contentsMargins() if (layout := chip.layout()) else QMargins())
        tallest = max(chip.why.sizeHint().height(), chip.label.sizeHint().height(), self.model_spinner.height())
        chip.setMinimumHeight(tallest + margins.top() + margins.bottom())
        texts.addLayout(line)

    def restyle(self) -> None:
        """Icons are tinted pixmaps: a theme switch draws them again in the new colours."""
        self.list_button.setIcon(icon("chat"))
        self.settings_button.setIcon(icon("sliders"))
        self.export_button.setIcon(icon("export"))
