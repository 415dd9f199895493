"""Which folder the app's classifier and chat model settings name, and the error when it is missing."""

from __future__ import annotations

from pathlib import Path

from app import paths
from engines.errors import ModelError


def model_folder(name: str) -> Path:
    """A model folder by name: the user's models first, then the bundled demo models (the one library
    lookup the CLI uses); a folder that does not exist when the model is not installed."""
    from engines.models.lookup import locate_model

    try:
        return locate_model(name, paths.model_roots()).folder
    except ModelError:
        return paths.bundled_models_dir() / name


def missing_model_error(name: str, kind: str) -> ModelError:
    return ModelError(
        f"The {kind} '{name}' is not installed (no folder {paths.bundled_models_dir() / name}).",
        "Build the demo models with `python assets/recipes/build_demo_models.py`, or reinstall NPU Studio.",
    )
