"""Conversation store: CRUD, search, unicode, exports, migrations, corruption, disk faults, crashes, threads."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.storage import conversations as storage_mod
from app.storage.conversations import DB_FILE_NAME, ConversationStore, schema_version
from app.storage.export import EXPORT_SCHEMA
from app.storage.records import DEFAULT_TITLE, MAX_TITLE_CHARS, Message
from engines.errors import StorageError
from tests.fixtures.crashes import kill_at_commit

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def studio_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    monkeypatch.setenv("NPU_STUDIO_HOME", str(home))
    yield home
    assert os.environ.get("NPU_STUDIO_HOME") == str(home)


@pytest.fixture
def db_path(studio_home: Path) -> Path:
    return studio_home / "data" / DB_FILE_NAME


@pytest.fixture
def store(db_path: Path) -> Iterator[ConversationStore]:
    s = ConversationStore(db_path)
    yield s
    s.close()


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _answer(store: ConversationStore, cid: int, text: str = "Paris.", **kwargs: Any) -> Message:
    params: dict[str, Any] = {
        "model": "smollm2-135m-instruct",
        "device": "CPU",
        "ep": "CPUExecutionProvider",
        "stop_reason": "eos",
        "stats": {"tokens_per_second": 41.25, "time_to_first_token_ms": 87.4, "generated_tokens": 12},
    }
    params.update(kwargs)
    return store.add_message(cid, "assistant", text, **params)


# --- opening, pragmas, schema ------------------------------------------------------------------------


def test_default_path_is_under_the_data_dir(studio_home: Path) -> None:
    with ConversationStore() as s:
        assert s.path == studio_home / "data" / DB_FILE_NAME
        s.create("x")
    assert (studio_home / "data" / DB_FILE_NAME).is_file()


def test_database_uses_wal_foreign_keys_and_a_schema_version(store: ConversationStore, db_path: Path) -> None:
    assert store.notice is None
    conn = store._require_open().conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    raw = _raw(db_path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == schema_version() >= 1
    raw.close()


def test_folder_that_cannot_be_created_is_a_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(StorageError, match="Could not create the folder"):
        ConversationStore(blocker / "sub" / DB_FILE_NAME)


# --- conversations and messages ----------------------------------------------------------------------


def test_create_get_and_list_newest_first(store: ConversationStore) -> None:
    a = store.create("First", model="m1", system_prompt="Be brief.")
    b = store.create("Second")
    assert store.get(a.id) == a
    assert a.title == "First" and a.model == "m1" and a.system_prompt == "Be brief." and a.message_count == 0
    assert [c.id for c in store.list()] == [b.id, a.id]
    store.add_message(a.id, "user", "hello")  # activity moves a conversation to the top
    listed = store.list()
    assert [c.id for c in listed] == [a.id, b.id]
    assert listed[0].message_count == 1 and listed[0].updated >= a.updated


def test_titles_are_cleaned(store: ConversationStore) -> None:
    assert store.create("  two\nlines\tand   spaces ").title == "two lines and spaces"
    assert store.create("   ").title == DEFAULT_TITLE
    long = store.create("x" * 1000)
    assert len(long.title) == MAX_TITLE_CHARS


def test_rename_and_system_prompt(store: ConversationStore) -> None:
    c = store.create("Old")
    store.rename(c.id, "New name 🚀")
    store.set_system_prompt(c.id, "Answer in haiku.")
    got = store.get(c.id)
    assert got.title == "New name 🚀" and got.system_prompt == "Answer in haiku."


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get(999),
        lambda s: s.rename(999, "x"),
        lambda s: s.set_system_prompt(999, "x"),
        lambda s: s.add_message(999, "user", "x"),
        lambda s: s.update_message(999, text="x"),
        lambda s: s.messages(999),
        lambda s: s.export_markdown(999),
        lambda s: s.export_json(999),
    ],
)
def test_unknown_ids_are_clear_storage_errors(store: ConversationStore, call: Callable[[Any], Any]) -> None:
    with pytest.raises(StorageError, match="999 does not exist"):
        call(store)


def test_bad_role_is_refused(store: ConversationStore) -> None:
    c = store.create()
    with pytest.raises(StorageError, match="role 'robot'"):
        store.add_message(c.id, "robot", "beep")
    assert store.messages(c.id) == []


def test_delete_removes_the_conversation_and_its_messages(store: ConversationStore, db_path: Path) -> None:
    keep, gone = store.create("keep"), store.create("gone")
    store.add_message(keep.id, "user", "k")
    for i in range(3):
        store.add_message(gone.id, "user", f"g{i}")
    store.delete(gone.id)
    store.delete(gone.id)  # already gone: not an error
    assert [c.id for c in store.list()] == [keep.id]
    raw = _raw(db_path)
    assert raw.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1
    raw.close()


def test_messages_round_trip_with_identity_and_stats(store: ConversationStore) -> None:
    c = store.create()
    sys_msg = store.add_message(c.id, "system", "You are terse.")
    user = store.add_message(c.id, "user", "Capital of France?")
    answer = _answer(store, c.id)
    assert store.messages(c.id) == [sys_msg, user, answer]
    assert answer.model == "smollm2-135m-instruct" and answer.device == "CPU"
    assert answer.ep == "CPUExecutionProvider" and answer.stop_reason == "eos"
    assert answer.stats["tokens_per_second"] == 41.25
    assert store.get(c.id).message_count == 3
    assert store.messages(store.create().id) == []


def test_non_finite_stats_are_stored_as_null(store: ConversationStore) -> None:
    c = store.create()
    m = _answer(store, c.id, stats={"tokens_per_second": float("inf"), "nested": {"x": float("nan")}, "ok": 1})
    assert m.stats == {"tokens_per_second": None, "nested": {"x": None}, "ok": 1}
    assert store.messages(c.id)[0].stats == m.stats


def test_update_message_changes_only_given_fields(store: ConversationStore) -> None:
    c = store.create()
    m = store.add_message(c.id, "assistant", "", model="m", device="NPU", ep="QNNExecutionProvider")
    before = store.get(c.id).updated
    store.update_message(m.id, text="streamed answer")
    store.update_message(m.id, stop_reason="cancelled", stats={"tokens_per_second": 9.5})
    store.update_message(m.id, device="CPU", ep="CPUExecutionProvider")
    store.update_message(m.id)  # nothing to change is fine
    got = store.messages(c.id)[0]
    assert got.text == "streamed answer" and got.stop_reason == "cancelled"
    assert got.stats == {"tokens_per_second": 9.5}
    assert got.model == "m" and got.device == "CPU" and got.ep == "CPUExecutionProvider"
    assert store.get(c.id).updated >= before


def test_delete_messages_after_supports_edit_and_regenerate(store: ConversationStore) -> None:
    c, other = store.create(), store.create()
    u1 = store.add_message(c.id, "user", "q1")
    a1 = _answer(store, c.id, "a1")
    u2 = store.add_message(c.id, "user", "q2")
    _answer(store, c.id, "a2")
    o = store.add_message(other.id, "user", "untouched")
    store.delete_messages_after(c.id, u2.id)  # regenerate the last answer
    assert [m.id for m in store.messages(c.id)] == [u1.id, a1.id, u2.id]
    store.delete_messages_after(c.id, u1.id)  # edit the first question and resend
    store.update_message(u1.id, text="q1, edited")
    assert [(m.id, m.text) for m in store.messages(c.id)] == [(u1.id, "q1, edited")]
    assert store.messages(other.id) == [o]


UNICODE_TEXTS = [
    "Emoji: 😀👍🏽👩‍👩‍👧‍👦🏳️‍🌈 and a flag 🇯🇵",
    "RTL: مرحبا بالعالم — שלום",
    "CJK: 你好，世界。日本語のテキスト。한국어",
    "Combining: e\u0301 vs é, Zalgo: Z\u0336\u0337a\u0338",
    "Controls: tab\tnewline\nCR\rNUL\x00end",
    "Markdown: ```python\nprint('hi')\n```\n| a | b |\n",
    "Astral math: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
]


@pytest.mark.parametrize("text", UNICODE_TEXTS)
def test_unicode_round_trip(store: ConversationStore, db_path: Path, text: str) -> None:
    c = store.create(text.replace("\x00", ""), system_prompt=text)
    m = store.add_message(c.id, "user", text)
    assert m.text == text
    store.close()
    with ConversationStore(db_path) as again:
        assert again.messages(c.id)[0].text == text
        assert again.get(c.id).system_prompt == text
        exported = json.loads(again.export_json(c.id))
        assert exported["messages"][0]["text"] == text
        assert text.rstrip() in again.export_markdown(c.id)


def test_very_long_message_round_trips(store: ConversationStore) -> None:
    c = store.create()
    text = "🙂 long answer " * 100_000  # ~1.5 MB
    store.add_message(c.id, "assistant", text)
    assert store.messages(c.id)[0].text == text


def test_lone_surrogate_is_replaced_not_a_crash(store: ConversationStore) -> None:
    c = store.create()
    m = store.add_message(c.id, "user", "broken \ud800 half")
    assert m.text == "broken ? half"
    assert store.messages(c.id)[0].text == "broken ? half"


# --- search and volume -------------------------------------------------------------------------------


def test_search_matches_titles_and_message_text(store: ConversationStore) -> None:
    trip = store.create("Trip to Zürich")
    code = store.create("Python help")
    store.add_message(code.id, "user", "How do I reverse a list?")
    store.add_message(code.id, "assistant", "Use reversed() or slicing [::-1]; 100% safe_mode_ok.")
    cake = store.create("Recipes")
    store.add_message(cake.id, "user", "ÉCOLE de cuisine 🍰")

    def ids(q: str) -> list[int]:
        return [c.id for c in store.list(q)]

    assert ids("") == [cake.id, code.id, trip.id]
    assert ids("zürich") == [trip.id]  # title, case-insensitive beyond ASCII
    assert ids("ZÜRICH") == [trip.id]
    assert ids("REVERSED()") == [code.id]  # message text
    assert ids("école") == [cake.id]
    assert ids("🍰") == [cake.id]
    assert ids("100%") == [code.id] and ids("%") == [code.id]  # LIKE wildcards are literal
    assert ids("safe_mode") == [code.id] and ids("_") == [code.id]
    assert ids("  python  ") == [code.id]  # surrounding blanks ignored
    assert ids("no such words anywhere") == []


def test_thousand_message_conversation(store: ConversationStore, db_path: Path) -> None:
    c = store.create("Long one")
    noise = store.create("Other")
    store.add_message(noise.id, "user", "unrelated")
    added = [
        store.add_message(c.id, "user" if i % 2 == 0 else "assistant", f"message number {i} ✓") for i in range(1000)
    ]
    msgs = store.messages(c.id)
    assert len(msgs) == 1000
    assert [m.id for m in msgs] == [m.id for m in added] == sorted(m.id for m in added)
    assert msgs[999].text == "message number 999 ✓"
    listed = store.list()
    assert listed[0].id == c.id and listed[0].message_count == 1000
    assert [x.id for x in store.list("number 999 ✓")] == [c.id]
    assert json.loads(store.export_json(c.id))["conversation"]["message_count"] == 1000
    assert store.export_markdown(c.id).count("\n## ") == 1000


# --- exports -----------------------------------------------------------------------------------------


def test_markdown_export(store: ConversationStore) -> None:
    c = store.create("Geography *quiz* #1", model="smollm2-135m-instruct", system_prompt="Be brief.")
    store.add_message(c.id, "user", "Capital of France?")
    _answer(store, c.id, "**Paris.**")
    store.add_message(c.id, "user", "And of Spain? Write a long essay.")
    _answer(
        store,
        c.id,
        "Madrid is the capital and",
        device="NPU",
        ep="QNNExecutionProvider",
        stop_reason="cancelled",
        stats={"tokens_per_s": 18.0},
    )
    md = store.export_markdown(c.id)
    lines = md.splitlines()
    assert lines[0] == "# Geography \\*quiz\\* \\#1"
    assert "## System prompt\n\n```text\nBe brief.\n```" in md
    assert md.count("## User") == 2
    assert "## Assistant\n\n```text\n**Paris.**\n```\n\n" in md
    first_stats = (
        "*smollm2-135m-instruct · CPU · CPUExecutionProvider · 41.2 tokens/s · first token 87 ms · 12 tokens"
        " · stop: eos*"
    )
    assert first_stats in lines
    assert "## Assistant (stopped)\n\n```text\nMadrid is the capital and\n```" in md
    stopped_line = lines[lines.index("## Assistant (stopped)") + 6]
    assert "NPU" in stopped_line and "QNNExecutionProvider" in stopped_line and "18.0 tokens/s" in stopped_line
    assert "stopped by the user" in stopped_line
    assert md.endswith("\n") and not md.endswith("\n\n")
    # the order of turns is the conversation's order
    assert md.index("Capital of France?") < md.index("**Paris.**") < md.index("And of Spain?") < md.index("Madrid")


def test_markdown_export_without_stats_or_prompt(store: ConversationStore) -> None:
    c = store.create("Plain")
    store.add_message(c.id, "user", "hi")
    store.add_message(c.id, "assistant", "hello")
    md = store.export_markdown(c.id)
    assert "System prompt" not in md
    assert md.rstrip().endswith("```text\nhello\n```")  # no empty stats line under an answer with no identity


def test_json_export_has_full_data_and_a_stable_schema(store: ConversationStore) -> None:
    c = store.create("Export me", model="m", system_prompt="sp")
    u = store.add_message(c.id, "user", "q 🧪")
    a = _answer(store, c.id, "a", stats={"tokens_per_second": 3.5, "bad": float("nan")})
    doc = json.loads(store.export_json(c.id))
    assert doc["schema"] == EXPORT_SCHEMA == 1
    assert doc["kind"] == "npu-studio.conversation"
    assert isinstance(doc["exported"], float)
    conv = store.get(c.id)
    assert doc["conversation"] == {
        "id": conv.id,
        "title": "Export me",
        "created": conv.created,
        "updated": conv.updated,
        "model": "m",
        "system_prompt": "sp",
        "message_count": 2,
    }
    assert [set(m) for m in doc["messages"]] == [
        {"id", "role", "text", "created", "model", "device", "ep", "stop_reason", "stats"}
    ] * 2
    assert doc["messages"][0]["text"] == "q 🧪" and doc["messages"][0]["id"] == u.id
    assert doc["messages"][1] == {
        "id": a.id,
        "role": "assistant",
        "text": "a",
        "created": a.created,
        "model": "smollm2-135m-instruct",
        "device": "CPU",
        "ep": "CPUExecutionProvider",
        "stop_reason": "eos",
        "stats": {"tokens_per_second": 3.5, "bad": None},
    }
    assert "NaN" not in store.export_json(c.id)  # strict JSON any reader accepts


# --- migrations --------------------------------------------------------------------------------------


def _add_tags_column(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE conversations ADD COLUMN tags TEXT NOT NULL DEFAULT ''")


def test_migration_hook_upgrades_an_existing_database(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ConversationStore(db_path) as s:
        c = s.create("before upgrade")
        s.add_message(c.id, "user", "kept")
    monkeypatch.setattr(storage_mod, "MIGRATIONS", [*storage_mod.MIGRATIONS, _add_tags_column])
    with ConversationStore(db_path) as s:
        assert s.messages(c.id)[0].text == "kept"
        conn = s._require_open().conn
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        columns = [row[1] for row in conn.execute("PRAGMA table_info(conversations)")]
        assert "tags" in columns


def test_failed_migration_rolls_back_and_keeps_the_data(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ConversationStore(db_path) as s:
        c = s.create("precious")
        s.add_message(c.id, "user", "do not lose me")

    def half_done_then_fail(conn: sqlite3.Connection) -> None:
        _add_tags_column(conn)
        conn.execute("DELETE FROM messages")
        raise RuntimeError("step 2 failed")

    monkeypatch.setattr(storage_mod, "MIGRATIONS", [*storage_mod.MIGRATIONS, half_done_then_fail])
    with pytest.raises(StorageError, match="upgrade.*schema 2"):
        ConversationStore(db_path)

    raw = _raw(db_path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "tags" not in [row[1] for row in raw.execute("PRAGMA table_info(conversations)")]
    assert raw.execute("SELECT text FROM messages").fetchall() == [("do not lose me",)]
    raw.close()

    monkeypatch.setattr(storage_mod, "MIGRATIONS", [*storage_mod.MIGRATIONS[:1], _add_tags_column])
    with ConversationStore(db_path) as s:
        assert s.messages(c.id)[0].text == "do not lose me"


def test_database_from_a_newer_version_is_refused_untouched(db_path: Path) -> None:
    with ConversationStore(db_path) as s:
        s.create("from the future")
    raw = _raw(db_path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(StorageError, match="newer NPU Studio"):
        ConversationStore(db_path)
    raw = _raw(db_path)
    assert raw.execute("SELECT title FROM conversations").fetchall() == [("from the future",)]
    raw.close()


# --- corruption --------------------------------------------------------------------------------------


def _corrupt_backups(db_path: Path) -> list[Path]:
    return sorted(p for p in db_path.parent.glob(f"{db_path.name}.corrupt-*") if not p.name.endswith("-wal"))


def test_garbage_file_is_set_aside_and_a_fresh_database_started(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    garbage = os.urandom(64 * 1024)
    db_path.write_bytes(garbage)
    with ConversationStore(db_path) as s:
        assert s.notice is not None and "damaged" in s.notice
        backups = _corrupt_backups(db_path)
        assert len(backups) == 1 and str(backups[0]) in s.notice
        assert backups[0].read_bytes() == garbage
        c = s.create("fresh start")
        s.add_message(c.id, "user", "works")
    with ConversationStore(db_path) as s:
        assert s.notice is None
        assert [x.title for x in s.list()] == ["fresh start"]


def test_damaged_pages_in_a_real_database_are_detected(db_path: Path) -> None:
    with ConversationStore(db_path) as s:
        for i in range(8):
            c = s.create(f"c{i}")
            for j in range(5):
                s.add_message(c.id, "user", f"message {i}-{j} " * 300)
    size = db_path.stat().st_size
    assert size > 64 * 1024
    with open(db_path, "r+b") as f:  # keep the header, wreck pages in the middle
        f.seek(size // 3)
        f.write(b"\xde\xad\xbe\xef" * 4096)
    with ConversationStore(db_path) as s:
        assert s.notice is not None
        assert len(_corrupt_backups(db_path)) == 1
        assert s.list() == []


def test_stale_wal_of_a_damaged_database_is_kept_with_the_backup(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    db_path.write_bytes(b"not sqlite at all" * 100)
    wal = db_path.with_name(db_path.name + "-wal")
    wal.write_bytes(b"old wal")
    with ConversationStore(db_path) as s:
        backup = _corrupt_backups(db_path)[0]
        assert backup.with_name(backup.name + "-wal").read_bytes() == b"old wal"
        s.create("ok")


# --- disk full, read-only, locked, closed ------------------------------------------------------------


class FailingExecute:
    """Wraps the store's execute seam: statements starting with one of ``verbs`` raise ``exc`` while armed."""

    def __init__(self, store: ConversationStore, verbs: tuple[str, ...], exc: sqlite3.Error) -> None:
        self.db = store._require_open()
        self.real = self.db.execute
        self.verbs = verbs
        self.exc = exc
        self.armed = True
        self.failures = 0

    def __call__(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        if self.armed and sql.lstrip().upper().startswith(self.verbs):
            self.failures += 1
            raise self.exc
        return self.real(sql, params)


@pytest.mark.parametrize(
    ("verbs", "message", "words"),
    [
        (("INSERT",), "database or disk is full", "disk is full"),
        (("COMMIT",), "database or disk is full", "disk is full"),
        (("INSERT",), "attempt to write a readonly database", "read-only"),
        (("BEGIN",), "database is locked", "busy"),
        (("UPDATE",), "disk I/O error", "disk I/O error"),
    ],
)
def test_write_failure_loses_nothing_and_the_same_call_can_be_retried(
    store: ConversationStore, monkeypatch: pytest.MonkeyPatch, verbs: tuple[str, ...], message: str, words: str
) -> None:
    c = store.create("chat")
    first = store.add_message(c.id, "user", "earlier question")
    fault = FailingExecute(store, verbs, sqlite3.OperationalError(message))
    monkeypatch.setattr(fault.db, "execute", fault)

    answer_text = "an answer the user has on screen 🧠"
    stats = {"tokens_per_second": 12.0}
    with pytest.raises(StorageError, match=words) as info:
        store.add_message(c.id, "assistant", answer_text, model="m", stop_reason="eos", stats=stats)
    assert fault.failures == 1
    assert info.value.hint
    assert stats == {"tokens_per_second": 12.0}  # the caller's data is untouched
    assert not fault.db.conn.in_transaction  # rolled back, the connection is usable
    assert store.messages(c.id) == [first]  # nothing half-written
    assert store.get(c.id).message_count == 1

    fault.armed = False  # the disk has room again
    retried = store.add_message(c.id, "assistant", answer_text, model="m", stop_reason="eos", stats=stats)
    assert store.messages(c.id) == [first, retried]


def test_real_sqlite_full_error_is_reported_and_recoverable(store: ConversationStore) -> None:
    c = store.create()
    store.add_message(c.id, "user", "small")
    conn = store._require_open().conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # the database file may not grow: a full disk
    big = "x" * 200_000
    with pytest.raises(StorageError, match="disk is full"):
        store.add_message(c.id, "assistant", big)
    assert [m.text for m in store.messages(c.id)] == ["small"]
    conn.execute("PRAGMA max_page_count = 1073741823")
    store.add_message(c.id, "assistant", big)
    assert [m.text for m in store.messages(c.id)] == ["small", big]


def test_real_read_only_database_is_reported_and_recoverable(store: ConversationStore) -> None:
    c = store.create("before")
    conn = store._require_open().conn
    conn.execute("PRAGMA query_only = ON")  # writes now fail inside SQLite as on a read-only medium
    with pytest.raises(StorageError, match="read-only"):
        store.rename(c.id, "after")
    with pytest.raises(StorageError, match="read-only"):
        store.create("another")
    assert [x.title for x in store.list()] == ["before"]  # reading still works
    conn.execute("PRAGMA query_only = OFF")
    store.rename(c.id, "after")
    assert store.get(c.id).title == "after"


def test_database_locked_by_another_process_is_reported_and_recoverable(db_path: Path) -> None:
    with ConversationStore(db_path, timeout=0.05) as s:
        c = s.create()
        other = _raw(db_path)
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StorageError, match="busy"):
            s.add_message(c.id, "user", "hello")
        other.execute("ROLLBACK")
        other.close()
        s.add_message(c.id, "user", "hello")
        assert [m.text for m in s.messages(c.id)] == ["hello"]


def test_closed_store_raises_storage_error(store: ConversationStore) -> None:
    store.close()
    store.close()  # twice is fine
    with pytest.raises(StorageError, match="closed"):
        store.list()
    with pytest.raises(StorageError, match="closed"):
        store.create()


def test_exception_inside_a_write_rolls_it_back(store: ConversationStore) -> None:
    c = store.create()
    with pytest.raises(TypeError), store._write("test") as db:
        db.execute("INSERT INTO messages (conversation_id, role, text, created) VALUES (?, 'user', 'x', 0)", (c.id,))
        raise TypeError("bug in the middle of a write")
    assert store.messages(c.id) == []


# --- crashes -----------------------------------------------------------------------------------------


def _child(code: str, home: Path, **kwargs: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, NPU_STUDIO_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_process_killed_before_commit_leaves_committed_messages_intact(studio_home: Path, db_path: Path) -> None:
    # large enough to spill uncommitted pages into the WAL file before the commit
    code = kill_at_commit(500_000)
    child = _child(code, studio_home)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 1, err
    wal = db_path.with_name(db_path.name + "-wal")
    assert wal.exists() and wal.stat().st_size > 1_000_000  # the uncommitted answer really reached the disk

    with ConversationStore(db_path) as s:
        assert s.notice is None
        assert s._require_open().conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        [c] = s.list()
        assert [m.text for m in s.messages(c.id)] == ["committed 0", "committed 1", "committed 2"]
        s.add_message(c.id, "assistant", "after the crash")
        assert s.get(c.id).message_count == 4


def test_process_killed_at_a_random_moment_keeps_every_acknowledged_message(studio_home: Path, db_path: Path) -> None:
    code = """
    import sys
    from app.storage.conversations import ConversationStore
    store = ConversationStore()
    c = store.create("stream")
    for i in range(100_000):
        m = store.add_message(c.id, "user" if i % 2 else "assistant", f"message {i} " * (1 + i % 50))
        print(m.id, flush=True)  # acknowledged: committed before this line is printed
    """
    child = _child(code, studio_home)
    assert child.stdout is not None
    acknowledged: list[int] = []
    for line in child.stdout:
        acknowledged.append(int(line))
        if len(acknowledged) == 60:
            child.send_signal(signal.SIGKILL)
            break
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL

    with ConversationStore(db_path) as s:
        assert s._require_open().conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        [c] = s.list()
        stored = [m.id for m in s.messages(c.id)]
        assert stored[: len(acknowledged)] == acknowledged  # nothing acknowledged was lost
        assert len(stored) >= len(acknowledged)  # at most the in-flight ones beyond that


# --- threads -----------------------------------------------------------------------------------------


def test_concurrent_writes_from_two_threads_while_another_reads(store: ConversationStore) -> None:
    shared = store.create("shared")
    per_thread = 150
    errors: list[BaseException] = []
    start = threading.Barrier(3)
    stop_reading = threading.Event()

    def writer(name: str) -> None:
        try:
            own = store.create(name)
            start.wait()
            for i in range(per_thread):
                store.add_message(own.id, "user", f"{name} own {i}")
                m = store.add_message(shared.id, "assistant", f"{name} shared {i}", model=name)
                store.update_message(m.id, stop_reason="eos")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def reader() -> None:
        try:
            start.wait()
            while not stop_reading.is_set():
                for c in store.list():
                    store.messages(c.id)
                store.list("shared 1")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("alpha", "beta")]
    read_thread = threading.Thread(target=reader)
    for t in [*threads, read_thread]:
        t.start()
    for t in threads:
        t.join(timeout=120)
    stop_reading.set()
    read_thread.join(timeout=120)

    assert errors == []
    assert not any(t.is_alive() for t in [*threads, read_thread])
    shared_msgs = store.messages(shared.id)
    assert len(shared_msgs) == 2 * per_thread
    assert all(m.stop_reason == "eos" for m in shared_msgs)
    for name in ("alpha", "beta"):
        mine = [m.text for m in shared_msgs if m.model == name]
        assert mine == [f"{name} shared {i}" for i in range(per_thread)]  # each thread's order kept
        [own] = [c for c in store.list() if c.title == name]
        assert own.message_count == per_thread
    all_ids = [m.id for c in store.list() for m in store.messages(c.id)]
    assert len(all_ids) == len(set(all_ids)) == 4 * per_thread
