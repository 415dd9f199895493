"""User settings: one JSON file under the config folder, read forgivingly and written safely.

Reading never fails: a missing file gives the defaults; a damaged file (not JSON, not an object, too
large) is set aside as ``settings.json.bad-<timestamp>`` and the defaults are used; an invalid value
(app/storage/settings_schema.py, the one schema) is named in the notice and ignored, its default used. Each case
returns a readable notice, which the app shows as a banner and the CLI as one line on stderr.

The user's file is never overwritten without keeping the original: a save writes only the settings this
process changed (`since`: the values it read or last saved), under the file's lock, over what the file
holds at that moment. Invalid values and keys this version does not know stay in the file as they are
(the user can still fix a typo; a newer version's settings survive an older one), and another process's
changes are not undone by a stale copy. When a save does replace an invalid value (the user changed that
setting), the old file is first copied to ``settings.json.bad-<timestamp>``.

Writing is atomic (engines/shared_files.py: unique temporary file, fsync, ``os.replace``), so a crash at any
moment leaves the old or the new file, never half of one. A read-only or full disk raises
:class:`StorageError`; the caller's ``Settings`` object is not touched, so a retry works.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import json
import logging
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app import paths
from app.storage.settings_schema import SCHEMA, clean_values
from engines import (
    JsonFileError,
    StorageError,
    locked_file,
    read_json,
    set_aside,
    set_aside_name,
    write_atomically,
)

log = logging.getLogger(__name__)

SETTINGS_FILE_NAME = "settings.json"
SCHEMA_VERSION = 1
MAX_SETTINGS_BYTES = 1 << 20  # a settings file is a few KB; anything near this size is not ours
KEEP_BACKUPS = 5


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
    serve_on_start: bool = False  # the Server place starts the OpenAI-compatible server with the app
    serve_port: int = 6780  # app.server.DEFAULT_PORT; 0: a free port each time
    serve_api_key: str = ""  # "": none (the app's server listens on 127.0.0.1 only)
    model_folders: list[str] = field(default_factory=list)  # where `models scan` also looks for models


def settings_path() -> Path:
    return paths.config_dir() / SETTINGS_FILE_NAME


# --- validation (app/storage/settings_schema.py) ---------------------------------------------------------------


def settings_from_dict(data: dict[str, Any]) -> tuple[Settings, list[str]]:
    """Settings from parsed JSON and one problem per invalid value ("theme: must be one of ...");
    each invalid value is left at its default."""
    values, problems = clean_values(data)
    return Settings(**values), problems


def settings_to_dict(settings: Settings) -> dict[str, Any]:
    data: dict[str, Any] = {"schema": SCHEMA_VERSION}
    data.update(dataclasses.asdict(settings))
    return data


# --- loading ------------------------------------------------------------------------------------------

_SAID = {"file_only": True}  # the notice says it (banner, CLI line): the log file keeps it, the console not twice


def _prune_backups(path: Path) -> None:
    backups = sorted(path.parent.glob(f"{path.name}.bad-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in backups[KEEP_BACKUPS:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _keep_copy(path: Path, move: bool) -> Path:
    """Move (damaged file) or copy (a file whose invalid value is about to be replaced) the settings file
    aside; returns the backup path."""
    if move:
        backup = set_aside(path)
    else:
        backup = set_aside_name(path)
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
        data = read_json(path, max_bytes=MAX_SETTINGS_BYTES)
    except JsonFileError as exc:
        if exc.missing:
            return Settings(), None
        if exc.kind == "unreadable":
            log.warning("Could not read settings file %s: %s", path, exc.detail, extra=_SAID)
            return Settings(), f"Your settings file could not be read ({exc.detail}); NPU Studio started with defaults."
        problem = exc.problem
    if not problem and not isinstance(data, dict):
        problem = "it does not hold a JSON object"

    if problem:
        log.warning("Settings file %s is damaged: %s", path, problem, extra=_SAID)
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
    log.warning("Settings file %s has invalid values: %s", path, "; ".join(invalid), extra=_SAID)
    return settings, (
        f"Some settings in {path} are invalid and were ignored (the defaults are used): {'; '.join(invalid)}. "
        "The file is kept as it is: fix or remove these values."
    )


_reported: set[Path] = set()


def settings_for_command(path: Path | None = None) -> Settings:
    """The settings for a CLI command; a notice (invalid values, a damaged file) is one line on stderr,
    once per process."""
    path = path or settings_path()
    settings, notice = load_settings(path)
    if notice and path not in _reported:
        _reported.add(path)
        print(f"npu-studio: settings: {notice}", file=sys.stderr)
    return settings


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


def _current_file(path: Path) -> dict[str, Any]:
    """What the settings file holds now ({} when missing; a damaged file is set aside first)."""
    try:
        data = read_json(path, max_bytes=MAX_SETTINGS_BYTES)
    except JsonFileError as exc:
        if exc.missing:
            return {}
        if exc.kind == "unreadable":
            raise OSError(errno.EACCES, exc.detail) from None
        data = None
    if not isinstance(data, dict):
        _keep_copy(path, move=True)
        return {}
    return data


def _merged(
    current: Mapping[str, Any], settings: Settings, since: Settings | None
) -> tuple[dict[str, Any], list[str]]:
    """(the file to write: `current` with the settings changed since `since` replaced, the names of the
    invalid values that replaces)."""
    ours = dataclasses.asdict(settings)
    before = dataclasses.asdict(since) if since is not None else None
    changed = [name for name in ours if before is None or ours[name] != before[name]]
    merged = dict(current)
    replaced_invalid = [name for name in changed if name in current and SCHEMA[name].problem(current[name])]
    for name in changed:
        merged[name] = ours[name]
    merged["schema"] = SCHEMA_VERSION
    return merged, replaced_invalid


def save_settings(settings: Settings, path: Path | None = None, *, since: Settings | None = None) -> None:
    """Write the settings changed since `since` (every setting when None) over what the file holds now,
    atomically and under its lock. Raises StorageError (disk full, read-only, ...); ``settings`` is untouched."""
    path = path or settings_path()
    try:
        json.dumps(dataclasses.asdict(settings), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StorageError(
            f"Could not save settings: a value cannot be stored ({exc}).",
            "Reset the offending setting and try again.",
        ) from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with locked_file(path):
            merged, replaced_invalid = _merged(_current_file(path), settings, since)
            if replaced_invalid:
                backup = _keep_copy(path, move=False)
                log.info("settings %s replaced invalid values (%s); the old file is at %s",
                         path, ", ".join(replaced_invalid), backup)
            payload = json.dumps(merged, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"
            write_atomically(path, payload.encode("utf-8"))
    except OSError as exc:
        raise _storage_error("save settings to", path, exc) from exc
    except (TypeError, ValueError) as exc:  # a value in the file this version cannot write back
        raise StorageError(f"Could not save settings to {path}: {exc}.", "Remove the value and try again.") from exc


def snapshot(settings: Settings) -> Settings:
    """A copy to pass as `since` later (chat_options is a dict: a shallow copy would share it)."""
    return copy.deepcopy(settings)
