"""Settings and conversations under bad conditions: damaged files, full and read-only disks, a process
killed mid-write. Whatever happens, NPU Studio starts, says what it did, loses nothing it had
acknowledged, keeps what is in memory, and a retry works once the disk is fine.

(tests/unit/test_settings.py and test_storage.py test each mechanism in depth; these are the cases as a
user meets them, with the message they see.)"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.storage.conversations import ConversationStore
from app.storage.settings import Settings, load_settings, save_settings, settings_path
from engines import shared_files
from engines.errors import StorageError
from tests.fixtures.crashes import KILL_MID_SETTINGS_WRITE, kill_at_commit, run_child
from tests.reliability.conftest import Recorder

CATEGORY = "Storage"


def _custom() -> Settings:
    return Settings(theme="dark", top_k=7, device="cpu", system_prompt="Be brief.")


# --- damaged settings --------------------------------------------------------------------------------

DAMAGED_SETTINGS: list[tuple[str, bytes, str]] = [
    ("settings.json is not JSON", b'{"theme": "dark", ', "damaged"),
    ("settings.json is empty", b"", "damaged"),
    ("settings.json is binary garbage", bytes(range(256)) * 4, "damaged"),
    ("settings.json holds a list, not an object", b"[1, 2, 3]", "damaged"),
    ("settings.json is 5 MB", b'{"x": "' + b"a" * 5_000_000 + b'"}', "damaged"),
    ("settings.json has wrong types for two keys", b'{"top_k": "many", "theme": 42, "device": "cpu"}', "invalid"),
]


@pytest.mark.parametrize(("name", "content", "words"), DAMAGED_SETTINGS, ids=[d[0] for d in DAMAGED_SETTINGS])
def test_damaged_settings_start_with_defaults_a_backup_and_a_notice(
    name: str, content: bytes, words: str, reliability: Recorder
) -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    settings, notice = load_settings()
    if words == "damaged":
        expected = "defaults, the damaged file set aside, a notice"
    else:
        expected = "each bad value named and ignored, the file kept as it is until a save replaces it (then copied)"
    reliability.record(CATEGORY, name, expected, notice)
    assert notice is not None and words in notice
    if name.startswith("settings.json has wrong types"):
        assert (settings.top_k, settings.theme, settings.device) == (Settings().top_k, Settings().theme, "cpu")
        assert path.read_bytes() == content, "the user's file is untouched by reading it"
    else:
        assert settings == Settings()
        assert list(path.parent.glob("settings.json.bad-*")), "the old file is kept"
    save_settings(_custom())  # and the app can save again
    assert load_settings() == (_custom(), None)
    assert list(path.parent.glob("settings.json.bad-*")), "the old file is kept"


def test_settings_path_that_is_a_folder(reliability: Recorder) -> None:
    settings_path().mkdir(parents=True)
    settings, notice = load_settings()
    reliability.record(CATEGORY, "settings.json is a folder", "defaults and a notice, no crash", notice)
    assert settings == Settings() and notice is not None and "could not be read" in notice


# --- settings on a full or read-only disk -------------------------------------------------------------


def _fail(monkeypatch: pytest.MonkeyPatch, where: str, exc: OSError) -> None:
    def boom(*_args: object, **_kwargs: object) -> Any:
        raise exc

    target = shared_files.tempfile if where == "mkstemp" else os
    monkeypatch.setattr(target, where, boom)


SAVE_FAULTS: list[tuple[str, str, OSError, str]] = [
    ("saving settings on a full disk", "fsync", OSError(errno.ENOSPC, "No space left on device"), "disk is full"),
    ("saving settings to a read-only folder", "mkstemp", OSError(errno.EROFS, "Read-only file system"), "read-only"),
    ("saving settings without permission", "replace", PermissionError(errno.EACCES, "Permission denied"), "read-only"),
    ("saving settings when the disk fails (EIO)", "replace", OSError(errno.EIO, "Input/output error"), "Input/output"),
]


@pytest.mark.parametrize(("name", "where", "exc", "words"), SAVE_FAULTS, ids=[f[0] for f in SAVE_FAULTS])
def test_a_failed_settings_save_keeps_everything_and_can_be_retried(
    name: str, where: str, exc: OSError, words: str, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    save_settings(_custom())
    before = settings_path().read_bytes()
    new = Settings(theme="light", top_k=3)
    with monkeypatch.context() as patch:
        _fail(patch, where, exc)
        with pytest.raises(StorageError) as caught:
            save_settings(new)
    reliability.record(CATEGORY, name, "a clear error; memory and the old file kept; retry works", caught.value)
    assert words in caught.value.message and caught.value.hint
    assert new == Settings(theme="light", top_k=3)
    assert settings_path().read_bytes() == before
    assert not list(settings_path().parent.glob(".settings.json.*.tmp"))
    save_settings(new)  # the disk is fine again
    assert load_settings() == (new, None)


# --- crashes ------------------------------------------------------------------------------------------


_child = run_child


def test_killed_while_saving_settings(_isolated_home: Path, reliability: Recorder) -> None:
    save_settings(_custom())
    code = KILL_MID_SETTINGS_WRITE
    result = _child(code, _isolated_home)
    settings, notice = load_settings()
    same = "the previous settings, unchanged" if settings == _custom() else "CHANGED settings"
    outcome = f"next start loads {same}; {'no notice' if notice is None else 'notice: ' + notice}"
    reliability.record(CATEGORY, "process killed half-way through writing settings", "the old settings load", outcome)
    assert result.returncode == 1, result.stderr
    assert (settings, notice) == (_custom(), None)


def test_killed_before_a_conversation_write_commits(_isolated_home: Path, reliability: Recorder) -> None:
    code = kill_at_commit(200_000)
    result = _child(code, _isolated_home)
    with ConversationStore() as store:
        [conversation] = store.list()
        texts = [m.text for m in store.messages(conversation.id)]
        intact = store._require_open().conn.execute("PRAGMA integrity_check").fetchone()[0]
        store.add_message(conversation.id, "assistant", "after the crash")
    reliability.record(
        CATEGORY,
        "process killed while a conversation write was being committed",
        "committed messages intact, database usable",
        f"{len(texts)} committed messages kept, integrity check {intact}, "
        f"{'no notice' if store.notice is None else 'notice: ' + store.notice}; the next write works",
    )
    assert result.returncode == 1, result.stderr
    assert texts == ["committed 0", "committed 1", "committed 2"] and intact == "ok"


# --- damaged conversation database --------------------------------------------------------------------


def _garbage(db: Path) -> None:
    db.write_bytes(b"this is not a database at all\n" * 100)


def _wrecked_pages(db: Path) -> None:
    with ConversationStore(db) as store:
        for i in range(8):
            c = store.create(f"c{i}")
            for j in range(5):
                store.add_message(c.id, "user", f"message {i}-{j} " * 300)
    size = db.stat().st_size
    with open(db, "r+b") as handle:  # keep the header, wreck pages in the middle
        handle.seek(size // 3)
        handle.write(b"\xde\xad\xbe\xef" * 4096)


def _truncated(db: Path) -> None:
    with ConversationStore(db) as store:
        c = store.create("c")
        for j in range(50):
            store.add_message(c.id, "user", f"message {j} " * 300)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


DAMAGED_DB: list[tuple[str, Callable[[Path], None]]] = [
    ("conversations.db is not a database", _garbage),
    ("conversations.db has wrecked pages", _wrecked_pages),
    ("conversations.db was cut short", _truncated),
]


@pytest.mark.parametrize(("name", "damage"), DAMAGED_DB, ids=[d[0] for d in DAMAGED_DB])
def test_a_damaged_database_is_set_aside_and_a_fresh_one_started(
    name: str, damage: Callable[[Path], None], tmp_path: Path, reliability: Recorder
) -> None:
    db = tmp_path / "conversations.db"
    damage(db)
    with ConversationStore(db) as store:
        notice = store.notice
        c = store.create("new")
        store.add_message(c.id, "user", "works again")
        assert [m.text for m in store.messages(c.id)] == ["works again"]
    reliability.record(CATEGORY, name, "old file kept aside, a fresh history, a notice", notice)
    assert notice is not None and "damaged" in notice
    assert list(tmp_path.glob("conversations.db.corrupt-*"))


def test_a_database_from_a_newer_version_is_left_untouched(tmp_path: Path, reliability: Recorder) -> None:
    db = tmp_path / "conversations.db"
    with ConversationStore(db) as store:
        store.create("from the future")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StorageError) as caught:
        ConversationStore(db)
    reliability.record(
        CATEGORY, "conversations.db written by a newer NPU Studio", "refused, file untouched", caught.value
    )
    assert "newer" in caught.value.message and db.read_bytes() == before


# --- conversations on a full or read-only disk ---------------------------------------------------------


def _full(store: ConversationStore) -> Callable[[], object]:
    conn = store._require_open().conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # the file may not grow: a full disk
    return lambda: conn.execute("PRAGMA max_page_count = 1073741823")


def _read_only(store: ConversationStore) -> Callable[[], object]:
    conn = store._require_open().conn
    conn.execute("PRAGMA query_only = ON")  # SQLite refuses writes as on a read-only medium
    return lambda: conn.execute("PRAGMA query_only = OFF")


def _locked(store: ConversationStore) -> Callable[[], object]:
    other = sqlite3.connect(store.path, timeout=0.05)
    other.execute("BEGIN EXCLUSIVE")

    def release() -> None:
        other.execute("ROLLBACK")
        other.close()

    return release


DB_FAULTS: list[tuple[str, Callable[[ConversationStore], Callable[[], object]], str]] = [
    ("storing an answer on a full disk", _full, "disk is full"),
    ("storing an answer on a read-only disk", _read_only, "read-only"),
    ("storing an answer while another process locks the database", _locked, "busy"),
]


@pytest.mark.parametrize(("name", "fault", "words"), DB_FAULTS, ids=[f[0] for f in DB_FAULTS])
def test_a_failed_conversation_write_loses_nothing_and_can_be_retried(
    name: str, fault: Callable[[ConversationStore], Callable[[], object]], words: str, reliability: Recorder
) -> None:
    with ConversationStore(timeout=0.05) as store:
        c = store.create("chat")
        question = store.add_message(c.id, "user", "a question")
        answer = "an answer the user has on screen 🧠 " * 3000
        stats = {"decode_tokens_per_s": 12.0}
        recover = fault(store)
        with pytest.raises(StorageError) as caught:
            store.add_message(c.id, "assistant", answer, stop_reason="eos", stats=stats)
        reliability.record(CATEGORY, name, "a clear error; nothing half-written; retry works", caught.value)
        assert words in caught.value.message and caught.value.hint
        assert store.messages(c.id) == [question]  # nothing half-written; reading still works
        assert stats == {"decode_tokens_per_s": 12.0}
        recover()
        store.add_message(c.id, "assistant", answer, stop_reason="eos", stats=stats)
        assert [m.text for m in store.messages(c.id)] == ["a question", answer]
