"""What a benchmark ran with: the versions of the packages behind its figures, and whether the environment is
the locked one (lock/). Every benchmark prints `banner()` first; perf_report stores `snapshot()` next to the
figures it records, so a figure in docs/PERFORMANCE.md always says which versions produced it."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# The packages the measured paths run on (shown in the banner and recorded with each figure).
KEY_PACKAGES = (
    "onnxruntime",
    "onnxruntime-genai",
    "onnxruntime-ep-openvino",
    "numpy",
    "pillow",
    "pyside6-essentials",
    "onnx",
    "ml-dtypes",
    "protobuf",
    "psutil",
    "platformdirs",
    "pyqtgraph",
    "llama-cpp-python",
)


def lock_differences() -> tuple[str, list[str]]:
    """(the lock's file name or "", how this environment differs from it). Packages a benchmark adds for
    its peers (llama-cpp-python) are not differences."""
    from installer import lockfile

    lock = lockfile.running_lock()
    if lock is None:
        return "", [f"no lock for {sys.platform} {platform.machine()} with Python {sys.version_info[0]}."
                    f"{sys.version_info[1]}: the figures are not of a locked environment"]
    installed = lockfile.installed_versions()
    peers = {"llama-cpp-python", "diskcache", "jinja2"}
    found = [d for d in lockfile.differences(lock, installed) if d.split()[0] not in peers or "locked" in d]
    return lock.main_file.name, found


def snapshot() -> dict[str, Any]:
    """Versions of the key packages, Python, and the lock status: stored with every recorded figure."""
    from installer import lockfile

    installed = lockfile.installed_versions()
    lock_name, differences = lock_differences()
    return {
        "python": platform.python_version(),
        "packages": {name: installed[name] for name in KEY_PACKAGES if name in installed},
        "lock": lock_name,
        "matches_lock": bool(lock_name) and not differences,
        "differences": differences,
    }


def banner(out: Any = None) -> dict[str, Any]:
    """Print the versions in use and, loudly, any difference from the lock; returns the snapshot."""
    stream = out or sys.stdout
    snap = snapshot()
    versions = ", ".join(f"{name} {version}" for name, version in snap["packages"].items())
    print(f"environment: Python {snap['python']}; {versions}", file=stream)
    if snap["matches_lock"]:
        print(f"environment: the locked set (lock/{snap['lock']})", file=stream)
    else:
        print("WARNING: this environment is not the locked one; its figures are not comparable with the "
              "recorded ones (`bash setup.sh` in a fresh clone gives the locked set):", file=stream)
        for line in snap["differences"][:20]:
            print(f"WARNING:   {line}", file=stream)
        if len(snap["differences"]) > 20:
            print(f"WARNING:   ... and {len(snap['differences']) - 20} more", file=stream)
    return snap
