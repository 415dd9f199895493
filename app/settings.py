"""User settings: one JSON file under the config folder, read forgivingly and written atomically.

Reading never fails: a missing file gives the defaults, a damaged file is kept aside as
``settings.json.bad-<timestamp>`` and the defaults are used, a wrong value resets only that key. Each
of those cases returns a readable notice for the status bar.

Writing replaces the file atomically (temporary file in the same folder, flush, fsync, ``os.replace``),
so a crash at any moment leaves either the old or the new file, never half of one. A read-only or full
disk raises :class:`StorageError`; the caller's ``Settings`` object is not touched, so a retry works.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app import paths
from engines import jsonfile
from engines.errors import StorageError
from engines.types import DeviceChoice

log = logging.getLogger(__name__)

SETTINGS_FILE_NAME = "settings.json"
SCHEMA_VERSION = 1
THEMES = ("system", "light", "dark")
MAX_SETTINGS_BYTES = 1 << 20  # a settings file is a few KB; anything near this size is not ours
MAX_TOP_K = 1000
KEEP_BACKUPS = 5
STALE_TMP_SECONDS = 60.0  # a temporary file older than this was left by a crash, not by a save in progress


@dataclass
class Settings:
    device: str = "auto"  # DeviceChoice.parse() text: auto|npu|gpu|cpu|efficiency|performance|EP name
    strict: bool = False
    theme: str = "system"  # system|light|dark
    window_geometry: str = ""  # base64 of QWidget.saveGeometry()
    window_state: str = ""  # base64 of QMainWindow.saveState()
    last_view: str = "devices"
    classifier: str = "efficientnet-lite0"  # model folder name (bundled or user)
    chat_model: str = "smollm2-135m-instruct"
    system_prompt: str = "You are a helpful assistant."
    chat_options: dict[str, float | int | bool] = field(default_factory=dict)  # ChatOptions overrides
    top_k: int = 5
    allow_downloads: bool = False  # offline demos: no network unless the user turns this on
    last_open_dir: str = ""
    chat_enter_sends: bool = True  # False: Enter starts a new line and Ctrl+Enter sends
    last_conversation: int = 0  # the conversation on screen when the app closed (0: none)


def settings_path() -> Path:
    return paths.config_dir() / SETTINGS_FILE_NAME


# --- validation -------------------------------------------------------------------------------------


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_name(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip()) and len(value) <= 500


def _is_theme(value: object) -> bool:
    return value in THEMES


def _is_top_k(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_TOP_K


def _is_device(value: object) -> bool:
    if not _is_name(value):
        return False
    assert isinstance(value, str)
    try:
        DeviceChoice.parse(value)
    except Exception:  # any parse failure means the stored text is unusable
        return False
    return True


# Every Settings field has exactly one validator (a unit test enforces this); chat_options is special-cased
# because a bad entry drops only that entry.
VALIDATORS: dict[str, Callable[[object], bool]] = {
    "device": _is_device,
    "strict": _is_bool,
    "theme": _is_theme,
    "window_geometry": _is_str,
    "window_state": _is_str,
    "last_view": _is_name,
    "classifier": _is_name,
    "chat_model": _is_name,
    "system_prompt": _is_str,
    "chat_options": lambda value: isinstance(value, dict),
    "top_k": _is_top_k,
    "allow_downloads": _is_bool,
    "last_open_dir": _is_str,
    "chat_enter_sends": _is_bool,
    "last_conversation": lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= 0,
}


def _clean_chat_options(raw: dict[Any, Any]) -> tuple[dict[str, float | int | bool], bool]:
    """Keep the entries with a string key and a finite number or bool value; report whether any was dropped."""
    clean: dict[str, float | int | bool] = {}
    dropped = False
    for key, value in raw.items():
        ok = isinstance(key, str) and (
            isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value))
        )
        if ok:
            clean[key] = value
        else:
            dropped = True
    return clean, dropped


def settings_from_dict(data: dict[str, Any]) -> tuple[Settings, list[str]]:
    """Build Settings from parsed JSON; returns the names of the keys that were invalid (and so defaulted)."""
    values: dict[str, Any] = {}
    invalid: list[str] = []
    for f in dataclasses.fields(Settings):
        if f.name not in data:
            continue
        value = data[f.name]
        if not VALIDATORS[f.name](value):
            invalid.append(f.name)
            continue
        if f.name == "chat_options":
            value, dropped = _clean_chat_options(value)
            if dropped:
                invalid.append(f.name)
        values[f.name] = value
    return Settings(**values), invalid


def settings_to_dict(settings: Settings) -> dict[str, Any]:
    data: dict[str, Any] = {"schema": SCHEMA_VERSION}
    data.update(dataclasses.asdict(settings))
    return data


# --- loading ------------------------------------------------------------------------------------------


def _backup_path(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.bad-{stamp}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bad-{stamp}-{n}")
        n += 1
    return candidate


def _prune_backups(path: Path) -> None:
    backups = sorted(path.parent.glob(f"{path.name}.bad-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in backups[KEEP_BACKUPS:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _keep_copy(path: Path, move: bool) -> Path:
    """Move (damaged file) or copy (partly valid file) the settings file aside; returns the backup path."""
    backup = _backup_path(path)
    if move:
        os.replace(path, backup)
    else:
        shutil.copy2(path, backup)
    with contextlib.suppress(OSError):
        _prune_backups(path)
    return backup


def load_settings(path: Path | None = None) -> tuple[Settings, str | None]:
    """Read the settings; never raises. Returns ``(settings, notice)``; notice is None when all was well."""
    path = path or settings_path()
    data: object = None
    problem = ""
    try:
        data = jsonfile.read_json(path, max_bytes=MAX_SETTINGS_BYTES)
    except jsonfile.JsonFileError as exc:
        if exc.missing:
            return Settings(), None
        if exc.kind == "unreadable":
            log.warning("Could not read settings file %s: %s", path, exc.detail)
            return Settings(), f"Your settings file could not be read ({exc.detail}); NPU Studio started with defaults."
        problem = exc.problem
    if not problem and not isinstance(data, dict):
        problem = "it does not hold a JSON object"

    if problem:
        log.warning("Settings file %s is damaged: %s", path, problem)
        try:
            backup = _keep_copy(path, move=True)
        except OSError as exc:
            return Settings(), (
                f"Your settings file was damaged ({problem}); NPU Studio started with defaults. "
                f"The damaged file could not be set aside ({exc.strerror or exc}) and is still at {path}."
            )
        return Settings(), (
            f"Your settings file was damaged; NPU Studio started with defaults and kept a copy at {backup}."
        )

    assert isinstance(data, dict)
    settings, invalid = settings_from_dict(data)
    if not invalid:
        return settings, None
    names = ", ".join(invalid)
    log.warning("Settings file %s has invalid values for: %s", path, names)
    try:
        backup = _keep_copy(path, move=False)
        where = f"; a copy of the old file is at {backup}"
    except OSError:
        where = ""
    return settings, f"Some settings were invalid ({names}) and were reset to their defaults{where}."


# --- saving -------------------------------------------------------------------------------------------


def _storage_error(action: str, path: Path, exc: OSError) -> StorageError:
    code = exc.errno
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return StorageError(
            f"Could not {action} {path}: the disk is full.",
            "Free some disk space and try again; your current settings are kept until then.",
        )
    if code in (errno.EROFS, errno.EACCES, errno.EPERM) or isinstance(exc, PermissionError):
        return StorageError(
            f"Could not {action} {path}: the folder is read-only or not writable.",
            "Check the folder's permissions (or set NPU_STUDIO_HOME to a writable folder) and try again.",
        )
    return StorageError(f"Could not {action} {path}: {exc.strerror or exc}.", "Try again.")


def _remove_stale_tmp_files(path: Path, keep: str) -> None:
    """Delete temporary files a crashed save left behind (old enough not to belong to a save in progress)."""
    now = time.time()
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        if tmp.name == keep:
            continue
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                tmp.unlink()


def _fsync_dir(folder: Path) -> None:
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write the settings atomically. Raises StorageError (disk full, read-only, ...); ``settings`` is untouched."""
    path = path or settings_path()
    try:
        payload = json.dumps(settings_to_dict(settings), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise StorageError(
            f"Could not save settings: a value cannot be stored ({exc}).",
            "Reset the offending setting and try again.",
        ) from exc
    data = payload.encode("utf-8")

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _storage_error("save settings to", path, exc) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise _storage_error("save settings to", path, exc) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)
    _remove_stale_tmp_files(path, keep=Path(tmp_name).name)
