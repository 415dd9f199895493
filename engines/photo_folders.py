"""The one walk of a photo folder: the CLI's `classify`, the Classify view and quantize's calibration.

A folder is listed once (its sub-folders are not searched) and each entry is looked at on its own: a
photo, or a reason that entry is skipped (not a photo, a sub-folder, a link that loops or points to
nothing, a pipe or device, an entry that cannot be read). One bad entry never spoils the rest, and a
folder that cannot be listed at all is one problem of its own, said in one line. Files named directly
are kept as given (the classifier then says what is wrong with one). Photos come in natural order
(photo_2 before photo_10).

Pure Python over `os.scandir`: most entries' types come with the listing, without a `stat` each.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.text import printable
from engines.types import is_image_file

__all__ = [
    "FOLDER_UNREADABLE",
    "LINK_LOOP",
    "LINK_TO_NOTHING",
    "NOT_A_FILE",
    "NOT_A_PHOTO",
    "SUB_FOLDER",
    "UNREADABLE",
    "PhotoWalk",
    "Skipped",
    "natural_key",
    "walk_photos",
]

# Why an entry was skipped (the keys of the notes below).
NOT_A_PHOTO = "not a photo"
SUB_FOLDER = "sub-folder"
LINK_LOOP = "link loop"
LINK_TO_NOTHING = "link to nothing"
NOT_A_FILE = "not a file"
UNREADABLE = "unreadable"
FOLDER_UNREADABLE = "folder unreadable"

_WINDOWS_CANT_RESOLVE = 1921  # ERROR_CANT_RESOLVE_FILENAME: Windows' word for a loop of links
_SHOWN_NAMES = 3  # names listed per kind of skipped entry; the rest are counted


@dataclass(frozen=True)
class Skipped:
    """One entry the walk did not take, and why (`reason`: one of the kinds above; `detail`: the system's
    words, such as "permission denied", where there are some)."""

    path: str
    reason: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True)
class PhotoWalk:
    photos: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)

    def notes(self) -> list[str]:
        """One line per kind of skipped entry: "1 file skipped: not a photo", "2 links skipped: they loop
        (a.png, b.png)", "the folder /x cannot be read: permission denied"."""
        lines: list[str] = []
        for skipped in self.skipped:
            if skipped.reason == FOLDER_UNREADABLE:
                lines.append(f"the folder {_shown(skipped.path)} cannot be read: {skipped.detail}")
        for reason, (one, many, why) in _NOTES.items():
            group = [s for s in self.skipped if s.reason == reason]
            if not group:
                continue
            names = ", ".join(_shown(Path(s.path).name) for s in group[:_SHOWN_NAMES])
            more = f" and {len(group) - _SHOWN_NAMES} more" if len(group) > _SHOWN_NAMES else ""
            details = sorted({s.detail for s in group if s.detail})
            said = f"{why} ({'; '.join(details)})" if details else why
            listed = "" if reason == NOT_A_PHOTO else f": {names}{more}"
            lines.append(f"{len(group)} {one if len(group) == 1 else many} skipped: {said}{listed}")
        return lines

    def unreadable_folders(self) -> list[Skipped]:
        return [s for s in self.skipped if s.reason == FOLDER_UNREADABLE]


# reason -> (one, many, why)
_NOTES: dict[str, tuple[str, str, str]] = {
    NOT_A_PHOTO: ("file", "files", "not a photo"),
    SUB_FOLDER: ("sub-folder", "sub-folders", "sub-folders are not searched"),
    LINK_LOOP: ("link", "links", "a loop of links"),
    LINK_TO_NOTHING: ("link", "links", "it points to nothing"),
    NOT_A_FILE: ("entry", "entries", "not a file (a pipe, socket or device)"),
    UNREADABLE: ("entry", "entries", "cannot be read"),
}


def natural_key(path: str | os.PathLike[str]) -> tuple[Any, ...]:
    """astronaut_2 before astronaut_10: digits compare as numbers, letters without case."""
    name = Path(path).name
    return tuple(int(part) if part.isdigit() else part.casefold() for part in re.split(r"(\d+)", name))


def walk_photos(items: Iterable[str | os.PathLike[str]]) -> PhotoWalk:
    """The photos of `items` (files as given, folders expanded to the photos they hold) and every entry
    skipped on the way, with why."""
    photos: list[str] = []
    skipped: list[Skipped] = []
    for item in items:
        path = os.fspath(item)
        if _is_folder(path):
            found, problems = _walk_folder(path)
            photos.extend(sorted(found, key=natural_key))
            skipped.extend(sorted(problems, key=lambda s: natural_key(s.path)))
        else:
            photos.append(path)
    return PhotoWalk(tuple(photos), tuple(skipped))


def _is_folder(path: str) -> bool:
    try:
        return os.path.isdir(path)
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return False


def _walk_folder(folder: str) -> tuple[list[str], list[Skipped]]:
    photos: list[str] = []
    skipped: list[Skipped] = []
    try:
        listing = os.scandir(folder)
    except OSError as exc:
        return photos, [Skipped(folder, FOLDER_UNREADABLE, _said(exc))]
    with listing:
        entries = iter(listing)
        while True:
            try:
                entry = next(entries)
            except StopIteration:
                break
            except OSError as exc:  # the listing itself broke off (a disk error, a folder removed meanwhile)
                skipped.append(Skipped(folder, FOLDER_UNREADABLE, _said(exc)))
                break
            if entry.name.startswith("."):
                continue  # hidden files (and macOS' ._photo.jpg companions) are not photos
            kind = _kind(entry)
            if kind is None:
                photos.append(entry.path)
            else:
                skipped.append(Skipped(entry.path, *kind))
    return photos, skipped


def _kind(entry: os.DirEntry[str]) -> tuple[str, str] | None:
    """None for a photo, else (reason, detail)."""
    try:
        if entry.is_dir():
            return SUB_FOLDER, ""
        if entry.is_file():
            return None if is_image_file(entry.name) else (NOT_A_PHOTO, "")
        if entry.is_symlink():
            os.stat(entry.path)  # raises: the link leads nowhere, or round in a loop
            return LINK_TO_NOTHING, ""
        return NOT_A_FILE, ""
    except FileNotFoundError:
        return LINK_TO_NOTHING, ""
    except OSError as exc:
        if exc.errno == errno.ELOOP or getattr(exc, "winerror", None) == _WINDOWS_CANT_RESOLVE:
            return LINK_LOOP, ""
        return UNREADABLE, _said(exc)


def _said(exc: OSError) -> str:
    """The system's reason in lower case ("permission denied"), without the path it names."""
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def _shown(text: str) -> str:
    return printable(text, newlines=False)
