"""What every installer build step shares: the repository's folders, the build cache, the error a step
raises, and its log lines and timers."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INSTALLER_DIR = REPO / "installer"
BUILD_DIR = REPO / "build" / "installer"
DIST_DIR = REPO / "dist"
DEFAULT_PYTHON = "3.12"
APT_LINE = "apt-get install -y wixl msitools"


class BuildError(Exception):
    """A build step failed; the message says what and what to do."""


def log(message: str) -> None:
    print(f"[installer] {message}", flush=True)


@dataclass
class Timer:
    label: str
    start: float = 0.0
    seconds: float = 0.0

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
        log(f"{self.label}: {self.seconds:.1f} s")


def default_cache_dir() -> Path:
    env = os.environ.get("NPU_STUDIO_BUILD_CACHE")
    if env:
        return Path(env)
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "npu-studio-build"
    return Path.home() / ".cache" / "npu-studio-build"


def stage_dir_for(arch: str, build_dir: Path = BUILD_DIR) -> Path:
    return build_dir / arch / "payload"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
