"""The chat's header row: the conversation-list toggle, the model's load spinner, picker and placement
chip, the device picker, the settings toggle and the export menu. Icons are drawn again on a theme
switch (restyle)."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Signal
from PySide6.QtWidgets import QMenu, QToolButton, QWidget

from app.qtcompat import emit
from ui.device_picker import DeviceChoiceModel, DevicePicker
from ui.icons import icon
from ui.model_picker import ModelPicker
from ui.placement_chip import PlacementChip
from ui.widgets import Spinner, ViewHeader


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
        self.model_spinner = Spinner()
        self.controls.addWidget(self.model_spinner)
        self.model_picker = ModelPicker("genai-llm")
        self.controls.addWidget(self.model_picker)
        self.model_badge = PlacementChip()  # where the chat model runs, derived (see ChatView.rederive)
        self.model_badge.setAccessibleName(tr("Where the chat model runs"))
        self.controls.addWidget(self.model_badge)
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
        menu.addAction(tr("Export as Markdown…"), lambda: emit(self.export_chosen, "markdown"))
        menu.addAction(tr("Export as JSON…"), lambda: emit(self.export_chosen, "json"))
        self.export_button.setMenu(menu)
        self.controls.addWidget(self.export_button)

    def restyle(self) -> None:
        """Icons are tinted pixmaps: a theme switch draws them again in the new colours."""
        self.list_button.setIcon(icon("chat"))
        self.settings_button.setIcon(icon("sliders"))
        self.export_button.setIcon(icon("export"))
