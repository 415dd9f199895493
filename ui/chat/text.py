"""Words the chat shows about an answer: the stats line, where it ran, the conversation title and the
starter prompts. Pure functions of plain data (the stored stats), so the transcript and the tests read
the same words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import QCoreApplication

from engines import Placement, short_ep_name
from ui.chat.records import MessageRecord
from ui.chat.transcript_render import Entry
from ui.common.placement_chip import describe_placement

# A prefill of fewer tokens than this (a Regenerate reuses the cached conversation and prefills a token or
# two) says nothing about speed: its "rate" is one step's latency ("prefill 6 tok/s"), which reads as alarming.
MEANINGFUL_PREFILL = 4


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatView", text)


def starter_prompts() -> list[str]:
    """Offered in an empty chat (one click sends): short, and within a small model's reach."""
    return [
        tr("Explain what an NPU is in two sentences."),
        tr("Write a Python function that reverses a string."),
        tr("Give me three ideas for a rainy Sunday."),
        tr("Summarise the water cycle for a ten-year-old."),
    ]


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 0.1 else f"{value:.1f} s"


def stats_line(stats: Mapping[str, object]) -> str:
    """ "decode 95 tok/s · prefill 800 tok/s · TTFT 0.2 s · 64 tokens" (+ why it stopped, when that matters).
    A prefill of a few tokens (the rest of the conversation was cached) is said as such, not as a rate."""
    parts: list[str] = []
    rate = stats.get("decode_tokens_per_s")
    if isinstance(rate, int | float) and rate > 0:
        parts.append(tr("decode {rate} tok/s").format(rate=f"{rate:.0f}"))
    prefill = stats.get("prefill_tokens_per_s")
    prefilled = stats.get("prefill_tokens")
    if isinstance(prefilled, int) and 0 < prefilled < MEANINGFUL_PREFILL:
        parts.append(tr("prefill 1 new token") if prefilled == 1 else
                     tr("prefill {count} new tokens").format(count=prefilled))  # fmt: skip
    elif isinstance(prefill, int | float) and prefill > 0:
        parts.append(tr("prefill {rate} tok/s").format(rate=f"{prefill:.0f}"))
    ttft = stats.get("time_to_first_token_s")
    if isinstance(ttft, int | float) and ttft > 0:
        parts.append(tr("TTFT {seconds}").format(seconds=_seconds(ttft)))
    generated = stats.get("generated_tokens")
    if isinstance(generated, int):
        parts.append(tr("{count} tokens").format(count=generated) if generated != 1 else tr("1 token"))
    reason = stats.get("stop_reason")
    if reason == "length":
        parts.append(tr("stopped at the answer length limit"))
    elif reason == "context":
        parts.append(tr("context window full"))
    dropped = stats.get("dropped_turns")
    if isinstance(dropped, int) and dropped:
        parts.append(
            tr("the oldest message left the context")
            if dropped == 1
            else tr("the {count} oldest messages left the context").format(count=dropped)
        )
    return " · ".join(parts)


def answer_chip(ep: str, device: str, stats: Mapping[str, object] | None) -> tuple[str, str, str]:
    """(kind, line, details) of where an answer ran, in the placement chip's words ("CPU", or "Asked NPU →
    Ran on CPU" after a fallback), from what was stored with the answer."""
    if not ep:
        return ("", "", "")
    stats = stats or {}
    asked = str(stats.get("asked") or "Automatic")
    placement = Placement(
        asked,
        (ep,),
        (ep,),
        fell_back=bool(stats.get("fell_back")),
        reason=str(stats.get("fallback_reason") or ""),
    )
    chip = describe_placement(placement, asked)
    if placement.fell_back and asked == "Automatic":  # an older answer: what was asked is not known
        return ("warn", tr("Fell back to {ran}").format(ran=short_ep_name(ep)), chip.details)
    return (chip.kind, chip.text, chip.details)


def message_entries(messages: Sequence[MessageRecord], generating: bool) -> list[Entry]:
    """The stored messages as shown: the last question can be edited (and answered again when a failure
    left it without an answer), the last answer regenerated, or continued when it was cut short."""
    shown = [m for m in messages if m.role in ("user", "assistant")]
    last_user = next((m.id for m in reversed(shown) if m.role == "user"), None)
    entries: list[Entry] = []
    for index, message in enumerate(shown):
        is_last = index == len(shown) - 1
        if message.role == "user":
            actions: tuple[str, ...] = ("copy",)
            if message.id == last_user:
                answerable = is_last and not generating
                actions = ("copy", "edit", "regenerate") if answerable else ("copy", "edit")
            entries.append(Entry(message.id, "user", message.text, actions=actions))
            continue
        actions = ("copy",)
        if is_last:
            can_continue = message.stop_reason in ("length", "cancelled") and message.id >= 0
            actions = ("copy", "continue", "regenerate") if can_continue else ("copy", "regenerate")
        entries.append(
            Entry(
                message.id,
                "assistant",
                message.text,
                meta=message.model,
                footer=stats_line(message.stats) if message.stats else "",
                state={"cancelled": "stopped", "error": "error"}.get(message.stop_reason, ""),
                actions=actions,
                chip=answer_chip(message.ep, message.device, message.stats),
            )
        )
    return entries


def waiting_words(ahead: int) -> str:
    """Under an answer that waits for other requests on the same model to be answered first."""
    if ahead == 1:
        return tr("Waiting for another request to finish…")
    return tr("Waiting for {count} other requests to finish…").format(count=ahead)


def answer_entry(key: int, text: str, info: Mapping[str, object], state: str, footer: str = "") -> Entry:
    """The answer being written, on the loaded model."""
    ep = str(info.get("ep", ""))
    chip = ("neutral", short_ep_name(ep), "") if ep else ("", "", "")
    return Entry(key, "assistant", text, meta=str(info.get("name", "")), footer=footer, state=state, chip=chip)
