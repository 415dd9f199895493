"""Conversations in SQLite: crash-safe (WAL, one transaction per write), thread-safe, searchable, exportable.

One connection is shared by every thread behind a lock: the chat worker writes answers while the UI
thread lists and reads, and statements never interleave. Every write is a single ``BEGIN IMMEDIATE`` ...
``COMMIT``; a failure rolls back and raises :class:`StorageError`, so the caller still holds its data and
can retry. A damaged database file is set aside as ``<name>.corrupt-<timestamp>`` and a fresh one is
started, with a readable ``notice`` for the user.

The schema is versioned with ``PRAGMA user_version``; ``MIGRATIONS[n]`` upgrades version ``n`` to ``n + 1``.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app import paths
from engines import jsonfile
from engines.errors import StorageError

log = logging.getLogger(__name__)

DB_FILE_NAME = "conversations.db"
EXPORT_SCHEMA = 1
EXPORT_KIND = "npu-studio.conversation"
ROLES = ("system", "user", "assistant")
MAX_TITLE_CHARS = 200
DEFAULT_TITLE = "New chat"

# SQLite primary result codes (extended codes keep these in the low byte).
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR = 5, 6, 8, 10
_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 11, 13, 14, 26
_SQLITE_MAGIC = b"SQLite format 3\x00"


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


# --- schema and migrations -------------------------------------------------------------------------


def _create_v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        """CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            title TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            system_prompt TEXT NOT NULL DEFAULT ''
        )"""
    )
    conn.execute(
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
            text TEXT NOT NULL,
            created REAL NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            device TEXT NOT NULL DEFAULT '',
            ep TEXT NOT NULL DEFAULT '',
            stop_reason TEXT NOT NULL DEFAULT '',
            stats TEXT NOT NULL DEFAULT '{}'
        )"""
    )
    conn.execute("CREATE INDEX messages_by_conversation ON messages (conversation_id, id)")
    conn.execute("CREATE INDEX conversations_by_updated ON conversations (updated DESC, id DESC)")


# MIGRATIONS[n] takes a database at user_version n to n + 1, inside one transaction. Append, never edit.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_create_v1]


def schema_version() -> int:
    return len(MIGRATIONS)


# --- helpers ------------------------------------------------------------------------------------------


class _CorruptDatabase(Exception):
    """The file is not a usable SQLite database (detected on open)."""


class _Database:
    """The one seam every statement goes through (fault injection in tests wraps ``execute``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple[Any, ...] | Mapping[str, Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)


def _error_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _is_corruption(exc: sqlite3.Error) -> bool:
    if _error_code(exc) in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return True
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "encrypted" in text


def _fold(value: object) -> str:
    return value.casefold() if isinstance(value, str) else ""


def _clean_text(text: str) -> str:
    """SQLite stores UTF-8; a lone surrogate (which no valid decoder produces) becomes '?' instead of failing."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _clean_title(title: str) -> str:
    title = " ".join(_clean_text(title).split())
    return title[:MAX_TITLE_CHARS] or DEFAULT_TITLE


def _json_safe(value: object) -> object:
    """Non-finite floats become None so the stored and exported JSON is strict."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _stats_to_json(stats: Mapping[str, object] | None) -> str:
    return json.dumps(_json_safe(dict(stats or {})), ensure_ascii=False, allow_nan=False, default=str)


def _stats_from_json(text: str) -> dict[str, object]:
    try:
        value = jsonfile.loads(text)
    except jsonfile.JsonFileError:
        return {}
    return value if isinstance(value, dict) else {}


def _local_time(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


_CONVERSATION_COLUMNS = (
    "c.id, c.title, c.created, c.updated, c.model, c.system_prompt, "
    "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id)"
)
_MESSAGE_COLUMNS = "id, conversation_id, role, text, created, model, device, ep, stop_reason, stats"


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


def _conversation(row: tuple[Any, ...]) -> StoredConversation:
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


def _message(row: tuple[Any, ...]) -> Message:
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
        _stats_from_json(stats if isinstance(stats, str) else ""),
    )


# --- the store ----------------------------------------------------------------------------------------


class ConversationStore:
    """Conversations and their messages. Safe to share between threads; every method may raise StorageError."""

    def __init__(self, path: Path | None = None, *, timeout: float = 2.0) -> None:
        self.path = Path(path) if path is not None else paths.data_dir() / DB_FILE_NAME
        self.notice: str | None = None
        self._timeout = timeout
        self._lock = threading.RLock()
        self._db: _Database | None = _Database(self._open())

    # opening, corruption and migrations

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        conn.create_function("studio_fold", 1, _fold, deterministic=True)
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL").fetchone()
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=FULL")  # an answer that was shown as saved survives a power cut
        check = conn.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            raise _CorruptDatabase("; ".join(str(row[0]) for row in check[:3]))
        self._migrate(conn)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        target = schema_version()
        if current > target:
            raise StorageError(
                f"The conversation database {self.path} was written by a newer NPU Studio (schema {current}, "
                f"this version reads up to {target}).",
                "Update NPU Studio, or set NPU_STUDIO_HOME to another folder to start with an empty history.",
            )
        for version in range(current, target):
            conn.execute("BEGIN IMMEDIATE")
            try:
                MIGRATIONS[version](conn)
                conn.execute(f"PRAGMA user_version = {version + 1}")
                conn.execute("COMMIT")
            except Exception as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error) and _is_corruption(exc):
                    raise
                log.exception("Migration of %s to schema %d failed", self.path, version + 1)
                raise StorageError(
                    f"Could not upgrade the conversation database {self.path} to schema {version + 1}: {exc}.",
                    "Your conversations are unchanged. Free some disk space or check the folder, then restart.",
                ) from exc
            log.info("Conversation database %s upgraded to schema %d", self.path, version + 1)

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"Could not create the folder for conversations, {self.path.parent}: {exc.strerror or exc}.",
                "Check the folder's permissions, or set NPU_STUDIO_HOME to a writable folder.",
            ) from exc
        try:
            if not self._has_sqlite_header():
                # checked before SQLite touches the file, so a WAL next to it is kept as it was
                raise _CorruptDatabase("file is not a database")
            return self._open_once()
        except _CorruptDatabase as exc:
            reason = str(exc)
        backup = self._set_aside(reason)
        conn = self._open_once(fresh=True)
        self.notice = (
            f"Your conversation history was damaged; NPU Studio started a new one and kept a copy of the old "
            f"file at {backup}."
        )
        return conn

    def _has_sqlite_header(self) -> bool:
        """False only for a non-empty file that is certainly not SQLite (missing and empty files are fine)."""
        try:
            with open(self.path, "rb") as handle:
                head = handle.read(len(_SQLITE_MAGIC))
        except FileNotFoundError:
            return True
        except OSError as exc:
            raise StorageError(
                f"Could not read the conversation database {self.path}: {exc.strerror or exc}.",
                "Check the file's permissions, or set NPU_STUDIO_HOME to another folder.",
            ) from exc
        return not head or head == _SQLITE_MAGIC

    def _open_once(self, fresh: bool = False) -> sqlite3.Connection:
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise self._error("open the conversation database", exc) from exc
        try:
            self._prepare(conn)
        except sqlite3.Error as exc:
            conn.close()
            if _is_corruption(exc) and not fresh:
                raise _CorruptDatabase(str(exc)) from exc
            raise self._error("open the conversation database", exc) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _set_aside(self, reason: str) -> Path:
        log.warning("Conversation database %s is damaged (%s); keeping a copy and starting fresh", self.path, reason)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        backup = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while backup.exists():
            backup = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
            n += 1
        try:
            os.replace(self.path, backup)
            wal = self.path.with_name(self.path.name + "-wal")
            if wal.exists():
                os.replace(wal, backup.with_name(backup.name + "-wal"))
            self.path.with_name(self.path.name + "-shm").unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(
                f"The conversation database {self.path} is damaged and could not be moved aside: "
                f"{exc.strerror or exc}.",
                "Move or delete the file by hand, then restart NPU Studio.",
            ) from exc
        return backup

    # errors, reads and transactions

    def _error(self, action: str, exc: sqlite3.Error) -> StorageError:
        code = _error_code(exc)
        text = str(exc).lower()
        if code == _SQLITE_FULL or "disk is full" in text:
            return StorageError(
                f"Could not {action}: the disk is full.",
                "Free some disk space and try again; nothing you have open was lost.",
            )
        if code == _SQLITE_READONLY or "readonly" in text or "read-only" in text:
            return StorageError(
                f"Could not {action}: the conversation database {self.path} is read-only.",
                "Check the folder's permissions (or set NPU_STUDIO_HOME to a writable folder) and try again.",
            )
        if code in (_SQLITE_BUSY, _SQLITE_LOCKED) or "locked" in text:
            return StorageError(
                f"Could not {action}: the conversation database is busy (another NPU Studio may be using it).",
                "Close other NPU Studio windows and try again.",
            )
        if _is_corruption(exc):
            return StorageError(
                f"Could not {action}: the conversation database {self.path} is damaged.",
                "Restart NPU Studio: it keeps a copy of the damaged file and starts a fresh history.",
            )
        if code in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
            return StorageError(
                f"Could not {action}: the disk reported an error ({exc}).",
                "Check the disk and the folder's permissions, then try again.",
            )
        return StorageError(f"Could not {action}: {exc}.", "Try again.")

    def _require_open(self) -> _Database:
        if self._db is None:
            raise StorageError("The conversation store is closed.", "Reopen it before reading or writing.")
        return self._db

    def _query(self, action: str, sql: str, params: tuple[Any, ...] = ()) -> builtins.list[tuple[Any, ...]]:
        with self._lock:
            db = self._require_open()
            try:
                return db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._error(action, exc) from exc

    @contextlib.contextmanager
    def _write(self, action: str) -> Iterator[_Database]:
        """One transaction; on any failure it is rolled back and sqlite errors become StorageError."""
        with self._lock:
            db = self._require_open()
            try:
                db.execute("BEGIN IMMEDIATE")
                yield db
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(db)
                raise self._error(action, exc) from exc
            except BaseException:
                self._rollback(db)
                raise

    @staticmethod
    def _rollback(db: _Database) -> None:
        # straight on the connection: a rollback must not go through a seam that may be failing
        if db.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.conn.execute("ROLLBACK")

    @staticmethod
    def _not_found(what: str, ident: int) -> StorageError:
        return StorageError(f"{what} {ident} does not exist (it may have been deleted).", "Refresh the list.")

    def _exists(self, db: _Database, conversation_id: int) -> bool:
        return db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is not None

    # conversations

    def create(self, title: str = DEFAULT_TITLE, model: str = "", system_prompt: str = "") -> StoredConversation:
        now = time.time()
        title, model, system_prompt = _clean_title(title), _clean_text(model), _clean_text(system_prompt)
        with self._write("create a conversation") as db:
            cursor = db.execute(
                "INSERT INTO conversations (title, created, updated, model, system_prompt) VALUES (?, ?, ?, ?, ?)",
                (title, now, now, model, system_prompt),
            )
            new_id = cursor.lastrowid
        assert new_id is not None
        return StoredConversation(new_id, title, now, now, model, system_prompt, 0)

    def list(self, search: str = "") -> builtins.list[StoredConversation]:
        """Newest first. ``search`` matches (case-insensitively) the title or any message's text."""
        needle = _fold(search.strip()) if isinstance(search, str) else ""
        sql = f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c"
        params: tuple[Any, ...] = ()
        if needle:
            sql += (
                " WHERE instr(studio_fold(c.title), ?1) > 0 OR EXISTS (SELECT 1 FROM messages m"
                " WHERE m.conversation_id = c.id AND instr(studio_fold(m.text), ?1) > 0)"
            )
            params = (needle,)
        sql += " ORDER BY c.updated DESC, c.id DESC"
        return [_conversation(row) for row in self._query("list conversations", sql, params)]

    def get(self, conversation_id: int) -> StoredConversation:
        rows = self._query(
            "read the conversation",
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = ?",
            (conversation_id,),
        )
        if not rows:
            raise self._not_found("Conversation", conversation_id)
        return _conversation(rows[0])

    def rename(self, conversation_id: int, title: str) -> None:
        with self._write("rename the conversation") as db:
            cursor = db.execute(
                "UPDATE conversations SET title = ? WHERE id = ?", (_clean_title(title), conversation_id)
            )
            if cursor.rowcount == 0:
                raise self._not_found("Conversation", conversation_id)

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation and its messages; deleting one that is already gone is not an error."""
        with self._write("delete the conversation") as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def set_system_prompt(self, conversation_id: int, text: str) -> None:
        with self._write("save the system prompt") as db:
            cursor = db.execute(
                "UPDATE conversations SET system_prompt = ? WHERE id = ?", (_clean_text(text), conversation_id)
            )
            if cursor.rowcount == 0:
                raise self._not_found("Conversation", conversation_id)

    # messages

    def add_message(
        self,
        conversation_id: int,
        role: str,
        text: str,
        *,
        model: str = "",
        device: str = "",
        ep: str = "",
        stop_reason: str = "",
        stats: Mapping[str, object] | None = None,
    ) -> Message:
        if role not in ROLES:
            raise StorageError(f"Cannot store a message with role '{role}'.", f"Use one of {', '.join(ROLES)}.")
        now = time.time()
        text = _clean_text(text)
        stats_json = _stats_to_json(stats)
        with self._write("save the message") as db:
            if not self._exists(db, conversation_id):
                raise self._not_found("Conversation", conversation_id)
            cursor = db.execute(
                "INSERT INTO messages (conversation_id, role, text, created, model, device, ep, stop_reason, stats)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, role, text, now, model, device, ep, stop_reason, stats_json),
            )
            db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
            new_id = cursor.lastrowid
        assert new_id is not None
        return Message(
            new_id, conversation_id, role, text, now, model, device, ep, stop_reason, _stats_from_json(stats_json)
        )

    def update_message(
        self,
        message_id: int,
        *,
        text: str | None = None,
        stop_reason: str | None = None,
        stats: Mapping[str, object] | None = None,
        device: str | None = None,
        ep: str | None = None,
    ) -> None:
        changes: dict[str, object] = {}
        if text is not None:
            changes["text"] = _clean_text(text)
        if stop_reason is not None:
            changes["stop_reason"] = stop_reason
        if stats is not None:
            changes["stats"] = _stats_to_json(stats)
        if device is not None:
            changes["device"] = device
        if ep is not None:
            changes["ep"] = ep
        with self._write("update the message") as db:
            row = db.execute("SELECT conversation_id FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise self._not_found("Message", message_id)
            if changes:
                assignments = ", ".join(f"{column} = ?" for column in changes)  # column names are ours, not input
                db.execute(f"UPDATE messages SET {assignments} WHERE id = ?", (*changes.values(), message_id))
                db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (time.time(), row[0]))

    def delete_messages_after(self, conversation_id: int, message_id: int) -> None:
        """Delete the conversation's messages that come after ``message_id`` (edit and resend, regenerate)."""
        with self._write("delete messages") as db:
            db.execute("DELETE FROM messages WHERE conversation_id = ? AND id > ?", (conversation_id, message_id))

    def messages(self, conversation_id: int) -> builtins.list[Message]:
        with self._lock:
            rows = self._query(
                "read the messages",
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            )
            if not rows:
                self.get(conversation_id)  # an unknown conversation is an error, an empty one is not
        return [_message(row) for row in rows]

    # export

    def export_json(self, conversation_id: int) -> str:
        """The full conversation as JSON with a stable, versioned layout (``schema``)."""
        with self._lock:
            conversation = self.get(conversation_id)
            messages = self.messages(conversation_id)
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
                    "stats": _json_safe(m.stats),
                }
                for m in messages
            ],
        }
        return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"

    def export_markdown(self, conversation_id: int) -> str:
        """Title, each turn under a role heading, and a stats line under each answer."""
        with self._lock:
            conversation = self.get(conversation_id)
            messages = self.messages(conversation_id)
        lines = [f"# {_md_inline(conversation.title)}", ""]
        meta = [f"Created {_local_time(conversation.created)}"]
        if conversation.model:
            meta.append(f"model {_md_inline(conversation.model)}")
        meta.append(f"{len(messages)} messages, exported from NPU Studio")
        lines += ["*" + " · ".join(meta) + "*", ""]
        if conversation.system_prompt:
            lines += ["## System prompt", "", conversation.system_prompt.rstrip(), ""]
        for m in messages:
            heading = {"user": "User", "assistant": "Assistant", "system": "System"}.get(m.role, m.role)
            if m.role == "assistant" and m.stop_reason == "cancelled":
                heading += " (stopped)"
            elif m.role == "assistant" and m.stop_reason == "error":
                heading += " (failed)"
            lines += [f"## {heading}", "", m.text.rstrip() or "*(empty)*", ""]
            if m.role == "assistant":
                stats_line = _stats_line(m)
                if stats_line:
                    lines += [stats_line, ""]
        return "\n".join(lines).rstrip() + "\n"

    # lifetime

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.conn.close()
                self._db = None

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# --- markdown helpers ---------------------------------------------------------------------------------

_TOKENS_PER_SECOND_KEYS = ("tokens_per_second", "tokens_per_s", "decode_tokens_per_second", "decode_tokens_per_s")
_TTFT_MS_KEYS = ("time_to_first_token_ms", "ttft_ms", "first_token_ms")
_TTFT_S_KEYS = ("time_to_first_token_s", "ttft_s")
_TOKEN_COUNT_KEYS = ("generated_tokens", "new_tokens", "output_tokens", "tokens")


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
