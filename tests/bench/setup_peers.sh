#!/usr/bin/env bash
# The benchmarks' peer, llama.cpp (llama-cpp-python), in a virtual environment of its own: it has no wheel and
# builds from source (~10 min on 2 cores), and the locked .venv must stay exactly the lock. The chat and server
# benchmarks run it as a subprocess (`--peer-python`, default .venv-peers/bin/python).
#
#     bash tests/bench/setup_peers.sh [VENV]        # default: .venv-peers beside the repository
#
# Another checkout that already has one can share it: `ln -s /path/to/that/venv .venv-peers`.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${1:-.venv-peers}
PYTHON=${PYTHON:-python3}
VERSION=$(sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' pyproject.toml)
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$VERSION')" 2>/dev/null; then
  echo "$VENV already has llama-cpp-python $VERSION"
  exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "llama-cpp-python[server]==$VERSION"
"$VENV/bin/python" -c "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__, 'in $VENV')"
