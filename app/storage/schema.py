"""The conversation database's first schema (version 1); later versions are migrations in app.storage.conversations."""

from __future__ import annotations

import sqlite3


def create_v1(conn: sqlite3.Connection) -> None:
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
