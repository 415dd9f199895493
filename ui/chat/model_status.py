"""The chat model's state as the chat host reports it (loading, loaded with its placement, failed, unloaded),
the device choice and the last answer's failure: kept as ChatInputs, and shown (the header chip, the load
spinner, the state banners) from what ui.chat.state derives of them after every change.

`changed` says when what can be done changed (whether a message can be sent, and why not)."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QObject, Signal

from engines import DeviceChoice
from ui.chat.banners import ChatBanners
from ui.chat.state import ChatInputs, ChatState, derive
from ui.common.placement_chip import PlacementChip
from ui.common.widgets import Spinner


class ModelStatus(QObject):
    changed = Signal()  # derived again: the chip, the banners, and whether a message can be sent

    def __init__(
        self, chip: PlacementChip, spinner: Spinner, banners: ChatBanners, choice: DeviceChoice, parent: QObject | None
    ) -> None:
        super().__init__(parent)
        self.chip = chip
        self.spinner = spinner
        self.banners = banners
        self.inputs = ChatInputs(choice=choice)
        self.state: ChatState = derive(self.inputs)
        self._chip_shown: tuple[object, ...] = ()

    @property
    def info(self) -> Mapping[str, object]:
        """The loaded model (name, ep, device, placement, context_length, ...); empty when none is loaded."""
        return self.inputs.info

    @property
    def can_send(self) -> bool:
        return not self.state.send_reason

    # --- what the chat host says ----------------------------------------------------------------
    def loading(self, text: str) -> None:
        self.spinner.start()
        self.inputs.loading = text
        self.inputs.model_error = None  # a new load: the last load's error no longer holds
        self.banners.reset()
        self.rederive()

    def loaded(self, info: Mapping[str, object]) -> None:
        self.spinner.stop()
        self.inputs.loading = ""
        self.inputs.info = dict(info)
        self.inputs.model_error = None
        self.banners.reset()
        self.rederive()

    def unloaded(self) -> None:
        """The chat engine was stopped with its model (it hung, or its template was unsafe): no model is
        loaded now; the answer's error says why."""
        self.inputs.info = {}
        self.rederive()

    def failed(self, error: object) -> None:
        self.spinner.stop()
        self.inputs.loading = ""
        self.inputs.info = {}
        self.inputs.model_error = error
        self.banners.reset()
        self.rederive()

    def choice_changed(self, choice: DeviceChoice) -> None:
        self.inputs.choice = choice
        self.inputs.model_error = None  # it belonged to the old choice; the app loads for the new one
        self.rederive()

    # --- the answers ------------------------------------------------------------------------------
    def answer_failed(self, error: object) -> bool:
        """An answer failed. False when that is because the model failed to load (its banner already says why,
        and the question waits for a model); True when the failure is the answer's own (a model that stopped
        for what it did, mid-answer, is unloaded and says so: its error is the answer's)."""
        if self.inputs.model_error is not None:
            return False
        self.inputs.answer_error = error
        self.rederive()
        return True

    def answer_done(self) -> None:
        """An answer came: the last failure no longer holds."""
        self.clear_answer_error()

    def clear_answer_error(self) -> None:
        if self.inputs.answer_error is not None:
            self.inputs.answer_error = None
            self.rederive()

    def set_unanswered(self, question: str) -> None:
        if question != self.inputs.unanswered:
            self.inputs.unanswered = question
            self.rederive()

    def banner_closed(self, cause: str) -> bool:
        """The user closed a state banner: a failed answer's error is then read (it goes); a model's state
        stays, its banner closed until that state changes."""
        if cause == "answer" and self.inputs.answer_error is not None:
            self.inputs.answer_error = None
            self.rederive()
            return True
        return False

    def rederive(self) -> None:
        """Chip, state banners and what can be sent, from the current inputs (see ui.chat.state)."""
        state = derive(self.inputs)
        self.state = state
        chip = (state.placement, state.chip_kind, state.chip_text, state.chip_details)
        if chip != self._chip_shown:  # restyling the chip costs a style sheet pass: only on a change
            self._chip_shown = chip
            if state.placement is not None:
                self.chip.set_placement(state.placement)  # asked: what the model was loaded for
            else:
                self.chip.set_state(state.chip_kind, state.chip_text, state.chip_details)
        self.banners.sync(state.banners)
        self.changed.emit()
