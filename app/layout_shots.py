"""Every view at every size and scale the app promises to fit, light and dark: a screenshot each and
a layout check (no main control outside the window, no text cut; from widget geometry and font
metrics). The self-test runs the 1x sizes in its own process and the 1.5x pass in a child process
(`python -m app.layout_child OUT`, with QT_SCALE_FACTOR=1.5), since the scale is fixed per process.

Sizes are logical pixels: 1920x1080 at 150 % is 1280x720, at 200 % 960x540.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.gui import Studio

SIZES: tuple[tuple[str, int, int], ...] = (
    ("1280x720", 1280, 720),
    ("1366x768", 1366, 768),
    ("1920x1080", 1920, 1080),
    ("960x540", 960, 540),  # 1920x1080 at 200 %
)
SCALED_SIZES: tuple[tuple[str, int, int], ...] = (("1.5x-1280x720", 1280, 720),)  # 1920x1080 at 150 %
THEMES = ("light", "dark")
SETTLE_STEPS = 3  # event-loop turns for layouts to settle after a resize or view change


def layout_pass(
    studio: Studio,
    out: Path | None,
    sizes: Sequence[tuple[str, int, int]] = SIZES,
    themes: Sequence[str] = THEMES,
) -> Generator[None, None, dict[str, Any]]:
    """Resize, switch theme (live), show each view, check and grab it. Yields between steps."""
    window = studio.window
    original = studio.settings.theme
    window.showNormal()
    problems: dict[str, list[str]] = {}
    shots: list[str] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    try:
        for theme in themes:
            studio.apply_theme_live(theme)
            for label, width, height in sizes:
                window.resize(width, height)
                for key in window.view_keys():
                    window.show_view(key)
                    for _ in range(SETTLE_STEPS):
                        yield
                    found = studio.check_layout()
                    if found:
                        problems[f"{label} {theme} {key}"] = [str(p) for p in found]
                    if out is not None:
                        path = out / f"layout-{label}-{theme}-{key}.png"
                        if window.grab().save(str(path)):
                            shots.append(str(path))
    finally:
        studio.apply_theme_live(original)
    return {"problems": problems, "screenshots": shots, "checked": len(themes) * len(sizes) * len(window.view_keys())}


def start_scaled_pass(out: Path, scale: str = "1.5") -> subprocess.Popen[str]:
    """The 1.5x pass in a child process (the scale factor is read once, at start)."""
    env = dict(os.environ, QT_SCALE_FACTOR=scale, NPU_STUDIO_NO_PRELOAD="1")
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env["NPU_STUDIO_HOME"] = tempfile.mkdtemp(prefix="npu-studio-layout-")
    return subprocess.Popen(
        [sys.executable, "-m", "app.layout_child", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
