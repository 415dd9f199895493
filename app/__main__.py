"""`python -m app` and the `npu-studio` entry point: the GUI by default, subcommands for the CLI."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import multiprocessing

    multiprocessing.freeze_support()  # the chat engine's child process in a frozen (installed) app
    from app.cli import run

    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
