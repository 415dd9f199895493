"""Every view at every size and scale the app promises to fit, light and dark, in the states that
stretch it: a screenshot each and a layout check (no main control outside the window, no text cut,
no chip squeezed, no table cell elided, nothing a user needs below the fold; from widget geometry and
font metrics, see ui.common.layout_check). The self-test runs the 1x sizes in its own process and the
1.5x pass in a child process (`python -m app.selftest.layout_child OUT`, with QT_SCALE_FACTOR=1.5),
since the scale is fixed per process.

The states (app.selftest.layout_states) are what a demo shows: the NPU asked for on a machine without
one (every chip says "Asked NPU → Ran on CPU"), a folder of photos with long names, Strict ticked, and
the Benchmark with results. Sizes are logical pixels: 1920x1080 at 150 % is 1280x720, at 200 % 960x540.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.selftest.layout_states import STATES, enter_state, leave_states

if TYPE_CHECKING:
    from app.gui import Studio


@dataclass(frozen=True)
class Size:
    label: str
    width: int
    height: int
    roomy: bool  # promised to fit without scrolling: charts and tables above the fold, no sideways tables


SIZES: tuple[Size, ...] = (
    Size("1280x720", 1280, 720, True),
    Size("1366x768", 1366, 768, True),
    Size("1920x1080", 1920, 1080, True),
    Size("1000x720", 1000, 720, False),  # a window beside another: the compact sidebar, the Chat header
    Size("960x540", 960, 540, False),  # 1920x1080 at 200 %: the usable minimum, pages may scroll
)
SCALED_SIZES: tuple[Size, ...] = (Size("1.5x-1280x720", 1280, 720, True),)  # 1920x1080 at 150 %
THEMES = ("light", "dark")
SETTLE_STEPS = 3  # event-loop turns for layouts to settle after a resize or view change


def shot_name(size: Size, theme: str, key: str, state: str) -> str:
    """The first state's shots keep the plain name (layout-1280x720-light-chat.png)."""
    suffix = "" if state == STATES[0].name else f"-{state}"
    return f"layout-{size.label}-{theme}-{key}{suffix}.png"


def layout_pass(
    studio: Studio,
    out: Path | None,
    sizes: Sequence[Size] = SIZES,
    themes: Sequence[str] = THEMES,
) -> Generator[None, None, dict[str, Any]]:
    """For each state: switch theme (live), resize, show each view it concerns, check and grab it.
    Yields between steps."""
    window = studio.window
    original = studio.settings.theme
    choice = (studio.choice_model.text, studio.choice_model.strict)
    window.showNormal()
    problems: dict[str, list[str]] = {}
    shots: list[str] = []
    facts: dict[str, str] = {}
    checked = 0
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    try:
        for state in STATES:
            facts[state.name] = yield from enter_state(studio, state)
            keys = [k for k in window.view_keys() if state.views is None or k in state.views]
            for theme in themes:
                studio.apply_theme_live(theme)
                for size in sizes:
                    window.resize(size.width, size.height)
                    for key in keys:
                        window.show_view(key)
                        for page, show_page in pages(studio, key):
                            show_page()
                            for _ in range(SETTLE_STEPS):
                                yield
                            yield from state.focus(studio, key)
                            found = studio.check_layout(roomy=size.roomy)
                            checked += 1
                            if found:
                                problems[f"{size.label} {theme} {key}{page} ({state.name})"] = [str(p) for p in found]
                            if out is not None:
                                path = out / shot_name(size, theme, key + page, state.name)
                                if window.grab().save(str(path)):
                                    shots.append(str(path))
    finally:
        studio.apply_theme_live(original)
        leave_states(studio, choice)
    return {"problems": problems, "screenshots": shots, "checked": checked, "states": facts}


def pages(studio: Studio, key: str) -> list[tuple[str, Callable[[], None]]]:
    """The pages of a view to check: the view as it opens, and the Models view's "On this machine" tab once
    a scan has filled it (switching to it before would start a scan of its own)."""
    if key != "models":
        return [("", lambda: None)]
    tabs, found = studio.models_view.tabs, studio.models_view.found_panel
    shown: list[tuple[str, Callable[[], None]]] = [("", lambda: tabs.setCurrentIndex(0))]
    if found.report is not None:
        shown.append(("-found", lambda: tabs.setCurrentWidget(found)))
    return shown


def start_scaled_pass(out: Path, history: Path | None = None, scale: str = "1.5") -> subprocess.Popen[str]:
    """The 1.5x pass in a child process (the scale factor is read once, at start). `history`: the
    benchmark history of this run, so the child's Benchmark view shows the same results."""
    env = dict(os.environ, QT_SCALE_FACTOR=scale, NPU_STUDIO_NO_PRELOAD="1")
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    home = Path(tempfile.mkdtemp(prefix="npu-studio-layout-"))
    env["NPU_STUDIO_HOME"] = str(home)
    if history is not None and history.is_file():
        (home / "data").mkdir(parents=True, exist_ok=True)
        shutil.copy2(history, home / "data" / history.name)
    return subprocess.Popen(
        [sys.executable, "-m", "app.selftest.layout_child", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
