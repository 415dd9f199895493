"""Finding the model folders other local-AI tools keep (`npu-studio models scan`, the Models view's
"On this machine").

The walk is read-only and bounded: breadth first from each place (`engines.models.places`), at most
`max_depth` folders deep, `max_entries` directory entries per place, `max_dir_entries` per folder and
`seconds` in all. It never follows a link out of the place it walks, never enters a folder twice (a
loop of links ends there), never opens a file that is not a regular file, and never loads a model:
the folders it finds are described from their small files (`engines.models.found`), and what each
is and whether this machine can run it is said there. Pure Python.
"""

from __future__ import annotations

import os
import stat
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.models.found import DOWNLOADING, GENAI_CONFIG, HF_CONFIG, BrokenFolder, Candidate, ScanLimits
from engines.models.found_kinds import describe
from engines.models.manifest import MANIFEST_NAME
from engines.models.places import Place
from engines.types import CancelToken


@dataclass
class PlaceReport:
    place: Place
    exists: bool = False
    entries: int = 0
    folders: int = 0
    stopped: str = ""  # why the walk of this place stopped early ("" when it did not)
    links_skipped: int = 0  # links to folders outside the place
    loops_skipped: int = 0  # folders reached a second time (a loop of links, or the same folder twice)
    crowded: int = 0  # folders whose listing was cut at max_dir_entries
    unreadable: int = 0
    downloading: int = 0  # Foundry Local folders still downloading

    def as_dict(self) -> dict[str, Any]:
        return {**self.place.as_dict(), "exists": self.exists, "entries": self.entries, "folders": self.folders,
                "stopped": self.stopped, "links_skipped": self.links_skipped, "loops_skipped": self.loops_skipped,
                "crowded": self.crowded, "unreadable": self.unreadable, "downloading": self.downloading}  # fmt: skip


@dataclass
class Walk:
    """State shared by the walks of one scan: the deadline, the folders already entered, the cancel."""

    limits: ScanLimits
    deadline: float
    cancel: CancelToken | None = None
    seen: set[tuple[int, int]] = field(default_factory=set)

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.cancelled


def _kind(names: set[str]) -> str:
    if GENAI_CONFIG in names:
        return "chat"
    has_onnx = "onnx" in names or any(n.lower().endswith(".onnx") for n in names)
    if MANIFEST_NAME in names or (HF_CONFIG in names and has_onnx):
        return "vision"
    return ""


def _allowed(place: Place, depth: int, name: str) -> bool:
    """Which sub-folders the walk enters: never hidden ones; in a hub cache only models--*/snapshots/*."""
    if name.startswith("."):
        return False
    if place.hub_cache:
        if depth == 0:
            return name.startswith("models--")
        if depth == 1:
            return name == "snapshots"
    return True


def walk_place(place: Place, walk: Walk, found: list[Candidate]) -> PlaceReport:
    """Breadth first through `place`, adding the model folders it holds to `found`."""
    report = PlaceReport(place)
    try:
        root_real = Path(os.path.realpath(place.path))
        report.exists = root_real.is_dir()
    except (OSError, ValueError):
        return report
    if not report.exists:
        return report
    queue: deque[tuple[Path, int]] = deque([(place.path, 0)])
    while queue:
        if walk.cancelled():
            report.stopped = "cancelled"
            break
        if walk.out_of_time():
            report.stopped = f"out of time ({walk.limits.seconds:.0f} s for the whole scan)"
            break
        folder, depth = queue.popleft()
        try:
            info = os.stat(folder)
        except OSError:
            report.unreadable += 1
            continue
        if (info.st_dev, info.st_ino) in walk.seen:
            report.loops_skipped += 1
            continue
        walk.seen.add((info.st_dev, info.st_ino))
        report.folders += 1
        entries, listed_all = _list(folder, walk.limits.max_dir_entries, report)
        report.entries += len(entries)
        if not listed_all:
            report.crowded += 1
        names = {name for name, _ in entries}
        kind = _kind(names)
        if DOWNLOADING in names:
            report.downloading += 1
            continue
        if kind and len(found) < walk.limits.max_models:
            found.append(Candidate(folder, kind, place))
            if kind == "chat" or MANIFEST_NAME in names:
                continue  # a model folder is a leaf: its parts are not models of their own
        if report.entries >= walk.limits.max_entries:
            report.stopped = f"more than {walk.limits.max_entries:,} entries"
            break
        if depth >= place.max_depth:
            continue
        for name, is_link in entries:
            child = folder / name
            if not _allowed(place, depth, name) or not _is_dir(child):
                continue
            if is_link and not _inside(child, root_real):
                report.links_skipped += 1
                continue
            queue.append((child, depth + 1))
    return report


def _list(folder: Path, limit: int, report: PlaceReport) -> tuple[list[tuple[str, bool]], bool]:
    """(name, is a link) for up to `limit` entries of `folder`, and whether that was all of them."""
    out: list[tuple[str, bool]] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if len(out) >= limit:
                    return out, False
                try:
                    out.append((entry.name, entry.is_symlink()))
                except OSError:
                    continue
    except OSError:
        report.unreadable += 1
    return out, True


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _inside(path: Path, root_real: Path) -> bool:
    try:
        real = Path(os.path.realpath(path))
    except (OSError, ValueError):
        return False
    return real == root_real or real.is_relative_to(root_real)


@dataclass
class ScanReport:
    """What one scan found: the model folders (`engines.models.found.FoundModel`), the folders that look
    like models but cannot be read, and how each place went."""

    models: list[Any]
    broken: list[Any]
    places: list[PlaceReport]
    seconds: float
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "models": [m.as_dict() for m in self.models],
            "broken": [b.as_dict() for b in self.broken],
            "places": [p.as_dict() for p in self.places],
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
            "loaded_models": 0,  # the scan reads small files only: it never loads a model
        }


def scan(
    places: Iterable[Place],
    limits: ScanLimits | None = None,
    *,
    cancel: CancelToken | None = None,
    judge: Callable[[Any], Any] | None = None,
    notes: Iterable[str] = (),
) -> ScanReport:
    """Walk `places` (in order) and describe every model folder found; `judge(found)` (see
    engines.models.here) says whether this machine can run each."""
    limits = limits or ScanLimits()
    started = time.monotonic()
    walk = Walk(limits, started + limits.seconds, cancel)
    candidates: list[Candidate] = []
    reports = [walk_place(place, walk, candidates) for place in places]
    order = {id(report.place): index for index, report in enumerate(reports)}
    candidates.sort(key=lambda c: (order.get(id(c.place), 0), str(c.folder)))  # not the file system's order
    models: list[Any] = []
    broken: list[Any] = []
    for candidate in candidates:
        if walk.cancelled():
            break
        described = describe(candidate, limits)
        if isinstance(described, BrokenFolder):
            broken.append(described)
        elif described is not None:
            models.append(judge(described) if judge is not None else described)
    return ScanReport(models, broken, reports, time.monotonic() - started, list(notes))
