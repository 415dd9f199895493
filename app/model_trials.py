"""Which models are tried in a bounded child process before they run here (engines/models/trial.py)."""

from __future__ import annotations

from app import paths


def configure(*, in_child: bool = False) -> None:
    """The bundled demo models are ours; every other model is tried once and the verdict kept in the
    cache folder. Each process that opens models calls this (the CLI and app at start, the chat
    engine's child process).

    The chat engine child (engines/chat/bounded.py) starts no children of its own: its parent tries an
    untrusted chat model before asking the child to load it (engines/chat/watch.py), so the child tries
    nothing."""
    from engines import configure_trials

    configure_trials(trusted=[paths.bundled_models_dir()], verdicts=paths.cache_dir() / "model-trials.json",
                    enabled=not in_child)
