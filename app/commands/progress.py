"""The commands' progress line on stderr and their Ctrl+C that cancels the work instead of killing it."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from app.terminal import write_raw
from engines import format_bytes


class Progress:
    """A progress line on stderr, at most a few updates a second."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.last = 0.0
        self.shown = False
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int, detail: str = "") -> None:
        now = time.monotonic()
        if now - self.last < (0.2 if self.tty else 5.0) and done < total:
            return
        self.last = now
        percent = f"{100 * done / total:5.1f}%" if total else ""
        line = f"{self.what}: {percent} {format_bytes(done)} of {format_bytes(total)} {detail}".rstrip()
        if self.tty:
            write_raw(sys.stderr, "\r")  # the redraw is ours; the line itself is escaped like any text
        print(line.ljust(79) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)
        self.shown = True

    def finish(self) -> None:
        if self.shown and self.tty:
            print(file=sys.stderr)


# After Ctrl+C, how long work that has not seen its cancel token yet (a model being tried in a child
# process, a native call) is given before it is interrupted: a command always stops within a second.
CTRL_C_GRACE_S = 0.25


def _interrupt_main() -> None:
    """Ctrl+C again, for the main thread: a real signal, so that a wait it is in (a sleep before a retry, a
    poll) ends at once instead of at its own time."""
    main = threading.main_thread().ident
    if hasattr(signal, "pthread_kill") and main is not None:
        signal.pthread_kill(main, signal.SIGINT)
    else:  # Windows: the signal's event wakes the main thread's waits
        signal.raise_signal(signal.SIGINT)


@contextmanager
def cancel_on_ctrl_c(grace_s: float = CTRL_C_GRACE_S) -> Iterator[Any]:
    """Ctrl+C sets the cancel token, so that the engine stops cleanly at the next chunk (and says what was
    kept). Work that has not stopped `grace_s` later is interrupted as a plain Ctrl+C would (every `finally`
    on the way runs: a trial's child is killed, a work folder removed); a second Ctrl+C does that at once."""
    from engines import CancelToken

    token = CancelToken()
    interrupt: list[threading.Timer] = []

    def on_ctrl_c(signum: int, frame: object) -> None:
        if token.cancelled:
            raise KeyboardInterrupt
        token.cancel()
        timer = threading.Timer(grace_s, _interrupt_main)
        timer.daemon = True
        interrupt.append(timer)
        timer.start()

    previous: Any = None
    try:
        previous = signal.signal(signal.SIGINT, on_ctrl_c)
    except ValueError:  # not the main thread
        previous = None
    try:
        yield token
    finally:
        for timer in interrupt:
            timer.cancel()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
