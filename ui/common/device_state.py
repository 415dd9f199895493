"""One device state per view, derived from (current choice, last real placement, last error).

A view never edits its device chip, its device banner or its status text one by one: it records
what happened (a load finished with a placement, a load failed, loading started) together with the
choice and model it happened for, and asks `derive()` for the whole picture. What happened for
another choice or model no longer counts, so a banner raised by a strict failure goes as soon as
Strict is off, and a fallback chip goes when the user picks another device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication

from engines import Device, DeviceChoice, DeviceType, Placement, predict_device
from ui.common.placement_chip import describe_placement
from ui.common.widgets import error_text


def tr(text: str) -> str:
    return QCoreApplication.translate("DeviceState", text)


@dataclass(frozen=True)
class StateBanner:
    message: str
    hint: str
    severity: str  # error | warning | info


@dataclass(frozen=True)
class DeviceState:
    chip_kind: str  # ok | warn | info | error | neutral
    chip_text: str
    chip_details: str
    banner: StateBanner | None
    status: str  # what runs now ("" when nothing does)
    placement: Placement | None = None  # the real placement the chip shows, if any


@dataclass(frozen=True)
class Outcome:
    """Something that happened for one (choice, model): a placement or an error."""

    choice: DeviceChoice
    model: str
    placement: Placement | None = None
    error: object | None = None


def derive(
    choice: DeviceChoice,
    model: str,
    *,
    devices: Sequence[Device] = (),
    outcome: Outcome | None = None,
    loading: str = "",
    working: str = "",
    idle: str = "",
) -> DeviceState:
    """The whole device picture for `choice` and `model`. `outcome` counts only if it happened for the
    same choice and model; `loading` is the model load in progress, `working` the job in progress."""
    asked = choice.describe()
    current = outcome if outcome is not None and outcome.choice == choice and outcome.model == model else None
    status = working or loading
    if loading and current is None:
        return DeviceState("neutral", tr("Loading for {asked}…").format(asked=asked), loading, None, status)
    if current is not None and current.error is not None:
        message, hint = error_text(current.error)
        text = tr("Asked {asked} → could not run").format(asked=asked.replace(" (strict)", ""))
        if choice.strict:
            text = tr("Strict {asked}: could not run").format(asked=asked.replace(" (strict)", ""))
        details = message + (f"\n{hint}" if hint else "")
        return DeviceState("error", text, details, StateBanner(message, hint, "error"), status)
    if current is not None and current.placement is not None:
        chip = describe_placement(current.placement, asked)
        return DeviceState(chip.kind, chip.text, chip.details, None, status, current.placement)
    # Nothing real yet for this choice: say what will happen, as the planner predicts it from discovery.
    forecast = predict_device(choice, devices)
    wanted = forecast.asked if forecast is not None else None
    if forecast is not None and forecast.falls_back and wanted is not None and wanted != DeviceType.CPU:
        reason = forecast.missing or tr("ONNX Runtime reports no {kind} on this machine.").format(kind=wanted.value)
        if forecast.refused:
            banner = StateBanner(
                tr("Strict mode needs the {kind}, and this machine has none.").format(kind=wanted.value),
                tr("Turn Strict off to run on the CPU instead, or pick another device. {reason}").format(reason=reason),
                "error",
            )
            text = tr("Strict {kind}: no {kind} on this machine").format(kind=wanted.value)
            return DeviceState("error", text, reason, banner, status)
        text = tr("Asked {kind} → will run on CPU").format(kind=wanted.value)
        return DeviceState("warn", text, reason, None, status)
    text = idle.format(asked=asked) if idle else tr("{asked} · not loaded yet").format(asked=asked)
    return DeviceState("neutral", text, "", None, status)
