"""`python -m app` and the `npu-studio` entry point: the GUI by default, subcommands for the CLI."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    if getattr(sys, "frozen", False):  # the chat engine's child process in a frozen (installed) app
        import multiprocessing  # (~6 ms of start-up that every other run does without)

        multiprocessing.freeze_support()
    from app.cli import run

    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
