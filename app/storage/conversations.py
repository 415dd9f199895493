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
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from app import paths
from app.storage.errors import SQLITE_MAGIC, is_busy, is_corruption, storage_error
from app.storage.export import conversation_json, conversation_markdown
from app.storage.records import (
    CONVERSATION_COLUMNS,
    DEFAULT_TITLE,
    MESSAGE_COLUMNS,
    ROLES,
    Message,
    StoredConversation,
    clean_text,
    clean_title,
    conversation_from_row,
    message_from_row,
    stats_from_json,
    stats_to_json,
)
from app.storage.schema import create_v1
from engines import StorageError

log = logging.getLogger(__name__)

__all__ = ["DB_FILE_NAME", "MIGRATIONS", "ConversationStore", "schema_version"]

DB_FILE_NAME = "conversations.db"
# How long a write waits for another process's transaction (SQLite's busy timeout). A transaction holds the
# lock for milliseconds, but SQLite's waiting is not first come, first served: with several processes
# writing at once a 2 s wait was seen to run out. Every write is one short BEGIN IMMEDIATE ... COMMIT, so
# this bounds a wait, never a hold.
BUSY_TIMEOUT = 15.0

# --- schema and migrations -------------------------------------------------------------------------


# MIGRATIONS[n] takes a database at user_version n to n + 1, inside one transaction. Append, never edit.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [create_v1]


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


def _fold(value: object) -> str:
    return value.casefold() if isinstance(value, str) else ""


# --- the store ----------------------------------------------------------------------------------------


class ConversationStore:
    """Conversations and their messages. Safe to share between threads; every method may raise StorageError."""

    def __init__(self, path: Path | None = None, *, timeout: float = BUSY_TIMEOUT) -> None:
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

    def _prepare_when_free(self, conn: sqlite3.Connection) -> None:
        """`_prepare`, tried again while SQLite answers busy: switching a new database to WAL while another
        process opens it too can fail with SQLITE_BUSY at once, without SQLite's own busy wait, so several
        processes opening a new database together each wait their turn (up to the connection's timeout).
        Every step of `_prepare` can run again (the migrations read the version inside their transaction)."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                self._prepare(conn)
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
                log.debug("conversation database busy while opening (%s); trying again", exc)
                time.sleep(0.05)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Upgrade to the current schema, one step per transaction. The version is read again inside each
        write transaction: several processes opening a new database at once must not all create it."""
        target = schema_version()
        while True:
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current > target:
                raise StorageError(
                    f"The conversation database {self.path} was written by a newer NPU Studio (schema {current}, "
                    f"this version reads up to {target}).",
                    "Update NPU Studio, or set NPU_STUDIO_HOME to another folder to start with an empty history.",
                )
            if current == target:
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version == current:  # (else another process upgraded it meanwhile: look again)
                    MIGRATIONS[version](conn)
                    conn.execute(f"PRAGMA user_version = {version + 1}")
                conn.execute("COMMIT")
            except Exception as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error) and is_corruption(exc):
                    raise
                log.exception("Migration of %s to schema %d failed", self.path, current + 1)
                raise StorageError(
                    f"Could not upgrade the conversation database {self.path} to schema {current + 1}: {exc}.",
                    "Your conversations are unchanged. Free some disk space or check the folder, then restart.",
                ) from exc
            if version == current:
                log.info("Conversation database %s upgraded to schema %d", self.path, current + 1)

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
                head = handle.read(len(SQLITE_MAGIC))
        except FileNotFoundError:
            return True
        except OSError as exc:
            raise StorageError(
                f"Could not read the conversation database {self.path}: {exc.strerror or exc}.",
                "Check the file's permissions, or set NPU_STUDIO_HOME to another folder.",
            ) from exc
        return not head or head == SQLITE_MAGIC

    def _open_once(self, fresh: bool = False) -> sqlite3.Connection:
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise self._error("open the conversation database", exc) from exc
        try:
            self._prepare_when_free(conn)
        except sqlite3.Error as exc:
            conn.close()
            if is_corruption(exc) and not fresh:
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
        return storage_error(action, exc, self.path)

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
        title, model, system_prompt = clean_title(title), clean_text(model), clean_text(system_prompt)
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
        sql = f"SELECT {CONVERSATION_COLUMNS} FROM conversations c"
        params: tuple[Any, ...] = ()
        if needle:
            sql += (
                " WHERE instr(studio_fold(c.title), ?1) > 0 OR EXISTS (SELECT 1 FROM messages m"
                " WHERE m.conversation_id = c.id AND instr(studio_fold(m.text), ?1) > 0)"
            )
            params = (needle,)
        sql += " ORDER BY c.updated DESC, c.id DESC"
        return [conversation_from_row(row) for row in self._query("list conversations", sql, params)]

    def get(self, conversation_id: int) -> StoredConversation:
        rows = self._query(
            "read the conversation",
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = ?",
            (conversation_id,),
        )
        if not rows:
            raise self._not_found("Conversation", conversation_id)
        return conversation_from_row(rows[0])

    def rename(self, conversation_id: int, title: str) -> None:
        with self._write("rename the conversation") as db:
            cursor = db.execute(
                "UPDATE conversations SET title = ? WHERE id = ?", (clean_title(title), conversation_id)
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
                "UPDATE conversations SET system_prompt = ? WHERE id = ?", (clean_text(text), conversation_id)
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
        text = clean_text(text)
        stats_json = stats_to_json(stats)
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
            new_id, conversation_id, role, text, now, model, device, ep, stop_reason, stats_from_json(stats_json)
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
            changes["text"] = clean_text(text)
        if stop_reason is not None:
            changes["stop_reason"] = stop_reason
        if stats is not None:
            changes["stats"] = stats_to_json(stats)
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
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            )
            if not rows:
                self.get(conversation_id)  # an unknown conversation is an error, an empty one is not
        return [message_from_row(row) for row in rows]

    # export (app/storage/export.py)

    def export_json(self, conversation_id: int) -> str:
        """The full conversation as JSON with a stable, versioned layout (``schema``)."""
        with self._lock:
            conversation = self.get(conversation_id)
            messages = self.messages(conversation_id)
        return conversation_json(conversation, messages)

    def export_markdown(self, conversation_id: int) -> str:
        """Title, each turn under a role heading, and a stats line under each answer."""
        with self._lock:
            conversation = self.get(conversation_id)
            messages = self.messages(conversation_id)
        return conversation_markdown(conversation, messages)

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
