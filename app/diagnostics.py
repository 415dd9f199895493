"""What a diagnostics bundle attaches besides the doctor's report (the CLI's `doctor` and the Settings
view's export share it)."""

from __future__ import annotations

from pathlib import Path

from app import paths


def attachments() -> dict[str, Path]:
    """Files for the zip: recent logs and the settings (no conversations, no models)."""
    found: dict[str, Path] = {}
    for log in sorted(paths.log_dir().glob("*.log*")):
        found[f"logs/{log.name}"] = log
    settings = paths.config_dir() / "settings.json"
    if settings.is_file():
        found["settings.json"] = settings
    return found
