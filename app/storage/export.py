"""A stored conversation exported: JSON with a stable, versioned layout (every text exactly as stored), or
readable Markdown.

In Markdown the headings (`## User`, `## Assistant`, ...) and the stats lines are NPU Studio's; every body
(the system prompt, each message) is a fenced code block whose fence is one backtick longer than the
longest run of backticks inside it (at least three), so nothing a message says (a `## User` line, a
closing fence, HTML, a link) can end the block, forge a turn or become markup: each body reads exactly as
it was written. One-line values (the title, model and device names) are escaped instead.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence

from app.storage.records import Message, StoredConversation, json_safe

EXPORT_SCHEMA = 1
EXPORT_KIND = "npu-studio.conversation"

# The stats keys an answer may carry (GenerationStats.as_dict() and older spellings kept in old databases).
_TOKENS_PER_SECOND_KEYS = ("tokens_per_second", "tokens_per_s", "decode_tokens_per_second", "decode_tokens_per_s")
_TTFT_MS_KEYS = ("time_to_first_token_ms", "ttft_ms", "first_token_ms")
_TTFT_S_KEYS = ("time_to_first_token_s", "ttft_s")
_TOKEN_COUNT_KEYS = ("generated_tokens", "new_tokens", "output_tokens", "tokens")


def conversation_json(conversation: StoredConversation, messages: Sequence[Message]) -> str:
    """The full conversation as JSON (``schema`` says which layout)."""
    document = {
        "schema": EXPORT_SCHEMA,
        "kind": EXPORT_KIND,
        "exported": time.time(),
        "conversation": {
            "id": conversation.id,
            "title": conversation.title,
            "created": conversation.created,
            "updated": conversation.updated,
            "model": conversation.model,
            "system_prompt": conversation.system_prompt,
            "message_count": conversation.message_count,
        },
        "messages": [
            {
                "id": m.id,
                "role": m.role,
                "text": m.text,
                "created": m.created,
                "model": m.model,
                "device": m.device,
                "ep": m.ep,
                "stop_reason": m.stop_reason,
                "stats": json_safe(m.stats),
            }
            for m in messages
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"


def conversation_markdown(conversation: StoredConversation, messages: Sequence[Message]) -> str:
    """Title, each turn under a role heading, and a stats line under each answer."""
    lines = [f"# {_md_inline(conversation.title)}", ""]
    meta = [f"Created {_local_time(conversation.created)}"]
    if conversation.model:
        meta.append(f"model {_md_inline(conversation.model)}")
    meta.append(f"{len(messages)} messages, exported from NPU Studio")
    lines += ["*" + " · ".join(meta) + "*", ""]
    if conversation.system_prompt:
        lines += ["## System prompt", "", fenced(conversation.system_prompt), ""]
    for m in messages:
        heading = {"user": "User", "assistant": "Assistant", "system": "System"}.get(m.role, _md_inline(m.role))
        if m.role == "assistant" and m.stop_reason == "cancelled":
            heading += " (stopped)"
        elif m.role == "assistant" and m.stop_reason == "error":
            heading += " (failed)"
        lines += [f"## {heading}", "", fenced(m.text) if m.text.strip() else "*(empty)*", ""]
        if m.role == "assistant":
            stats_line = _stats_line(m)
            if stats_line:
                lines += [stats_line, ""]
    return "\n".join(lines).rstrip() + "\n"


_BACKTICKS = re.compile(r"`+")


def fenced(text: str) -> str:
    """`text` as a fenced code block that no line of it can close: the fence is longer than any run of
    backticks in it (a closing fence must be at least as long as the opening one)."""
    body = text.rstrip("\r\n")
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


def _local_time(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _md_inline(text: str) -> str:
    """Escape the characters that would turn a one-line value into Markdown formatting."""
    out = " ".join(text.split())
    for ch in "\\`*_[]<>#|":
        out = out.replace(ch, "\\" + ch)
    return out


def _number(stats: Mapping[str, object], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = stats.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _stats_line(m: Message) -> str:
    parts = [_md_inline(p) for p in (m.model, m.device, m.ep) if p]
    tps = _number(m.stats, _TOKENS_PER_SECOND_KEYS)
    if tps is not None:
        parts.append(f"{tps:.1f} tokens/s")
    ttft_ms = _number(m.stats, _TTFT_MS_KEYS)
    if ttft_ms is None:
        ttft_s = _number(m.stats, _TTFT_S_KEYS)
        ttft_ms = ttft_s * 1000 if ttft_s is not None else None
    if ttft_ms is not None:
        parts.append(f"first token {ttft_ms:.0f} ms")
    count = _number(m.stats, _TOKEN_COUNT_KEYS)
    if count is not None:
        parts.append(f"{count:.0f} tokens")
    if m.stop_reason:
        parts.append("stopped by the user" if m.stop_reason == "cancelled" else f"stop: {_md_inline(m.stop_reason)}")
    return "*" + " · ".join(parts) + "*" if parts else ""
