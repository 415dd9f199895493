"""Can the desktop window open here? Asked before Qt starts, because Qt cannot say so itself: without a
display, or with a library of its xcb platform plugin missing, creating the QApplication aborts the
process (SIGABRT, exit 134) with "Reinstalling the application may fix this problem".

`window_problem()` answers in one line what is wrong and what to do (the CLI commands need no window;
`QT_QPA_PLATFORM=offscreen` runs the app without a screen). Only X11 and Wayland systems are checked:
Windows and macOS always have their platform. It stays cheap: environment variables, one socket connect
for a local X display, and, when Qt would load its xcb plugin, one `dlopen` of that plugin, whose libraries
Qt loads a moment later anyway (`ldd` runs only when one is missing, to name them all).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path

# Qt platforms that need no display server: Qt knows what to do with these.
_DISPLAY_PLATFORMS = ("xcb", "wayland")
_HOW_ELSE = (
    "Use the CLI commands (`npu-studio --help`: devices, classify, chat, serve, ...), or set "
    "QT_QPA_PLATFORM=offscreen to run the app without a screen."
)
# Libraries whose Debian package is not named after them by the usual rule (libfoo-bar.so.N -> libfoo-barN).
_DEBIAN_PACKAGES = {
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libgobject-2.0.so.0": "libglib2.0-0",
    "libgmodule-2.0.so.0": "libglib2.0-0",
    "libgio-2.0.so.0": "libglib2.0-0",
}
_MISSING = re.compile(r"([^\s:/]+\.so(?:\.[\d.]+)?): cannot open shared object file")


def window_problem(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> str | None:
    """Why the desktop window cannot open here (one line with what to do), or None when it can."""
    env = os.environ if env is None else env
    if platform in ("win32", "darwin", "cygwin"):
        return None
    candidates = _platforms(env)
    if candidates is None:
        return None  # a platform Qt renders without a display server (offscreen, vnc, eglfs, ...)
    usable = [p for p in candidates if (p == "xcb" and env.get("DISPLAY")) or (p == "wayland" and _wayland(env))]
    if not usable:
        return f"No display to open the window on (DISPLAY and WAYLAND_DISPLAY are not set, as over SSH). {_HOW_ELSE}"
    if usable[0] != "xcb":
        return None
    display = env.get("DISPLAY", "")
    if not _x_server_answers(display):
        return f"No X server answers at DISPLAY={display}. {_HOW_ELSE}"
    if env.get("QT_PLUGIN_PATH") or env.get("QT_QPA_PLATFORM_PLUGIN_PATH"):
        return None  # plugins from elsewhere: what they link against is theirs to say
    missing = missing_libraries(xcb_plugin())
    return _install_line(missing) if missing else None


def _platforms(env: Mapping[str, str]) -> list[str] | None:
    """The platforms Qt will try, in order (QT_QPA_PLATFORM may list fallbacks: "wayland;xcb"); None when
    the first is one that needs no display server."""
    wanted = env.get("QT_QPA_PLATFORM", "").strip()
    if wanted:
        names = [part.split(":", 1)[0].strip() for part in wanted.split(";") if part.strip()]
        found = [("wayland" if n.startswith("wayland") else n) for n in names]
        return found if found and found[0] in _DISPLAY_PLATFORMS else None
    return ["wayland", "xcb"] if env.get("XDG_SESSION_TYPE") == "wayland" else ["xcb"]


def _wayland(env: Mapping[str, str]) -> bool:
    name = env.get("WAYLAND_DISPLAY", "")
    if not name:
        return False
    runtime = env.get("XDG_RUNTIME_DIR", "")
    return os.path.isabs(name) or not runtime or os.path.exists(os.path.join(runtime, name))


def _x_server_answers(display: str) -> bool:
    """For a local display (":0", "unix:0"), does its socket accept a connection? Remote and unusual
    displays are left to Qt (True)."""
    match = re.fullmatch(r"(?:unix)?:(\d+)(?:\.\d+)?", display.strip())
    if match is None:
        return True
    path = f"/tmp/.X11-unix/X{match.group(1)}"
    for address in (path, "\0" + path):  # the socket file, then Linux's abstract socket of the same name
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(address)
                return True
            except OSError:
                continue
    return False


def xcb_plugin() -> Path | None:
    """Qt's xcb platform plugin in the installed PySide6 (found without importing PySide6)."""
    spec = find_spec("PySide6")
    if spec is None or not spec.origin:
        return None
    plugin = Path(spec.origin).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def missing_libraries(plugin: Path | None) -> list[str]:
    """The shared libraries `plugin` needs that this system lacks ([] when it loads)."""
    if plugin is None:
        return []
    import ctypes

    try:
        ctypes.CDLL(str(plugin), mode=os.RTLD_LAZY)
        return []
    except OSError as exc:
        first = _MISSING.search(str(exc))
        named = [first.group(1)] if first else []
    ldd = shutil.which("ldd")
    if ldd is not None:
        try:
            listing = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            listing = ""
        named += [line.split()[0] for line in listing.splitlines() if "not found" in line and line.split()]
    return list(dict.fromkeys(named)) or ["a library its xcb plugin needs"]


def debian_package(library: str) -> str:
    """The Debian/Ubuntu package of a shared library: libxcb-cursor.so.0 -> libxcb-cursor0."""
    if library in _DEBIAN_PACKAGES:
        return _DEBIAN_PACKAGES[library]
    match = re.fullmatch(r"lib(.+?)\.so\.(\d+).*", library)
    if match is None:
        return library
    name, version = match.group(1).lower(), match.group(2)
    return f"lib{name}{'-' if name[-1].isdigit() else ''}{version}"


def _install_line(missing: list[str]) -> str:
    libraries = ", ".join(missing)
    needs = f"The desktop window needs {libraries}, which {'is' if len(missing) == 1 else 'are'} not installed."
    if shutil.which("apt-get") and all(m.startswith("lib") for m in missing):
        packages = " ".join(dict.fromkeys(debian_package(m) for m in missing))
        return f"{needs} Install with `sudo apt-get install -y {packages}`. {_HOW_ELSE}"
    return f"{needs} Install it with your system's package manager. {_HOW_ELSE}"
