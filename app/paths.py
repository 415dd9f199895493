"""Where things live: bundled read-only assets, and the user's config, data, cache and log folders.

`NPU_STUDIO_HOME` moves every user folder under one directory (tests, portable demos).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import platformdirs

APP_NAME = "NPU Studio"
APP_AUTHOR = "NPU Studio"


def assets_dir() -> Path:
    """Bundled assets: next to the frozen executable, or the source checkout's `assets/`."""
    override = os.environ.get("NPU_STUDIO_ASSETS")
    if override:
        return Path(override)
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        return Path(frozen_root) / "assets"
    return Path(__file__).resolve().parent.parent / "assets"


def bundled_models_dir() -> Path:
    """Read-only demo models built by `assets/recipes/build_demo_models.py` (or shipped by the MSI)."""
    override = os.environ.get("NPU_STUDIO_BUNDLED_MODELS")
    return Path(override) if override else assets_dir() / "models"


def _home() -> Path | None:
    home = os.environ.get("NPU_STUDIO_HOME")
    return Path(home) if home else None


def _user_dir(kind: str) -> Path:
    home = _home()
    if home is not None:
        path = home / kind
    else:
        getter = {
            "config": platformdirs.user_config_dir,
            "data": platformdirs.user_data_dir,
            "cache": platformdirs.user_cache_dir,
            "logs": platformdirs.user_log_dir,
        }[kind]
        path = Path(getter(APP_NAME, APP_AUTHOR))
    return _made(path)


def _made(path: Path) -> Path:
    """`path`, created when it can be. A read-only or full disk, or a file in the way, is not an error
    here: reading finds nothing there, and only what has to write (saving settings, importing a model,
    the compiled-model cache) fails, with its own message, or goes without (the CPU needs no cache)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if path not in _unwritable:
            _unwritable.add(path)
            logging.getLogger(__name__).info("cannot create %s: %s", path, exc.strerror or exc)
    return path


_unwritable: set[Path] = set()


def config_dir() -> Path:
    return _user_dir("config")


def data_dir() -> Path:
    return _user_dir("data")


def cache_dir() -> Path:
    return _user_dir("cache")


def log_dir() -> Path:
    return _user_dir("logs")


def user_models_dir() -> Path:
    """The user's model library. The first look at it in a process sweeps the work folders that killed
    commands left there (engines/workdirs.py): every command and view that uses the library comes here."""
    folder = _made(data_dir() / "models")
    if folder not in _swept:
        _swept.add(folder)
        from engines import sweep_work_folders

        sweep_work_folders(folder)
    return folder


_swept: set[Path] = set()


def compiled_cache_dir() -> Path:
    return _made(cache_dir() / "compiled")


def model_roots() -> list[Path]:
    """Where models are found by name: the user's library first, then the bundled models."""
    return [user_models_dir(), bundled_models_dir()]
