"""What a status line says while a model loads (no runtime here until a device question is asked)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engines.runtime.planning import predict_device
from engines.types import Device, DeviceChoice, DeviceType

__all__ = ["discovered", "loading_text"]


def discovered() -> Sequence[Device]:
    """This machine's devices (none when discovery itself failed: then nothing is predicted)."""
    try:
        from engines.runtime.devices import discover

        return discover().devices
    except Exception:
        return ()


def loading_text(what: str, choice: DeviceChoice, devices: Callable[[], Sequence[Device]] = discovered) -> str:
    """The status while a model loads, as the planner forecasts it for a choice that names an NPU or a GPU
    (other choices ask discovery nothing here). The first-run compile is promised only where the NPU runs it."""
    plain = f"Loading {what} ({choice.describe()})…"
    wanted = choice.wanted_type
    if wanted is None or wanted == DeviceType.CPU:
        return plain
    forecast = predict_device(choice, devices())
    if forecast is None:
        return plain
    kind = wanted.value
    if forecast.refused:
        return f"Checking {what} against the {kind} (strict: there is no {kind} on this machine)…"
    if forecast.falls_back:
        return f"Loading {what} on the CPU (there is no {kind} on this machine)…"
    if forecast.plan is not None and forecast.plan.device_type == DeviceType.NPU:
        return f"Preparing {what} for the NPU (the first run compiles it; this can take a while)…"
    return plain
