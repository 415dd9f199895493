"""Before Qt starts, app/display.py says in one line why the window cannot open (no display, no X server,
a library of Qt's xcb plugin missing) instead of Qt's abort; everything else is left to Qt."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import display
from app.display import debian_package, missing_libraries, window_problem, xcb_plugin

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 and Wayland are Linux's")


@pytest.fixture
def x_server() -> Iterator[str]:
    """A listening socket where a local X server's would be (Linux's abstract namespace: nothing on disk)."""
    number = 3000 + os.getpid() % 5000
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(f"\0/tmp/.X11-unix/X{number}")
        server.listen(4)
        yield f":{number}"


def patched_plugin(folder: Path, *libraries: str) -> Path:
    """A copy of Qt's real xcb plugin that needs `libraries` renamed to ones no system has (last letter 'X'),
    beside a link to Qt's own libraries (its RUNPATH is $ORIGIN/../../lib)."""
    real = xcb_plugin()
    assert real is not None, "PySide6's xcb plugin is not installed"
    data = real.read_bytes()
    for library in libraries:
        name = library.encode() + b"\0"
        assert name in data, f"the plugin does not need {library}"
        stem, _, rest = library.partition(".so")
        data = data.replace(name, (stem[:-1] + "X" + ".so" + rest).encode() + b"\0")
    platforms = folder / "Qt" / "plugins" / "platforms"
    platforms.mkdir(parents=True)
    os.symlink(real.parents[2] / "lib", folder / "Qt" / "lib")
    plugin = platforms / "libqxcb.so"
    plugin.write_bytes(data)
    return plugin


def apt_system(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Debian or Ubuntu system (apt-get on the PATH), whatever this one is."""
    which = shutil.which
    monkeypatch.setattr(display.shutil, "which", lambda name: "/usr/bin/apt-get" if name == "apt-get" else which(name))


def test_no_display_is_one_line_that_says_what_to_do() -> None:
    problem = window_problem({}, "linux")
    assert problem is not None and "\n" not in problem
    assert problem.startswith("No display to open the window on (DISPLAY and WAYLAND_DISPLAY are not set")
    assert "QT_QPA_PLATFORM=offscreen" in problem and "npu-studio --help" in problem


@pytest.mark.parametrize("platform", ["offscreen", "minimal", "vnc", "eglfs", "offscreen;xcb"])
def test_a_platform_without_a_display_server_is_left_to_qt(platform: str) -> None:
    assert window_problem({"QT_QPA_PLATFORM": platform}, "linux") is None


@pytest.mark.parametrize("system", ["win32", "darwin"])
def test_windows_and_macos_always_have_their_platform(system: str) -> None:
    assert window_problem({}, system) is None


def test_a_display_where_no_x_server_answers(tmp_path: Path) -> None:
    problem = window_problem({"DISPLAY": ":4999"}, "linux")
    assert problem is not None and problem.startswith("No X server answers at DISPLAY=:4999.")


def test_a_working_x_display_with_every_library_opens(x_server: str) -> None:
    assert window_problem({"DISPLAY": x_server}, "linux") is None
    assert window_problem({"DISPLAY": "remote.example:10.0"}, "linux") is None  # a remote display: left to Qt


def test_a_wayland_session_with_its_socket_is_left_to_qt(tmp_path: Path) -> None:
    (tmp_path / "wayland-0").touch()
    env = {"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0", "XDG_RUNTIME_DIR": str(tmp_path)}
    assert window_problem(env, "linux") is None
    assert window_problem({**env, "WAYLAND_DISPLAY": "wayland-9"}, "linux") is not None  # no socket, no DISPLAY


def test_a_missing_library_of_the_xcb_plugin_is_named_with_its_package(
    tmp_path: Path, x_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = patched_plugin(tmp_path, "libxcb-cursor.so.0")
    assert missing_libraries(plugin) == ["libxcb-cursoX.so.0"]
    monkeypatch.setattr(display, "xcb_plugin", lambda: plugin)
    apt_system(monkeypatch)
    problem = window_problem({"DISPLAY": x_server}, "linux")
    assert problem is not None and "\n" not in problem
    assert problem.startswith("The desktop window needs libxcb-cursoX.so.0, which is not installed. "
                              "Install with `sudo apt-get install -y libxcb-cursox0`.")  # fmt: skip


def test_every_missing_library_is_named_at_once(tmp_path: Path) -> None:
    plugin = patched_plugin(tmp_path, "libxcb-icccm.so.4", "libxcb-keysyms.so.1")
    assert sorted(missing_libraries(plugin)) == ["libxcb-icccX.so.4", "libxcb-keysymX.so.1"]


@pytest.mark.parametrize(("library", "package"), [
    ("libxcb-cursor.so.0", "libxcb-cursor0"), ("libxcb-icccm.so.4", "libxcb-icccm4"),
    ("libxcb-render-util.so.0", "libxcb-render-util0"), ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libX11-xcb.so.1", "libx11-xcb1"), ("libEGL.so.1", "libegl1"), ("libdbus-1.so.3", "libdbus-1-3"),
    ("libglib-2.0.so.0", "libglib2.0-0"), ("libfontconfig.so.1", "libfontconfig1"),
])  # fmt: skip
def test_debian_packages_are_named_by_their_rule(library: str, package: str) -> None:
    assert debian_package(library) == package
