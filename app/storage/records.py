"""What a stored conversation and message are, and how a database row becomes one.

A database is a file the user (or another tool) can edit, so every value read is brought to the type
the app uses (see `message_from_row`); text written is made storable (see `clean_text`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engines import JsonFileError, parse_json

log = logging.getLogger(__name__)

ROLES = ("system", "user", "assistant")
MAX_TITLE_CHARS = 200
DEFAULT_TITLE = "New chat"


@dataclass(frozen=True)
class StoredConversation:
    """A conversation as stored (its row); the live one that generates is engines.chat's Conversation."""

    id: int
    title: str
    created: float
    updated: float
    model: str
    system_prompt: str
    message_count: int


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    role: str  # "system"|"user"|"assistant"
    text: str
    created: float
    model: str = ""  # identity of what produced an assistant answer
    device: str = ""
    ep: str = ""
    stop_reason: str = ""  # eos|length|cancelled|context|error
    stats: dict[str, object] = field(default_factory=dict)  # GenerationStats.as_dict()


def clean_text(text: str) -> str:
    """SQLite stores UTF-8; a lone surrogate (which no valid decoder produces) becomes '?' instead of failing."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def clean_title(title: str) -> str:
    title = " ".join(clean_text(title).split())
    return title[:MAX_TITLE_CHARS] or DEFAULT_TITLE


def json_safe(value: object) -> object:
    """Non-finite floats become None so the stored and exported JSON is strict."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def stats_to_json(stats: Mapping[str, object] | None) -> str:
    return json.dumps(json_safe(dict(stats or {})), ensure_ascii=False, allow_nan=False, default=str)


def stats_from_json(text: str) -> dict[str, object]:
    try:
        value = parse_json(text)
    except JsonFileError:
        return {}
    return value if isinstance(value, dict) else {}


CONVERSATION_COLUMNS = (
    "c.id, c.title, c.created, c.updated, c.model, c.system_prompt, "
    "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id)"
)
MESSAGE_COLUMNS = "id, conversation_id, role, text, created, model, device, ep, stop_reason, stats"


# A database is a file the user (or another tool) can edit: SQLite keeps whatever type a value was
# written with, so 'tomorrow' can sit in a REAL column. Every value read is brought to the type the
# app uses; a value that cannot be is replaced by a neutral one, and that is logged once per process.
_damage_logged = False


def _damaged(column: str, value: object) -> None:
    global _damage_logged
    if not _damage_logged:
        _damage_logged = True
        log.warning("conversations database: %s holds %r, not a valid value; it is shown as a default", column, value)


def _as_time(value: object, column: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value < 1e11:
        return float(value)
    _damaged(column, value)
    return 0.0


def _as_int(value: object, column: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    _damaged(column, value)
    return 0


def _as_text(value: object, column: str) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    _damaged(column, value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def conversation_from_row(row: tuple[Any, ...]) -> StoredConversation:
    cid, title, created, updated, model, system_prompt, count = row
    return StoredConversation(
        _as_int(cid, "conversations.id"),
        _as_text(title, "conversations.title"),
        _as_time(created, "conversations.created"),
        _as_time(updated, "conversations.updated"),
        _as_text(model, "conversations.model"),
        _as_text(system_prompt, "conversations.system_prompt"),
        _as_int(count, "the message count"),
    )


def message_from_row(row: tuple[Any, ...]) -> Message:
    mid, conversation_id, role, text, created, model, device, ep, stop_reason, stats = row
    role_text = _as_text(role, "messages.role")
    if role_text not in ROLES:
        _damaged("messages.role", role)
        role_text = "assistant"
    return Message(
        _as_int(mid, "messages.id"),
        _as_int(conversation_id, "messages.conversation_id"),
        role_text,
        _as_text(text, "messages.text"),
        _as_time(created, "messages.created"),
        _as_text(model, "messages.model"),
        _as_text(device, "messages.device"),
        _as_text(ep, "messages.ep"),
        _as_text(stop_reason, "messages.stop_reason"),
        stats_from_json(stats if isinstance(stats, str) else ""),
    )
