"""Where work goes when a device fails mid-run, in the app: the Classify and Chat views show the error
with an offer ("Retry on the CPU"), and accepting it moves the shared device choice and runs the work
again. The failure itself was classified once, by the engines' fallback path (engines/runtime/fallback.py);
this decides on the error's fields, never on its words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engines import DeviceChoice, DeviceUnavailableError


def device_failed(error: object) -> bool:
    """Whether a failure came from the device (lost, out of memory, driver), not the input or model:
    the error's own fields say so (they cross the chat process pipe intact)."""
    return bool(getattr(error, "device_failure", False)) or isinstance(error, DeviceUnavailableError)


class DeviceOffers:
    """The retry offers of the Classify and Chat views (the controller the composition root wires)."""

    def __init__(self, classify_view: Any, chat_view: Any, choice_model: Any) -> None:
        self.classify_view = classify_view
        self.chat_view = chat_view
        self.choice_model = choice_model
        self._last: tuple[str, Any, Path, DeviceChoice] | None = None

    def remember_classify(self, kind: str, what: Any, folder: Path, choice: DeviceChoice) -> None:
        """The last classify request (kind "paths" or "bytes"), for a retry on another device."""
        self._last = (kind, what, folder, choice)

    def on_vision_failed(self, error: object) -> None:
        banner = self.classify_view.show_error(error)
        offer = getattr(error, "offer", None)  # a device failed mid-run: offer the next usable device
        if banner is None or offer is None or not offer.alternatives or self._last is None:
            return
        from engines import device_label

        target = offer.alternatives[0]
        banner.add_action(f"Retry on {device_label(target)}", lambda: self.retry_classify(target))

    def on_chat_failed(self, error: object) -> None:
        """An answer failed because its device did (the chat's turns show the failure first): offer the CPU."""
        view = self.chat_view
        banner = view.banners.banner("answer")
        answers = view.status.inputs.answer_error is error  # the answer's failure, not a load's
        on_cpu = self.choice_model.choice().policy.value == "cpu"
        if answers and banner is not None and device_failed(error) and not on_cpu:
            banner.add_action("Retry on the CPU", self.retry_chat_on_cpu)

    def retry_chat_on_cpu(self) -> None:
        """The device failed mid-answer: the chat moves to the CPU and the answer is written again."""
        self.choice_model.set_text("cpu")  # reloads the chat model on the CPU (queued before the answer)
        self.chat_view.session.regenerate()

    def retry_classify(self, choice: DeviceChoice) -> None:
        if self._last is None:
            return
        kind, what, folder, _failed = self._last
        self._last = (kind, what, folder, choice)
        # The retry moves the shared choice too, so that every view says where work runs now; the view then
        # classifies what it was asked once more, with that choice.
        self.choice_model.set_text(choice.ep or choice.policy.value)
        self.classify_view.classify_again()
