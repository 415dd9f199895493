"""Which folder the app's classifier and chat model settings name, and the error when it is missing."""

from __future__ import annotations

from pathlib import Path

from app import paths
from engines import ModelError


def model_folder(name: str) -> Path:
    """A model folder by name: the user's models first, then the bundled demo models (the one library
    lookup the CLI uses); a folder that does not exist when the model is not installed."""
    from engines import locate_model

    try:
        return locate_model(name, paths.model_roots()).folder
    except ModelError:
        return paths.bundled_models_dir() / name


def missing_model_error(name: str, kind: str) -> ModelError:
    """Why the model `name` cannot be opened: its reference's files changed (engines/models/lookup.py
    says what changed), or it is not installed."""
    from engines import ReferenceChangedError, locate_model

    try:
        locate_model(name, paths.model_roots())
    except ReferenceChangedError as exc:
        return exc
    except ModelError:
        pass
    return ModelError(
        f"The {kind} '{name}' is not installed (no folder {paths.bundled_models_dir() / name}).",
        "Build the demo models with `python assets/recipes/build_demo_models.py`, or reinstall NPU Studio.",
    )
