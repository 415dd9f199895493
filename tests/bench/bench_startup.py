"""Start-up: process start to main window shown, median of N runs (target <= 1.5 s).

Two ways, interleaved run by run so that machine noise hits both alike:
  plain        the window only (NPU_STUDIO_NO_PRELOAD=1: nothing loads in the background)
  with models  the normal start: device discovery and both demo models load in the worker threads
               (and the chat engine's child process) right after the window is shown; the time until
               both models are ready is printed too.
Each run is a fresh `python -m app` process with its own empty user folder; the app writes when the
window was shown (NPU_STUDIO_STARTUP_PROBE) and closes itself. Time 0 is taken by this script just
before the process is created.

Run: `QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_startup.py [--runs 5] [--strict]`
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
TARGET_S = 1.5


def one_run(with_models: bool) -> dict[str, float | bool]:
    with tempfile.TemporaryDirectory(prefix="npu-studio-startup-") as home:
        probe = Path(home) / "probe.json"
        env = dict(os.environ, NPU_STUDIO_HOME=home, NPU_STUDIO_STARTUP_PROBE=str(probe))
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
        if with_models:
            env["NPU_STUDIO_STARTUP_WAIT_MODELS"] = "1"
        else:
            env["NPU_STUDIO_NO_PRELOAD"] = "1"
        started = time.time()
        done = subprocess.run([sys.executable, "-m", "app"], cwd=REPO, env=env, capture_output=True, timeout=300)
        if done.returncode != 0 or not probe.exists():
            raise SystemExit(f"the app failed to start:\n{done.stderr.decode(errors='replace')}")
        state = json.loads(probe.read_text(encoding="utf-8"))
    result: dict[str, float | bool] = {
        "shown": state["shown_at"] - started,
        "runtime_loaded_at_show": bool(state["runtime_loaded_at_show"]),
    }
    if with_models:
        result["models_ready"] = max(state["vision_ready_at"], state["chat_ready_at"]) - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args()
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's
    plain: list[dict[str, float | bool]] = []
    loaded: list[dict[str, float | bool]] = []
    one_run(False)  # warm the OS file cache once; not counted
    for _ in range(args.runs):
        plain.append(one_run(False))
        loaded.append(one_run(True))

    def row(name: str, values: list[float], verdict: str) -> str:
        low, mid, high = min(values), statistics.median(values), max(values)
        return f"{name:28} {mid:7.3f}s {low:7.3f}s {high:7.3f}s  {verdict}"

    print(f"Process start -> main window shown, {args.runs} runs each (target: median <= {TARGET_S} s)")
    print(f"{'':28} {'median':>8} {'min':>8} {'max':>8}")
    failed = False
    for name, rows in (("window only", plain), ("window, models loading", loaded)):
        values = [float(r["shown"]) for r in rows]
        ok = statistics.median(values) <= TARGET_S
        failed |= not ok
        print(row(name, values, "ok" if ok else "MISSED"))
    ready = [float(r["models_ready"]) for r in loaded]
    print(row("both models ready", ready, "(for reference)"))
    early = sum(bool(r["runtime_loaded_at_show"]) for r in plain + loaded)
    print(f"runs where ONNX Runtime was imported before the window was shown: {early} of {len(plain) + len(loaded)}")
    failed |= early > 0
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
