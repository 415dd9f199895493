"""The one reader for JSON files a user (or a model folder) can write: settings, manifests, genai
configs, cache sidecars, download state, benchmark history lines.

Such a file is untrusted. `read_json` refuses, with a `JsonFileError` that says why in plain words,
anything that would hang, exhaust memory or blow the stack instead of parsing:

- a file that is not a regular file (a FIFO blocks `open()` forever, a device never ends): it is
  opened with O_NONBLOCK and checked with `fstat` before a byte is read;
- a file larger than `max_bytes` (read at most `max_bytes + 1` bytes, never the whole thing);
- nesting deeper than `max_depth` (`[` x 50,000 raises RecursionError inside `json.loads`): the
  brackets are counted before parsing, and RecursionError / MemoryError are caught anyway;
- bytes that are not UTF-8, or text that is not JSON.

`JsonFileError.kind` tells "missing" (not there yet) from "unreadable" (permissions, I/O: the file may
be fine, leave it alone) from "damaged" (set it aside).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

DEFAULT_MAX_BYTES = 8 << 20  # a config, manifest or sidecar is KBs; a tokenizer_config with a template, < 1 MB
DEFAULT_MAX_DEPTH = 64  # the deepest real genai config nests ~6 levels
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class JsonFileError(ValueError):
    """A JSON file that cannot be used; `problem` says why (lower case, no trailing full stop)."""

    def __init__(self, path: Path, problem: str, *, kind: str = "damaged", detail: str = "") -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.kind = kind  # "missing", "unreadable" or "damaged"
        self.detail = detail  # for "unreadable": the system's reason

    @property
    def missing(self) -> bool:
        return self.kind == "missing"


def nesting_depth(text: str) -> int:
    """How deeply `text` nests arrays/objects (strings skipped); cheap: only brackets are visited."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def loads(text: str, *, max_depth: int = DEFAULT_MAX_DEPTH, where: Path | None = None) -> Any:
    """`json.loads` that never recurses past `max_depth` and never raises anything but JsonFileError."""
    path = where or Path("<text>")
    if nesting_depth(text) > max_depth:
        raise JsonFileError(path, f"it nests deeper than {max_depth} levels, far more than a real file does")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonFileError(path, f"it is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (RecursionError, MemoryError, ValueError) as exc:  # ValueError: huge int literals
        raise JsonFileError(path, f"it cannot be parsed ({type(exc).__name__})") from None


def read_bytes(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """At most `max_bytes` of a regular file; JsonFileError for anything else (never blocks on a FIFO)."""
    file = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(file, flags)
    except FileNotFoundError:
        raise JsonFileError(file, "the file does not exist", kind="missing") from None
    except RecursionError:
        raise JsonFileError(file, "its path is a loop of links") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise JsonFileError(file, f"it cannot be read ({reason})", kind="unreadable", detail=reason) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):  # someone's folder: never "set aside" by the caller
            raise JsonFileError(file, "it is a folder, not a file", kind="unreadable", detail="it is a folder")
        if not stat.S_ISREG(info.st_mode):
            raise JsonFileError(file, "it is not a regular file (a pipe or a device)")
        if info.st_size > max_bytes:
            raise JsonFileError(file, f"it is {info.st_size:,} bytes, far larger than such a file can be")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise JsonFileError(file, f"it cannot be read ({reason})", kind="unreadable", detail=reason) from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise JsonFileError(file, "it grew past the size such a file can be while it was read")
    return b"".join(chunks)


def read_json(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH
) -> Any:
    """The parsed content of the JSON file at `path`; JsonFileError (with the reason) for anything else."""
    file = Path(path)
    raw = read_bytes(file, max_bytes=max_bytes)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JsonFileError(file, f"it is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return loads(text, max_depth=max_depth, where=file)


def read_object(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH
) -> dict[str, Any]:
    """`read_json` for files that must hold one JSON object."""
    data = read_json(path, max_bytes=max_bytes, max_depth=max_depth)
    if not isinstance(data, dict):
        raise JsonFileError(Path(path), f"it holds a JSON {type(data).__name__}, not an object")
    return data
