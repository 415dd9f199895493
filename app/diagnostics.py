"""What a diagnostics bundle holds besides the doctor's report, and what it keeps out (the CLI's `doctor`
and the Settings view's export share it).

Users attach the zip to public bug reports, so nothing in it is the user's own: the settings go in as the
schema's shareable copy (app/storage/settings_schema.py: free text, folders and anything not known to be safe
become placeholders), and every text in the zip (reports, logs, settings) passes through one Redactor
(engines/redaction.py) that knows this machine's home folder, user name, the app's folders, the values
of secret-looking environment variables, the conversation titles and every user-written string of the
settings file. `contents()` says what goes in, before anything is written.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app import paths
from app.storage.settings import MAX_SETTINGS_BYTES, Settings, settings_path, settings_to_dict
from app.storage.settings_schema import shareable_copy
from engines import JsonFileError, Redactor, environment_secrets, make_redactor, read_json

MAX_TITLES = 10_000


def contents() -> list[str]:
    """What the zip holds, one line each, and what is kept out (printed by `doctor`, shown by the app)."""
    return [
        "report.txt, report.json: the checks on every device (versions, devices, timings, errors)",
        "versions.json, devices.json: ONNX Runtime, its execution providers and the devices it sees",
        "logs/: the last MB of each NPU Studio log file",
        "settings.json: your settings, with the system prompt, folders, window layout and your own model names "
        "replaced by placeholders",
        "Not included: conversations, photos, models.",
        "Replaced everywhere: your home folder (~), your user name (<user>), NPU Studio's folders (<data>, ...), "
        "conversation titles, the values of secret-looking environment variables (TOKEN, KEY, ...) and "
        "anything shaped like an access token.",
    ]


def _raw_settings() -> dict[str, Any]:
    try:
        data = read_json(settings_path(), max_bytes=MAX_SETTINGS_BYTES)
    except JsonFileError:
        return {}
    return data if isinstance(data, dict) else {}


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _titles() -> list[str]:
    """The conversation titles, read-only (a missing or damaged database is not touched: no titles)."""
    db = paths.data_dir() / "conversations.db"
    if not db.is_file():
        return []
    with contextlib.suppress(sqlite3.Error):
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=2.0)
        try:
            rows = conn.execute("SELECT title FROM conversations LIMIT ?", (MAX_TITLES,)).fetchall()
        finally:
            conn.close()
        return [str(row[0]) for row in rows if isinstance(row[0], str)]
    return []


def _user_name() -> str:
    with contextlib.suppress(Exception):  # getpass fails without a passwd entry or a USER variable
        return getpass.getuser()
    return ""


def redactor() -> Redactor:
    """The redactor for this machine and this user, now."""
    raw = _raw_settings()
    shown = shareable_copy(raw, settings_to_dict(Settings()))
    public = set(_strings(shown))
    private = [text for text in _strings(raw) if text not in public]
    folders = {
        "<data>": str(paths.data_dir()), "<config>": str(paths.config_dir()), "<cache>": str(paths.cache_dir()),
        "<logs>": str(paths.log_dir()),
    }  # fmt: skip
    home = os.environ.get("NPU_STUDIO_HOME")
    if home:
        folders["<studio home>"] = home
    return make_redactor(
        home=str(Path.home()), user=_user_name(), folders=folders, texts=[*private, *_titles()],
        secrets=environment_secrets(os.environ),
    )


def attachments() -> dict[str, Path | str]:
    """The zip's files besides the reports: recent logs (cut and redacted when written) and the settings'
    shareable copy (no conversations, no models)."""
    found: dict[str, Path | str] = {}
    for log in sorted(paths.log_dir().glob("*.log*")):
        found[f"logs/{log.name}"] = log
    if settings_path().is_file():
        shown = shareable_copy(_raw_settings(), settings_to_dict(Settings()))
        found["settings.json"] = json.dumps(shown, indent=2, ensure_ascii=False) + "\n"
    return found
