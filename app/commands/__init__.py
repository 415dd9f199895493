"""One module per CLI subcommand; each exposes `register(subparsers)` and sets `func` on its parser.

A command's `func(args)` returns the process exit code. It raises `StudioError` for anything the
user should read; `app.cli` turns that into one clear line and a non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Protocol

# Modules listed here are imported lazily by app.cli; a module that is not present yet is skipped.
COMMAND_MODULES = (
    "devices",
    "classify",
    "chat",
    "bench",
    "quantize",
    "doctor",
    "cache",
    "models",
    "serve",
)


class Subcommands(Protocol):
    """Where a command module's `register` adds its parser: app.cli's subcommands (each filled only when
    given), or a command's own subcommands (`models scan`)."""

    def add_parser(
        self, name: str, *, help: str | None = ..., description: str | None = ...
    ) -> argparse.ArgumentParser: ...


def load(name: str) -> object | None:
    try:
        return importlib.import_module(f"app.commands.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"app.commands.{name}":
            return None
        raise
