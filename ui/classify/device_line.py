"""The device line: "Next run:" and the chip of where the next photo will run, derived by
ui.common.device_state.derive from (choice, model, the last outcome for them, loading, work) and
re-derived on every change, so it can never disagree with the picker. It speaks of the next run only
(a prediction, or a loaded model's real placement: "will run on"); the result panel's chip says
where a photo did run."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Signal
from PySide6.QtWidgets import QHBoxLayout, QWidget

from engines import DeviceChoice, Placement
from ui.common.device_picker import DeviceChoiceModel
from ui.common.device_state import DeviceState, Outcome, derive
from ui.common.placement_chip import PlacementChip
from ui.common.widgets import muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


class DeviceLine(QWidget):
    """Emits `changed(DeviceState)` whenever the derived state changes (the view shows its banner)."""

    changed = Signal(object)  # DeviceState

    def __init__(self, choice_model: DeviceChoiceModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.choice_model = choice_model
        self.model_name = ""
        self.outcome: Outcome | None = None
        self.loading = ""
        self.working = ""
        self.state: DeviceState | None = None
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.caption = muted_label(tr("Next run:"), word_wrap=False)
        row.addWidget(self.caption)
        self.chip = PlacementChip()
        self.chip.setAccessibleName(tr("Where the next photo will run"))
        row.addWidget(self.chip)
        row.addStretch(1)
        choice_model.changed.connect(self.refresh)
        choice_model.devices_changed.connect(self.refresh)

    def key(self) -> tuple[DeviceChoice, str]:
        """The choice and model the next run uses."""
        return (self.choice_model.choice(), self.model_name)

    # --- what happened ------------------------------------------------------------------------------
    def set_model(self, name: str) -> None:
        self.model_name = name
        self.refresh()

    def set_loading(self, text: str) -> None:
        self.loading = text
        self.refresh()

    def set_working(self, text: str) -> None:
        self.working = text
        self.refresh()

    def ran(self, placement: Placement) -> None:
        """The model loaded (or a photo ran) with the current choice, where `placement` says."""
        self.outcome = Outcome(self.choice_model.choice(), self.model_name, placement=placement)
        self.loading = ""
        self.refresh()

    def failed(self, error: object) -> None:
        """The model or the run failed with the current choice (its banner shows until the choice changes)."""
        self.outcome = Outcome(self.choice_model.choice(), self.model_name, error=error)
        self.loading = ""
        self.state = None  # the same failure again is shown again
        self.refresh()

    def forget_failure(self) -> None:
        """Trying again: the old failure no longer stands."""
        if self.outcome is not None and self.outcome.error is not None:
            self.outcome = None

    # --- the picture --------------------------------------------------------------------------------
    def refresh(self, *_: object) -> None:
        choice = self.choice_model.choice()
        state = derive(
            choice,
            self.model_name,
            devices=self.choice_model.devices,
            outcome=self.outcome,
            loading=self.loading,
            working=self.working,
            idle=tr("{asked} · loads with the first photo"),
        )
        previous, self.state = self.state, state
        if previous == state:
            return
        if state.placement is not None:
            self.chip.set_placement(state.placement, choice.describe(), ahead=True)
        else:
            self.chip.set_state(state.chip_kind, state.chip_text, state.chip_details)
        self.changed.emit(state)
