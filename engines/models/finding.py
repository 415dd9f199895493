"""Find the models other tools keep on this PC, in one call: the places to look (the user's folders first, then
each tool's own), every model folder found there judged against this machine's devices, and the ones already in
the library marked. The CLI's `models scan` and the Models view's "Find models" both ask this."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from engines.models.found import ScanLimits
from engines.models.here import MachineDevices, judge, machine_devices, mark_added
from engines.models.library import scan_library
from engines.models.places import default_places
from engines.models.scan import ScanReport, scan
from engines.types import CancelToken


def find_models(
    folders: Iterable[str | os.PathLike[str]],
    bundled_dir: Path | None,
    user_dir: Path | None,
    *,
    limits: ScanLimits | None = None,
    cancel: CancelToken | None = None,
    ask_foundry: bool = True,
    devices: MachineDevices | None = None,
) -> ScanReport:
    """Scan `folders`, then the tools' own places, within `limits`; `devices` (discovered when None) judge what
    this machine can run; models whose folder is already in the library (`bundled_dir`, `user_dir`) are marked."""
    where, notes = default_places(folders, ask_foundry=ask_foundry)
    here = devices if devices is not None else machine_devices()
    report = scan(where, limits, cancel=cancel, judge=lambda found: judge(found, here), notes=notes)
    report.models = mark_added(report.models, scan_library(bundled_dir, user_dir))
    return report
