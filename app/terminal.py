"""The CLI's output channels: every write to stdout and stderr goes through here, for every command.

Three rules, one place:

- Text from elsewhere cannot drive the terminal. Every text-mode write goes through
  `engines.text.printable`: a label, a model name, a file name, a streamed chat token or an error message
  that quotes any of them cannot move the cursor, retitle the window or write the clipboard. The few
  writes that are the CLI's own control (a progress line redrawn with a carriage return) go through
  `write_raw`.
- Machine output is UTF-8 whatever the locale; human output never fails on a character. `print_json` and
  `write_machine` (JSON, CSV) switch stdout to UTF-8 first (a redirect on Windows is otherwise in the ANSI
  code page, cp1252 or cp932), so a script reads the same bytes on every machine. Text for a person on a
  console that cannot show a character degrades it (an em dash becomes `-`, anything else a `\\uXXXX`
  escape) instead of stopping the command with a `UnicodeEncodeError`.
- An output that goes away ends the command as any Unix tool ends, and is never mistaken for a failure
  of the work. A write that fails (`| head` closed the pipe, `> /dev/full` filled up) raises `OutputLost`,
  a BaseException like KeyboardInterrupt, so that no `except Exception` on the way (an engine that would
  call it a device failure) takes it for an error of its own; `app.cli.run` then ends the command
  quietly for a closed pipe, with one line for anything else (`ended_by`).
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import os
import sys
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, Protocol, TypeVar

from engines import printable

EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for a Unix tool whose reader went away
EXIT_OUTPUT_FAILED = 1

_T = TypeVar("_T")

# What a console that cannot show a character gets instead, for the characters NPU Studio's own text uses.
_PLAIN = {
    "\u2014": "-", "\u2013": "-", "\u2212": "-", "\u2026": "...", "\u00b7": "-", "\u2022": "*", "\u00d7": "x",
    "\u2192": "->", "\u2190": "<-", "\u2265": ">=", "\u2264": "<=", "\u2248": "~", "\u00a0": " ",
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2713": "v", "\u2717": "x",
}  # fmt: skip
_DEGRADE = "npu-studio.degrade"


def _degrade(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    chunk = error.object[error.start : error.end]
    plain = "".join(_PLAIN.get(c) or (f"\\x{ord(c):02x}" if ord(c) <= 0xFF else f"\\u{ord(c):04x}") for c in chunk)
    return plain, error.end


codecs.register_error(_DEGRADE, _degrade)


@lru_cache(maxsize=16)
def _is_utf(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


class OutputLost(BaseException):  # a BaseException: not an error of the work, the reader went away
    """stdout or stderr cannot be written any more (see the module's docstring)."""

    def __init__(self, stream: str, error: OSError, target: Any = None) -> None:
        super().__init__(f"{stream}: {error.strerror or error}")
        self.stream = stream  # "stdout" or "stderr"
        self.error = error
        self.target = target  # the stream object that failed

    @property
    def closed(self) -> bool:
        """The reader went away (a closed pipe), as opposed to an output that failed (a full disk)."""
        if isinstance(self.error, BrokenPipeError) or self.error.errno == errno.EPIPE:
            return True
        return os.name == "nt" and self.error.errno == errno.EINVAL  # Windows' word for a closed pipe


def _guarded(stream: str, target: Any, write: Callable[..., _T], *args: Any) -> _T:
    try:
        return write(*args)
    except OSError as exc:
        raise OutputLost(stream, exc, target) from exc


class _TextOut(Protocol):
    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class SafeStream:
    """A text stream that shows control characters as visible escapes, degrades what its encoding cannot
    show, and turns a failed write into `OutputLost`."""

    def __init__(self, inner: _TextOut, name: str = "stdout") -> None:
        self.inner = inner
        self.name = name

    def write(self, text: str) -> int:
        safe = printable(text)
        encoding = getattr(self.inner, "encoding", None) or "utf-8"
        if not _is_utf(encoding):  # e.g. a cp1252 or Latin-1 console: what it cannot show degrades
            safe = safe.encode(encoding, _DEGRADE).decode(encoding)
        _guarded(self.name, self.inner, self.inner.write, safe)
        return len(text)

    def write_raw(self, text: str) -> None:
        _guarded(self.name, self.inner, self.inner.write, text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        _guarded(self.name, self.inner, self.inner.flush)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer, reconfigure...
        return getattr(self.inner, name)


def write_raw(stream: Any, text: str) -> None:
    """Write the CLI's own control text (a carriage return) past the escaping."""
    raw = getattr(stream, "write_raw", None)
    if callable(raw):
        raw(text)
    else:
        stream.write(text)


class _Closed(io.TextIOBase):
    """What a command started with stdout or stderr closed (`>&-`) writes to: stdout's output is lost (one
    line says so), stderr's text has nowhere to go and is dropped."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def write(self, text: str) -> int:
        if self.name == "stdout":
            raise OutputLost("stdout", OSError(errno.EBADF, "stdout is closed"))
        return len(text)


@contextlib.contextmanager
def safe_terminal() -> Iterator[None]:
    """stdout and stderr follow this module's rules for the duration of a command."""
    out, err = sys.stdout, sys.stderr
    wrapped: list[Any] = [
        stream if isinstance(stream, SafeStream) else SafeStream(stream or _Closed(name), name)
        for stream, name in ((out, "stdout"), (err, "stderr"))
    ]
    sys.stdout, sys.stderr = wrapped
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def write_machine(text: str) -> None:
    """Write output that programs read (JSON, CSV) to stdout as UTF-8, whatever the locale."""
    stream = sys.stdout
    inner = getattr(stream, "inner", stream) or _Closed("stdout")
    _guarded("stdout", inner, inner.flush)
    if not _is_utf(getattr(inner, "encoding", None) or "utf-8"):
        reconfigure = getattr(inner, "reconfigure", None)
        if callable(reconfigure):
            reconfigure(encoding="utf-8", errors="strict")
    _guarded("stdout", inner, inner.write, text)
    _guarded("stdout", inner, inner.flush)


def print_json(data: Any) -> None:
    """Print `data` as JSON, whole and in UTF-8: it is serialized before the first byte is written, so a
    value that cannot be written never leaves half a document behind."""
    from engines import json_text

    write_machine(json_text(data) + "\n")


def finish() -> None:
    """Flush what is still buffered for stdout, so that a failure shows here, inside the command, and not
    as Python's "Exception ignored" at exit."""
    if sys.stdout is not None:
        _guarded("stdout", getattr(sys.stdout, "inner", sys.stdout), sys.stdout.flush)


def ended_by(lost: OutputLost) -> int:
    """End a command whose output went away: quietly when the reader closed the pipe (`| head`), with one
    line on stderr when the output failed (a full disk), and never with Python's complaint at exit."""
    _silence(lost.target)
    if not lost.closed and lost.stream == "stdout":
        with contextlib.suppress(OSError, ValueError, OutputLost):
            print(f"npu-studio: error: the output could not be written ({_said(lost.error)}); "
                  "nothing more was written.", file=sys.stderr, flush=True)  # fmt: skip
    return EXIT_OUTPUT_CLOSED if lost.closed else EXIT_OUTPUT_FAILED


def _said(error: OSError) -> str:
    text = error.strerror or type(error).__name__
    return text[:1].lower() + text[1:]


def _silence(target: Any) -> None:
    """Point the lost stream's descriptor at the null device: what Python still holds for it is dropped at
    exit instead of failing again (a stream without a descriptor, such as a test's capture, is left be)."""
    if target is None:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, target.fileno())
        finally:
            os.close(null)
