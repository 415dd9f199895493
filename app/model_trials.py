"""Which models are tried in a bounded child process before they run here (engines/models/trial.py)."""

from __future__ import annotations

from app import paths


def configure(*, in_child: bool = False) -> None:
    """The bundled demo models are ours; every other model is tried once and the verdict kept in the
    cache folder. Each process that opens models calls this (the CLI and app at start, the chat
    engine's child process).

    The app's chat engine child (app/chat_process.py) is already the bounded process for the chat model:
    a crash there is an error in the view, and it cannot start children of its own (it is a daemon
    process), so it tries nothing and only reads the verdicts."""
    from engines.models import trial

    trial.configure(trusted=[paths.bundled_models_dir()], verdicts=paths.cache_dir() / "model-trials.json",
                    enabled=not in_child)
