"""The one rule for names NPU Studio creates on disk: model folders, export files, download and quantize
folders. They are checked against Windows' rules on every platform, because a model library or an export
made on Linux or macOS is copied to Windows, and because the same code runs there:

- a device name Windows reserves (CON, PRN, AUX, NUL, COM0-9, LPT0-9, also with the superscript digits
  and CONIN$ / CONOUT$), in any case, alone or before an extension (``nul.onnx`` is the NUL device);
- a trailing dot or space (Windows drops them: ``x.`` would silently become ``x``);
- the characters ``< > : " / \\ | ? *`` and control characters;
- more than 255 bytes in one component (the limit of NTFS, ext4 and APFS alike);
- a path longer than 259 characters, where Windows applies MAX_PATH (`path_length_problem`);
- two names that differ only in case (one folder on Windows and macOS: `case_collision`).

`name_problem` says which rule a name breaks, in words a user can act on; `safe_name` turns any text (a
conversation title, a catalog id) into a name that breaks none. Pure Python.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable

MAX_COMPONENT_BYTES = 255
MAX_PATH = 260  # Windows' MAX_PATH counts the terminating NUL: 259 characters are usable
# Paths NPU Studio creates on Windows are held to MAX_PATH (long paths are off by default there, and native
# libraries open model files with the short limit); elsewhere only each component's rules apply.
PATH_LENGTH_MATTERS = os.name == "nt"

_DIGITS = "0123456789\u00b9\u00b2\u00b3"
RESERVED = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"} | {f"{p}{d}" for p in ("COM", "LPT") for d in _DIGITS}
)
FORBIDDEN = '<>:"/\\|?*'
_CONTROL = re.compile("[\x00-\x1f]")


def reserved_stem(name: str) -> str:
    """The reserved device name `name` stands for on Windows ("" when none): the part before the first dot,
    trailing spaces dropped, in any case."""
    stem = name.split(".", 1)[0].rstrip(" ").upper()
    return stem if stem in RESERVED else ""


def name_problem(name: str, what: str = "name") -> str:
    """The first of Windows' rules that `name` (one path component) breaks, as a sentence fragment
    ("'nul' is ..."); "" when it breaks none."""
    shown = name if len(name) <= 60 else name[:57] + "..."
    shown = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", shown)
    if not name or name in (".", ".."):
        return f"'{shown}' is not a valid {what}: it must not be empty, '.' or '..'"
    control = _CONTROL.search(name)
    if control:
        return f"'{shown}' is not a valid {what}: it holds a control character (\\x{ord(control.group()):02x})"
    bad = sorted({ch for ch in name if ch in FORBIDDEN})
    if bad:
        return f"'{shown}' is not a valid {what}: Windows does not allow {' '.join(bad)} in a name"
    if name[-1] in ". ":
        ending = "a dot" if name[-1] == "." else "a space"
        return (f"'{shown}' is not a valid {what}: it ends with {ending}, which Windows drops "
                f"(the name would become '{name.rstrip('. ')}')")
    device = reserved_stem(name)
    if device:
        return (f"'{shown}' is not a valid {what}: {device} is a device name Windows reserves (CON, PRN, AUX, "
                "NUL, COM0-9, LPT0-9), with or without an extension")
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_COMPONENT_BYTES:
        return (f"'{shown}' is not a valid {what}: it is {size} bytes long, more than the "
                f"{MAX_COMPONENT_BYTES} a name may be")
    return ""


def path_length_problem(path: str | os.PathLike[str], what: str = "path") -> str:
    """The MAX_PATH rule where it matters (paths created on Windows); "" elsewhere or when it fits."""
    text = os.fspath(path)
    if PATH_LENGTH_MATTERS and len(text) >= MAX_PATH:
        return (f"the {what} {text[:40]}... is {len(text)} characters long; Windows opens paths of at most "
                f"{MAX_PATH - 1}")
    return ""


def case_collision(name: str, existing: Iterable[str]) -> str:
    """The existing name that is `name` on a case-insensitive disk (Windows, macOS) but not the same
    string; "" when there is none."""
    folded = _fold(name)
    return next((other for other in existing if other != name and _fold(other) == folded), "")


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def safe_name(text: str, *, suffix: str = "", fallback: str = "untitled", max_bytes: int = 120) -> str:
    """`text` made into a file or folder name that breaks none of the rules, plus `suffix` (".md"):
    forbidden and control characters become "_", runs of white space one space, trailing dots and spaces
    go, a reserved device name gets "_" appended, and the name is cut to `max_bytes` (UTF-8, whole
    characters). Empty results are `fallback`."""
    cleaned = "".join("_" if ch in FORBIDDEN or ord(ch) < 32 else ch for ch in text)
    cleaned = " ".join(cleaned.split())
    cleaned = "".join(ch for ch in cleaned if not 0xD800 <= ord(ch) <= 0xDFFF)  # lone surrogates: not encodable
    budget = max(1, min(max_bytes, MAX_COMPONENT_BYTES) - len(suffix.encode("utf-8")))
    while len(cleaned.encode("utf-8")) > budget:
        cleaned = cleaned[:-1]
    cleaned = cleaned.strip(" .") or fallback
    if reserved_stem(cleaned + suffix):  # "CON" -> "CON_", "nul.tar" -> "nul_.tar"
        head, dot, rest = cleaned.partition(".")
        cleaned = f"{head.rstrip(' ')}_{dot}{rest}"
    return cleaned + suffix


def default_path(folder: str | os.PathLike[str], text: str, *, suffix: str, fallback: str = "untitled") -> str:
    """The path a save dialog offers: `safe_name(text)` in `folder`, cut so that the whole path fits in
    Windows' MAX_PATH (on every platform: the name is only a suggestion)."""
    base = os.fspath(folder)
    room = MAX_PATH - 2 - len(base)  # the separator and the terminating NUL
    name = safe_name(text, suffix=suffix, fallback=fallback, max_bytes=max(len(suffix) + 8, min(120, room)))
    return os.path.join(base, name)
