"""What wheels write, read from their RECORD files: which distribution owns each installed path, and
where two distributions would write the same file (pip does not warn; the second silently wins)."""

from __future__ import annotations

import ast
import csv
import io
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WheelRecord:
    wheel: str  # file name
    distribution: str  # canonical project name
    paths: frozenset[str]  # installed paths relative to site-packages (".data/purelib|platlib" mapped)

    def top_level(self) -> frozenset[str]:
        return frozenset(p.split("/", 1)[0] for p in self.paths if "/" in p and not p.split("/", 1)[0].endswith(
            (".dist-info", ".data")
        ))


def _installed_path(path: str) -> str | None:
    """A RECORD path as installed into site-packages (None for scripts/headers/data outside it)."""
    parts = path.split("/")
    if parts[0].endswith(".data") and len(parts) > 2:
        return "/".join(parts[2:]) if parts[1] in ("purelib", "platlib") else None
    return path


def read_record(wheel: Path) -> WheelRecord:
    with zipfile.ZipFile(wheel) as zf:
        record_name = next(
            (n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")), None
        )
        if record_name is None:
            raise ValueError(f"{wheel.name} has no .dist-info/RECORD")
        text = zf.read(record_name).decode("utf-8")
    paths = set()
    for row in csv.reader(io.StringIO(text)):
        if not row or not row[0]:
            continue
        installed = _installed_path(row[0])
        if installed is not None and not installed.split("/", 1)[0].endswith(".dist-info"):
            paths.add(installed)
    distribution = wheel.name.split("-", 1)[0].lower().replace("_", "-")
    return WheelRecord(wheel.name, distribution, frozenset(paths))


def writers_of(records: Iterable[WheelRecord], package: str) -> list[str]:
    """The distributions that write files under the import package `package/`."""
    prefix = package.rstrip("/") + "/"
    return sorted({r.distribution for r in records if any(p.startswith(prefix) for p in r.paths)})


def collisions(records: Sequence[WheelRecord]) -> dict[str, list[str]]:
    """Installed path -> the distributions that would all write it (only paths written more than once)."""
    owners: dict[str, list[str]] = {}
    for record in records:
        for path in record.paths:
            owners.setdefault(path, []).append(record.distribution)
    return {path: sorted(dists) for path, dists in sorted(owners.items()) if len(dists) > 1}


def python_imports(wheel: Path, package: str) -> set[str]:
    """Top-level modules the `.py` files of `package/` in a wheel import (absolute imports only)."""
    found: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if not (name.startswith(package + "/") and name.endswith(".py")):
                continue
            tree = ast.parse(zf.read(name).decode("utf-8"), filename=name)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found
