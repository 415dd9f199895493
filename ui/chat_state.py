"""The chat's one device state: what the header chip and the state banners say, derived from (the
current device choice, the loaded model and its real placement, the last errors). The status bar's
words for a load and an answer come from the chat host (app.view_links.wire_status).

The view keeps those inputs and calls `derive` after every change; it never edits a banner or the
chip by hand. A banner belongs to the input that raised it, so it goes when that input goes: a strict
"no NPU" error when the choice changes (a new load starts), a fallback warning when a model loads
where it was asked to, a failed answer's error when the next answer succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QCoreApplication

from engines.errors import CancelledError
from engines.types import DeviceChoice, Placement, short_ep_name
from ui.device_state import StateBanner
from ui.widgets import error_text


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)




@dataclass
class ChatInputs:
    """What the device state is derived from (the view owns one and changes it)."""

    choice: DeviceChoice = field(default_factory=DeviceChoice)
    loading: str = ""  # non-empty while a model loads: what is loading
    info: dict[str, Any] = field(default_factory=dict)  # the loaded model (empty: none)
    model_error: object | None = None  # the last load failed
    answer_error: object | None = None  # the last answer failed


@dataclass(frozen=True)
class ChatState:
    chip_kind: str  # ok | warn | info | error | neutral (when there is no placement to show)
    chip_text: str
    chip_details: str
    banners: tuple[StateBanner, ...]
    placement: Placement | None = None  # the loaded model's real placement: the chip shows it


def derive(inputs: ChatInputs) -> ChatState:
    banners: list[StateBanner] = []
    choice = inputs.choice
    shown: Placement | None = None
    if inputs.loading:
        kind, text, details = "neutral", tr("Loading on {device}…").format(device=choice.describe()), inputs.loading
    elif inputs.model_error is not None:
        message, hint = error_text(inputs.model_error)
        kind, text, details = "error", tr("Chat model not loaded"), message
        banners.append(StateBanner(message, hint, "error"))
    elif inputs.info:
        kind, text, details = _placement_chip(inputs.info, choice)
        placement = inputs.info.get("placement")
        shown = placement if isinstance(placement, Placement) else None
        if isinstance(placement, Placement) and placement.fell_back:
            where = short_ep_name(str(inputs.info.get("ep", ""))) or tr("another device")
            banners.append(
                StateBanner(
                    tr("The chat model runs on {where}: {reason}").format(where=where, reason=placement.reason),
                    tr("Pick another device to try again."),
                    "warning",
                )
            )
        notice = str(inputs.info.get("memory_notice") or "")
        if notice:
            banners.append(
                StateBanner(
                    tr("Memory: {notice}").format(notice=notice),
                    tr("Close other apps, or use a shorter context."),
                    "warning",
                )
            )
    else:
        kind, text, details = "neutral", tr("Chat model not loaded"), ""
    if inputs.answer_error is not None:
        message, hint = error_text(inputs.answer_error)
        stopped = isinstance(inputs.answer_error, CancelledError)  # the user's own Stop: news, not a failure
        banners.append(StateBanner(message, hint, "info" if stopped else "error"))
    return ChatState(kind, text, details, tuple(banners), shown)


def _placement_chip(info: dict[str, Any], choice: DeviceChoice) -> tuple[str, str, str]:
    name = str(info.get("name", "")) or tr("model")
    placement = info.get("placement")
    where = short_ep_name(str(info.get("ep", ""))) or "?"
    if isinstance(placement, Placement) and placement.fell_back:
        asked = choice.describe().replace(" (strict)", "")
        line = (
            tr("{name} · Asked {asked} → Ran on {ran}").format(name=name, asked=asked, ran=where)
            if asked.lower() != "automatic"
            else tr("{name} · Fell back to {ran}").format(name=name, ran=where)
        )
        return "warn", line, placement.reason or str(info.get("description", ""))
    return "ok", f"{name} · {where}", str(info.get("description", ""))
