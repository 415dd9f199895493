"""`python -m app` and the `npu-studio` entry point: the GUI by default, subcommands for the CLI."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    if getattr(sys, "frozen", False):  # the chat engine's child process in a frozen (installed) app
        import multiprocessing  # (~6 ms of start-up that every other run does without)

        multiprocessing.freeze_support()
    from app.cli import ran_a_command, run

    code = run(sys.argv[1:] if argv is None else argv)
    if argv is None and ran_a_command():
        leave(code)
    return code


def leave(code: int) -> None:
    """End a command's process now that its work is done and said: the steps of Python's own shutdown that
    can matter (other threads joined, `atexit` handlers run, the standard streams flushed), then `os._exit`,
    without the rest: freeing every module and the native teardown of ONNX Runtime and the plugin EPs,
    35-60 ms of a 200 ms `npu-studio devices` (tests/bench/bench_cli_start.py). Returns (and the process
    ends the usual way) when one of those steps fails, a lost output among them."""
    import atexit
    import os
    import threading

    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter's own exit does first
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BaseException:  # the usual exit reports it as it always did
        return
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
