"""The chat model's state as the chat host reports it (loading, loaded with its placement, failed), the
device choice, and what the header chip and state banners say about them (derived in ui.chat_state).

A mixin of ChatView (ui.chat_view): it works on the view's inputs and header, declared below."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engines.types import DeviceChoice
from ui.chat_banners import ChatBanners
from ui.chat_composer import Composer
from ui.chat_state import ChatInputs, derive
from ui.generation_panel import GenerationPanel
from ui.placement_chip import PlacementChip
from ui.widgets import Spinner, error_text


class ModelStatus:
    inputs: ChatInputs
    model_info: dict[str, Any]
    generating: bool
    messages: list[Any]
    state_banners: ChatBanners
    composer: Composer
    panel: GenerationPanel
    model_badge: PlacementChip
    model_spinner: Spinner
    _chip_shown: tuple[object, ...]
    _show_context: Callable[[dict[str, Any] | None], None]

    def show_model_loading(self, text: str) -> None:
        self.model_spinner.start()
        self.inputs.loading = text
        self.inputs.model_error = None  # a new load: the last load's error no longer holds
        self.state_banners.reset()
        self.rederive()

    def on_model_loaded(self, info: dict[str, Any]) -> None:
        self.model_info = dict(info)
        self.model_spinner.stop()
        self.inputs.loading = ""
        self.inputs.info = dict(info)
        self.inputs.model_error = None
        self.state_banners.reset()
        defaults = info.get("default_options")
        if isinstance(defaults, dict):
            self.panel.set_defaults(defaults)
        if not self.generating and not self.messages:
            self._show_context(None)
        self.composer.recount()
        self.rederive()

    def on_model_unloaded(self) -> None:
        """The chat engine was stopped with its model (it hung, or its template was unsafe): no model is
        loaded now; the answer's error says why."""
        self.model_info = {}
        self.inputs.info = {}
        self.rederive()

    def on_model_failed(self, error: object) -> None:
        self.model_spinner.stop()
        self.model_info = {}
        self.inputs.loading = ""
        self.inputs.info = {}
        self.inputs.model_error = error
        self.state_banners.reset()
        self.rederive()

    def on_tokens_counted(self, text: str, tokens: int) -> None:
        self.composer.set_exact_count(text, tokens)

    def _on_choice_changed(self, choice: DeviceChoice) -> None:
        self.inputs.choice = choice
        self.inputs.model_error = None  # it belonged to the old choice; the app loads for the new one
        self.rederive()

    def rederive(self) -> None:
        """Chip, state banners and status from the current inputs (see ui.chat_state)."""
        state = derive(self.inputs)
        chip = (state.placement, state.chip_kind, state.chip_text, state.chip_details)
        if chip != self._chip_shown:  # restyling the chip costs a style sheet pass: only on a change
            self._chip_shown = chip
            if state.placement is not None:
                self.model_badge.set_placement(state.placement)  # asked: what the model was loaded for
            else:
                self.model_badge.set_state(state.chip_kind, state.chip_text, state.chip_details)
        self.state_banners.sync(state.banners)

    def _banner_read(self, key: tuple[str, str]) -> bool:
        """The user closed a state banner: a failed answer's error is then read (it goes); a model's
        state stays, its banner closed until that state changes."""
        if self.inputs.answer_error is not None and error_text(self.inputs.answer_error) == key:
            self.inputs.answer_error = None
            return True
        return False
