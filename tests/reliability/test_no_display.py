"""`npu-studio` where the window cannot open: over SSH with no display, a DISPLAY where no X server answers,
and a library of Qt's xcb plugin missing. One line that says why and what to do, before Qt starts (which
would abort with SIGABRT and "Reinstalling the application may fix this problem")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import display
from app.cli import run
from tests.reliability.conftest import Recorder
from tests.unit.test_display import apt_system, patched_plugin, x_server  # noqa: F401 (a fixture)

CATEGORY = "No display"
REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 and Wayland are Linux's")


def _app(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return subprocess.run([sys.executable, "-m", "app"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**base, "PYTHONPATH": str(REPO), "NPU_STUDIO_HOME": str(tmp_path), **env})  # fmt: skip


def test_no_display_over_ssh_is_one_line(tmp_path: Path, reliability: Recorder) -> None:
    proc = _app(tmp_path)
    reliability.record(CATEGORY, "npu-studio with DISPLAY, WAYLAND_DISPLAY and QT_QPA_PLATFORM unset (SSH)",
                       "one line: no display, use the CLI or QT_QPA_PLATFORM=offscreen; exit 2, not Qt's abort",
                       proc.stderr.strip())  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Reinstalling" not in proc.stderr
    assert proc.stderr.startswith("npu-studio: error: No display to open the window on")


def test_a_display_without_an_x_server_is_one_line(tmp_path: Path, reliability: Recorder) -> None:
    proc = _app(tmp_path, DISPLAY=":4998")
    reliability.record(CATEGORY, "npu-studio with DISPLAY=:4998, where no X server listens",
                       "one line naming the display; exit 2", proc.stderr.strip())  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("npu-studio: error: No X server answers at DISPLAY=:4998.")


def test_a_missing_xcb_library_is_named_with_the_command_that_installs_it(
    tmp_path: Path, x_server: str, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
    capsys: pytest.CaptureFixture[str], reliability: Recorder,
) -> None:  # fmt: skip
    plugin = patched_plugin(tmp_path / "qt", "libxcb-cursor.so.0")
    monkeypatch.setattr(display, "xcb_plugin", lambda: plugin)
    apt_system(monkeypatch)
    monkeypatch.setenv("DISPLAY", x_server)
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    code = run([])
    err = capsys.readouterr().err
    shown = err.strip().replace(x_server, ":N")
    reliability.record(CATEGORY, "npu-studio on an X display whose xcb plugin lacks libxcb-cursor (the library renamed "
                       "in a copy of the real plugin)", "one line naming the library and the apt-get command; exit 2",
                       shown)  # fmt: skip
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("npu-studio: error: The desktop window needs libxcb-cursoX.so.0, which is not installed. "
                          "Install with `sudo apt-get install -y libxcb-cursox0`.")  # fmt: skip
