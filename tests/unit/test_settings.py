"""Settings: defaults, round trip, damaged files, invalid values, atomic writes, full and read-only disks."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.storage import settings as settings_mod
from app.storage.settings import (
    SETTINGS_FILE_NAME,
    Settings,
    load_settings,
    save_settings,
    settings_path,
)
from app.storage.settings_schema import SCHEMA
from engines import shared_files
from engines.errors import StorageError
from tests.fixtures.crashes import KILL_BEFORE_SETTINGS_REPLACE, KILL_MID_SETTINGS_WRITE, run_child

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def studio_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    monkeypatch.setenv("NPU_STUDIO_HOME", str(home))
    yield home
    # no test may have dropped the redirection and written to the real user folders
    assert os.environ.get("NPU_STUDIO_HOME") == str(home)


def _custom() -> Settings:
    return Settings(
        device="npu",
        strict=True,
        theme="dark",
        window_geometry="AdnQywADAAAAAAAA",
        window_state="AAAA/wAAAAD9",
        last_view="chat",
        classifier="my-model",
        chat_model="other-llm",
        system_prompt="Réponds en français 🇫🇷\nTwo lines.",
        chat_options={"temperature": 0.7, "max_new_tokens": 512, "do_sample": True},
        top_k=3,
        allow_downloads=True,
        last_open_dir="/home/ü/Pictures",
        chat_enter_sends=False,
        last_conversation=42,
        serve_on_start=True,
        serve_port=0,
        serve_api_key="k3y",
        model_folders=["D:\\models", "/srv/onnx models"],
    )


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.bad-*"))


def test_settings_path_is_under_the_config_dir(studio_home: Path) -> None:
    assert settings_path() == studio_home / "config" / SETTINGS_FILE_NAME


def test_missing_file_gives_defaults_without_notice() -> None:
    settings, notice = load_settings()
    assert settings == Settings()
    assert notice is None


def test_round_trip_keeps_every_field() -> None:
    original = _custom()
    save_settings(original)
    loaded, notice = load_settings()
    assert notice is None
    assert loaded == original
    # every field differs from its default, so the round trip really covers each one
    for f in dataclasses.fields(Settings):
        assert getattr(loaded, f.name) != getattr(Settings(), f.name), f.name


def test_file_is_readable_json_with_a_schema_version() -> None:
    save_settings(_custom())
    data = json.loads(settings_path().read_text(encoding="utf-8"))
    assert data["schema"] == settings_mod.SCHEMA_VERSION
    assert data["theme"] == "dark"
    assert "🇫🇷" in settings_path().read_text(encoding="utf-8")  # stored as text, not \u escapes


def test_every_field_has_a_rule_in_the_one_schema() -> None:
    assert set(SCHEMA) == {f.name for f in dataclasses.fields(Settings)}


def test_defaults_pass_their_own_rules() -> None:
    for f in dataclasses.fields(Settings):
        assert SCHEMA[f.name].problem(getattr(Settings(), f.name)) == "", f.name


def test_chat_options_default_is_not_shared() -> None:
    a, b = Settings(), Settings()
    a.chat_options["temperature"] = 1.0
    assert b.chat_options == {}


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b"\xff\xfe\x00garbage\x00",
        b"[1, 2, 3]",
        b'"just a string"',
        b'{"theme": "dark"',  # truncated mid-write by an old, non-atomic writer
    ],
)
def test_damaged_file_is_backed_up_and_defaults_used(content: bytes) -> None:
    path = settings_path()
    path.write_bytes(content)
    settings, notice = load_settings()
    assert settings == Settings()
    assert notice is not None and "damaged" in notice
    backups = _backups(path)
    assert len(backups) == 1
    assert backups[0].read_bytes() == content
    assert str(backups[0]) in notice
    assert not path.exists()
    # the app then saves, and the next start is clean
    save_settings(settings)
    assert load_settings() == (Settings(), None)


def test_oversized_file_is_treated_as_damaged() -> None:
    path = settings_path()
    path.write_bytes(b" " * (settings_mod.MAX_SETTINGS_BYTES + 10) + b"{}")
    settings, notice = load_settings()
    assert settings == Settings()
    assert notice is not None and "damaged" in notice
    assert len(_backups(path)) == 1


def test_utf8_bom_written_by_windows_editors_is_accepted() -> None:
    settings_path().write_bytes(b"\xef\xbb\xbf" + json.dumps({"theme": "light"}).encode())
    settings, notice = load_settings()
    assert notice is None
    assert settings.theme == "light"


def test_unknown_keys_are_ignored_silently() -> None:
    settings_path().write_text(json.dumps({"theme": "dark", "from_the_future": [1, 2], "schema": 99}))
    settings, notice = load_settings()
    assert notice is None
    assert settings == Settings(theme="dark")


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("device", 3),
        ("device", "warp-drive"),
        ("device", ""),
        ("strict", "yes"),
        ("strict", 1),
        ("theme", "purple"),
        ("theme", None),
        ("window_geometry", 12),
        ("last_view", ""),
        ("classifier", ["a"]),
        ("chat_model", {"x": 1}),
        ("system_prompt", 4.5),
        ("chat_options", [1, 2]),
        ("top_k", "5"),
        ("top_k", 0),
        ("top_k", 5.0),
        ("top_k", True),
        ("top_k", 10**9),
        ("allow_downloads", "false"),
        ("last_open_dir", None),
        ("model_folders", "D:\\models"),
        ("model_folders", ["ok", 3]),
        ("model_folders", ["", "x"]),
        ("model_folders", ["a\u0000b"]),
        ("model_folders", [f"/m{i}" for i in range(51)]),
    ],
)
def test_wrong_value_is_named_ignored_and_kept_in_the_file(key: str, bad: Any) -> None:
    path = settings_path()
    good = dataclasses.asdict(_custom())
    good[key] = bad
    path.write_text(json.dumps(good), encoding="utf-8")
    before = path.read_bytes()
    settings, notice = load_settings()
    assert notice is not None and f"{key}: " in notice and "ignored" in notice
    assert repr(bad) not in notice.split(":", 1)[1] or isinstance(bad, bool | int)  # the value is not echoed
    assert getattr(settings, key) == getattr(Settings(), key)
    for f in dataclasses.fields(Settings):
        if f.name != key:
            assert getattr(settings, f.name) == getattr(_custom(), f.name), f.name
    assert path.read_bytes() == before and _backups(path) == []  # reading changes nothing
    # a save of another setting keeps the bad value as the user wrote it
    other = "theme" if key != "theme" else "top_k"
    changed = dataclasses.replace(settings, **{other: "light" if other == "theme" else 9})
    save_settings(changed, since=settings)
    assert json.loads(path.read_text(encoding="utf-8"))[key] == bad and _backups(path) == []
    # a save that replaces it keeps a copy of the old file first
    save_settings(changed)
    backups = _backups(path)
    assert len(backups) == 1 and json.loads(backups[0].read_text(encoding="utf-8"))[key] == bad
    assert load_settings() == (changed, None)


def test_bad_chat_option_entries_are_dropped_and_good_ones_kept() -> None:
    # NaN is accepted by Python's json reader, so a hand-edited file can contain it
    settings_path().write_text(
        '{"chat_options": {"temperature": 0.5, "top_p": NaN, "max_length": "long", "do_sample": false, '
        '"top_k": 40, "nested": {"a": 1}}}'
    )
    settings, notice = load_settings()
    assert settings.chat_options == {"temperature": 0.5, "do_sample": False, "top_k": 40}
    assert notice is not None and "chat_options" in notice


def test_several_invalid_keys_are_all_named() -> None:
    settings_path().write_text(json.dumps({"theme": 1, "top_k": -1, "strict": True}))
    settings, notice = load_settings()
    assert settings == Settings(strict=True)
    assert notice is not None and "theme" in notice and "top_k" in notice


def test_backups_are_pruned_to_a_few() -> None:
    path = settings_path()
    for i in range(settings_mod.KEEP_BACKUPS + 3):
        path.write_text("{broken")
        _, notice = load_settings()
        assert notice is not None
        # make each backup visibly older than the next so pruning order is deterministic
        for n, backup in enumerate(sorted(_backups(path), key=lambda p: p.stat().st_mtime)):
            os.utime(backup, (1_000_000 + n, 1_000_000 + n))
        assert len(_backups(path)) == min(i + 1, settings_mod.KEEP_BACKUPS)


def test_unreadable_file_gives_defaults_and_a_notice_without_moving_it(monkeypatch: pytest.MonkeyPatch) -> None:
    path = settings_path()
    save_settings(_custom())
    real_open = os.open

    def deny(file: Any, flags: int, *args: Any, **kwargs: Any) -> Any:
        if Path(file) == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, flags, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr("os.open", deny)
        settings, notice = load_settings()
    assert settings == Settings()
    assert notice is not None and "could not be read" in notice
    assert path.exists() and load_settings() == (_custom(), None)


def test_settings_path_that_is_a_folder_is_reported_not_raised(tmp_path: Path) -> None:
    folder = tmp_path / "settings.json"
    folder.mkdir()
    settings, notice = load_settings(folder)
    assert settings == Settings()
    assert notice is not None
    with pytest.raises(StorageError):
        save_settings(Settings(), folder)


def test_damaged_file_that_cannot_be_moved_still_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    path = settings_path()
    path.write_text("{broken")

    def refuse(*_args: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    settings, notice = load_settings()
    assert settings == Settings()
    assert notice is not None and "could not be set aside" in notice
    assert path.read_text() == "{broken"


# --- saving: atomicity and failures ---------------------------------------------------------------


def _tmp_files(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f".{path.name}.*.tmp"))


def test_save_writes_through_a_fsynced_tmp_file_in_the_same_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    path = settings_path()
    calls: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", ""))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        calls.append(("replace", str(src)))
        assert Path(src).parent == Path(dst).parent == path.parent
        assert json.loads(Path(src).read_text(encoding="utf-8"))["theme"] == "dark"
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    save_settings(Settings(theme="dark"))
    kinds = [kind for kind, _ in calls]
    assert kinds.index("fsync") < kinds.index("replace")
    assert _tmp_files(path) == []
    assert load_settings()[0].theme == "dark"


@pytest.mark.parametrize(
    ("where", "exc", "words"),
    [
        ("write", OSError(errno.ENOSPC, "No space left on device"), "disk is full"),
        ("fsync", OSError(errno.ENOSPC, "No space left on device"), "disk is full"),
        ("replace", PermissionError(errno.EACCES, "Permission denied"), "read-only"),
        ("replace", OSError(errno.EROFS, "Read-only file system"), "read-only"),
        ("mkstemp", OSError(errno.EROFS, "Read-only file system"), "read-only"),
        ("replace", OSError(errno.EIO, "Input/output error"), "Input/output error"),
    ],
)
def test_failed_save_raises_storage_error_and_keeps_old_file_and_memory(
    monkeypatch: pytest.MonkeyPatch, where: str, exc: OSError, words: str
) -> None:
    path = settings_path()
    old = _custom()
    save_settings(old)
    before = path.read_bytes()

    new = Settings(theme="light", chat_options={"temperature": 0.1})
    snapshot = dataclasses.replace(new, chat_options=dict(new.chat_options))
    with monkeypatch.context() as patch:
        _inject(patch, where, exc)
        with pytest.raises(StorageError, match=words) as info:
            save_settings(new)
    assert info.value.hint  # says what to do
    assert new == snapshot  # in-memory settings untouched
    assert path.read_bytes() == before  # old file intact
    assert _tmp_files(path) == []  # no debris from the failed attempt

    save_settings(new)  # the retry works once the disk is fine again
    assert load_settings() == (new, None)


def _inject(patch: pytest.MonkeyPatch, where: str, exc: OSError) -> None:
    def boom(*_args: object, **_kwargs: object) -> Any:
        raise exc

    if where == "write":
        real_fdopen = os.fdopen

        class FullFile:
            def __init__(self, fd: int, *args: Any, **kwargs: Any) -> None:
                self._f = real_fdopen(fd, *args, **kwargs)

            def __enter__(self) -> FullFile:
                return self

            def __exit__(self, *args: object) -> None:
                self._f.close()

            def write(self, _data: bytes) -> int:
                raise exc

            def flush(self) -> None:
                self._f.flush()

            def fileno(self) -> int:
                return self._f.fileno()

        patch.setattr(os, "fdopen", FullFile)
    elif where == "mkstemp":
        patch.setattr(shared_files.tempfile, "mkstemp", boom)
    else:
        patch.setattr(os, where, boom)


def test_unstorable_value_is_a_storage_error_not_a_crash() -> None:
    bad = Settings(chat_options={"temperature": float("nan")})
    with pytest.raises(StorageError, match="cannot be stored"):
        save_settings(bad)
    assert not settings_path().exists()


_run_child = run_child


@pytest.mark.parametrize("moment", ["after_tmp_written", "mid_write"])
def test_process_killed_mid_save_leaves_the_old_file_loadable(studio_home: Path, moment: str) -> None:
    old = _custom()
    save_settings(old)
    path = settings_path()
    before = path.read_bytes()

    code = KILL_BEFORE_SETTINGS_REPLACE if moment == "after_tmp_written" else KILL_MID_SETTINGS_WRITE
    result = _run_child(code, studio_home)
    assert result.returncode == 1, result.stderr

    leftovers = _tmp_files(path)
    assert len(leftovers) == 1  # the crash really happened after the tmp file existed
    assert path.read_bytes() == before
    assert load_settings() == (old, None)  # the leftover is ignored

    # an old leftover is cleaned by the next save; a fresh one (a save in progress elsewhere) is not
    stale = leftovers[0]
    old_time = time.time() - shared_files.STALE_TMP_SECONDS - 5
    os.utime(stale, (old_time, old_time))
    fresh = path.parent / f".{path.name}.inprogress.tmp"
    fresh.write_text("{}")
    save_settings(Settings(theme="light"))
    assert not stale.exists()
    assert fresh.exists()
    assert load_settings() == (Settings(theme="light"), None)


def test_save_creates_missing_config_folder(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "settings.json"
    save_settings(Settings(top_k=7), target)
    assert load_settings(target) == (Settings(top_k=7), None)
