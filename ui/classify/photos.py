"""Which photos a request names: files as given, folders expanded to the photos they hold (natural
order), and every entry left out with the reason, so that nothing is skipped silently."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QImage, QImageReader

from engines import (
    FOLDER_UNREADABLE,
    LINK_LOOP,
    LINK_TO_NOTHING,
    NOT_A_FILE,
    NOT_A_PHOTO,
    SUB_FOLDER,
    UNREADABLE,
    walk_photos,
)


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


PASTED = "<bytes>"  # the path of a classification of pasted or dropped image data


@dataclass
class Expansion:
    """The photos to classify and the entries left out, each with its reason in words."""

    photos: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    notes: list[str] = field(default_factory=list)  # one line per kind, the CLI's words (engines/photo_folders.py)

    def said(self) -> str:
        """What was left out, in the CLI's words: "The folder /x cannot be read: permission denied; 1 file …"."""
        text = "; ".join(self.notes)
        return text[:1].upper() + text[1:]


_REASONS = {
    NOT_A_PHOTO: "not a photo",
    SUB_FOLDER: "a folder (folders inside are not searched)",
    LINK_LOOP: "a loop of links",
    LINK_TO_NOTHING: "a link to nothing",
    NOT_A_FILE: "not a file (a pipe, socket or device)",
    UNREADABLE: "could not be read",
    FOLDER_UNREADABLE: "the folder could not be read",
}


def expand_paths(paths: Iterable[str]) -> Expansion:
    """Files as given, folders expanded to the photos they hold (natural order, not recursive): the walk the
    CLI makes (engines/photo_folders.py), with every entry left out and why."""
    walk = walk_photos(paths)
    skipped = []
    for entry in walk.skipped:
        reason = tr(_REASONS.get(entry.reason, entry.reason))
        skipped.append((entry.path, f"{reason} ({entry.detail})" if entry.detail else reason))
    return Expansion(list(walk.photos), skipped, walk.notes())


def skipped_summary(skipped: list[tuple[str, str]]) -> str:
    """ "1 file skipped: not a photo" / "3 skipped: 2 not a photo, 1 a folder (…)"."""
    if not skipped:
        return ""
    reasons: dict[str, int] = {}
    for _, reason in skipped:
        reasons[reason] = reasons.get(reason, 0) + 1
    if len(reasons) == 1:
        reason = next(iter(reasons))
        head = tr("1 file skipped") if len(skipped) == 1 else tr("{n} files skipped").format(n=len(skipped))
        return f"{head}: {reason}"
    listed = ", ".join(f"{n} {reason}" for reason, n in reasons.items())
    return tr("{n} files skipped: {reasons}").format(n=len(skipped), reasons=listed)


def display_name(path: str) -> str:
    return tr("Pasted image") if path == PASTED else Path(path).name


def load_preview(path: str, longest: int = 900) -> QImage:
    """Read an image for display, decoded at reduced size when it is large."""
    reader = QImageReader(path)
    reader.setAutoTransform(True)
    size = reader.size()
    if size.isValid() and max(size.width(), size.height()) > longest:
        reader.setScaledSize(size.scaled(longest, longest, Qt.AspectRatioMode.KeepAspectRatio))
    return reader.read()
