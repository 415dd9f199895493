"""Classify: the one device state on screen. The chip, the device banner and the status come from
ui.device_state.derive over (choice, model, last outcome, loading, work), re-derived on every
change; a shown result belongs to the choice and model it ran with.

A mixin of ClassifyView (ui.classify_view): it works on the view's run state and widgets, declared
below."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QLabel

from engines.types import DeviceChoice
from ui.classify_parts import DropZone, ResultsModel
from ui.classify_result import ResultCard
from ui.device_picker import DeviceChoiceModel
from ui.device_state import DeviceState, Outcome, derive
from ui.placement_chip import PlacementChip
from ui.widgets import Banner, BannerArea


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


class ClassifyDeviceState:
    choice_model: DeviceChoiceModel
    model_name: str
    busy: bool
    state: DeviceState | None
    _outcome: Outcome | None
    _loading: str
    _state_banner: Banner | None
    _run_key: tuple[DeviceChoice, str] | None
    _stale_note: bool
    _total: int
    banners: BannerArea
    status: QLabel
    device_chip: PlacementChip
    hint: QLabel
    drop_zone: DropZone
    result_card: ResultCard
    results: ResultsModel

    def refresh_state(self, *_: object) -> None:
        """Re-derive chip, device banner and status from (choice, model, last outcome, loading, work)."""
        state = derive(
            self.choice_model.choice(),
            self.model_name,
            devices=self.choice_model.devices,
            outcome=self._outcome,
            loading=self._loading,
            working=self.status.text() if self.busy else "",
            idle=tr("{asked} · loads with the first photo"),
        )
        previous, self.state = self.state, state
        if previous != state:
            if state.placement is not None:
                self.device_chip.set_placement(state.placement, self.choice_model.choice().describe())
            else:
                self.device_chip.set_state(state.chip_kind, state.chip_text, state.chip_details)
        if previous is None or previous.banner != state.banner:
            if self._state_banner is not None:
                self._state_banner.dismiss()
                self._state_banner = None
            if state.banner is not None:
                banner = self.banners.show_message(state.banner.message, state.banner.hint, state.banner.severity)
                banner.closed.connect(lambda b=banner: self._forget_state_banner(b))
                self._state_banner = banner
        self._sync_result_to_state()

    def _forget_state_banner(self, banner: Banner) -> None:
        if self._state_banner is banner:
            self._state_banner = None

    def _current_key(self) -> tuple[DeviceChoice, str]:
        return (self.choice_model.choice(), self.model_name)

    def _on_choice_changed(self, *_: object) -> None:
        self.refresh_state()

    def _sync_result_to_state(self) -> None:
        """A result belongs to the choice and model it ran with: a failure from another choice goes; a
        success from another choice stays, labelled as such."""
        if self._run_key is None or self.busy:
            return
        if self._run_key == self._current_key():
            if self._stale_note:
                self._stale_note = False
                self.hint.hide()
            return
        shown = self.results.results[0] if self._total == 1 and self.results.results else None
        if self._total == 1 and (shown is None or shown.error):
            self._reset_result()
            return
        choice, _ = self._run_key
        self._stale_note = True
        self.hint.setText(
            tr("Classified with {asked}; classify again to see the current choice.").format(asked=choice.describe())
        )
        self.hint.show()

    def _reset_result(self) -> None:
        self._run_key = None
        self._stale_note = False
        self.result_card.reset()
        self.drop_zone.show_placeholder()
        self.drop_zone.caption.setText(
            tr("Drop photos or a folder here, open them (Ctrl+O) or paste an image (Ctrl+V).")
        )
