"""The chat's one device state: what the header chip says, which banners stand (one per cause) and whether
a message can be sent, derived from (the device choice, the loaded model and its real placement, the last
errors, a question left without an answer). The status bar's words for a load and an answer come from
the chat host (app.window.links.wire_status).

The view keeps those inputs and calls `derive` after every change; it never edits a banner or the chip
by hand. A banner belongs to the input that raised it, so it goes when that input goes: a strict "no NPU"
error when the choice changes (a new load starts), a failed answer's error when the next answer succeeds.
An expected fallback (asked for the NPU, ran on the CPU) is the chip's to say, not a banner's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QCoreApplication

from engines import CancelledError, DeviceChoice, Placement, short_ep_name
from ui.common.widgets import error_text

WAITING_CHARS = 60  # a question quoted in the "no answer yet" banner is cut here


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


@dataclass
class ChatInputs:
    """What the device state is derived from (the view owns one and changes it)."""

    choice: DeviceChoice = field(default_factory=DeviceChoice)
    loading: str = ""  # non-empty while a model loads: what is loading
    info: dict[str, object] = field(default_factory=dict)  # the loaded model (empty: none)
    model_error: object | None = None  # the last load failed
    answer_error: object | None = None  # the last answer failed
    unanswered: str = ""  # the conversation's last question has no answer (and none is being written)


@dataclass(frozen=True)
class ChatBanner:
    """A state banner: its cause (one banner per cause), its words, and an action when one click helps."""

    cause: str  # model | memory | answer | waiting
    message: str
    hint: str
    severity: str  # error | warning | info
    action: str = ""


@dataclass(frozen=True)
class ChatState:
    chip_kind: str  # ok | warn | info | error | neutral (when there is no placement to show)
    chip_text: str
    chip_details: str
    banners: tuple[ChatBanner, ...]
    placement: Placement | None = None  # the loaded model's real placement: the chip shows it
    send_reason: str = ""  # why nothing can be sent now ("": a message can be sent)


def derive(inputs: ChatInputs) -> ChatState:
    banners: list[ChatBanner] = []
    choice = inputs.choice
    shown: Placement | None = None
    send_reason = ""
    if inputs.loading:  # a message sent now waits for the load, then is answered
        kind, text, details = "neutral", tr("Loading on {device}…").format(device=choice.describe()), inputs.loading
    elif inputs.model_error is not None:
        message, hint = error_text(inputs.model_error)
        kind, text, details = "error", tr("Chat model not loaded"), message
        banners.append(ChatBanner("model", message, hint, "error"))
        send_reason = tr("No model can answer: {why}").format(why=f"{message} {hint}".strip())
    elif inputs.info:
        kind, text, details = _placement_chip(inputs.info, choice)
        placement = inputs.info.get("placement")
        shown = placement if isinstance(placement, Placement) else None
        notice = str(inputs.info.get("memory_notice") or "")
        if notice:
            banners.append(
                ChatBanner(
                    "memory",
                    tr("Memory: {notice}").format(notice=notice),
                    tr("Close other apps, or use a shorter context."),
                    "warning",
                )
            )
        if inputs.unanswered:
            quoted = " ".join(inputs.unanswered.split())
            if len(quoted) > WAITING_CHARS:
                quoted = quoted[: WAITING_CHARS - 1].rstrip() + "…"
            banners.append(
                ChatBanner(
                    "waiting",
                    tr("“{question}” has no answer yet.").format(question=quoted),
                    tr("The model is ready now."),
                    "info",
                    tr("Answer it"),
                )
            )
    else:
        kind, text, details = "neutral", tr("Chat model not loaded"), ""
        send_reason = tr("No chat model is loaded. Pick a chat model or a device above.")
    if inputs.answer_error is not None:
        message, hint = error_text(inputs.answer_error)
        stopped = isinstance(inputs.answer_error, CancelledError)  # the user's own Stop: news, not a failure
        banners.append(ChatBanner("answer", message, hint, "info" if stopped else "error"))
    return ChatState(kind, text, details, tuple(banners), shown, send_reason)


def _placement_chip(info: dict[str, object], choice: DeviceChoice) -> tuple[str, str, str]:
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
