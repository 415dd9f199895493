"""The desktop app's memory: every process it runs, both demo models loaded, idle.

The app is started as a user starts it (`python -m app`, an empty user folder, the demo models
preloaded: the classifier in the vision thread, the chat model in the chat engine's child process) and
measured from this process once both models are ready and it has idled a few seconds: the resident
memory (RSS), proportional (PSS) and unique memory (USS, where the OS says) of each process it owns
(the main process and the chat engine's child, and, where the chat engine is started by
multiprocessing spawn, its resource tracker). Measured from outside, so nothing of the benchmark
(psutil, the version banner) is counted as the app's. Target: all together <= 400 MB RSS.

Run: `QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_memory.py [--idle S] [--strict]`
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

TARGET_MB = 400.0
Row = tuple[str, int, float, float, float]  # role, pid, RSS, PSS, USS (MB)


def role(process: psutil.Process, main_pid: int) -> str:
    if process.pid == main_pid:
        return "main (window, classifier)"
    try:
        command = " ".join(process.cmdline())
    except psutil.Error:
        command = ""
    if "resource_tracker" in command:
        return "multiprocessing resource tracker"
    if "npu-studio-chat" in command or "spawn_main" in command:
        return "chat engine child"
    return f"other ({process.name()})"


def measure(main_pid: int) -> list[Row]:
    """(role, pid, RSS, PSS, USS) in MB per process of the app. RSS counts the shared libraries' pages
    in every process that maps them; PSS shares them out; USS is what ending the process would free."""
    main = psutil.Process(main_pid)
    rows = []
    for process in [main, *main.children(recursive=True)]:
        try:
            info = process.memory_full_info()
            uss, pss = getattr(info, "uss", 0.0), getattr(info, "pss", 0.0)
            rows.append((role(process, main_pid), process.pid, info.rss / 2**20, pss / 2**20, uss / 2**20))
        except psutil.Error:
            continue
    return rows


def start_app(home: Path, probe: Path) -> subprocess.Popen[bytes]:
    """The app as `npu-studio` starts it, preloading both demo models; it writes `probe` when they are
    ready and stays open (app/launch.py's start-up probe)."""
    env = dict(
        os.environ,
        NPU_STUDIO_HOME=str(home),
        NPU_STUDIO_STARTUP_PROBE=str(probe),
        NPU_STUDIO_STARTUP_WAIT_MODELS="1",
        NPU_STUDIO_STARTUP_STAY="1",
    )
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env.pop("NPU_STUDIO_NO_PRELOAD", None)
    return subprocess.Popen(
        [sys.executable, "-m", "app"], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def wait_until_ready(app: subprocess.Popen[bytes], probe: Path, timeout_s: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if app.poll() is not None:
            stderr = app.stderr.read().decode(errors="replace") if app.stderr else ""
            raise SystemExit(f"the app ended (exit code {app.returncode}) before its models were ready:\n{stderr}")
        try:
            state = json.loads(probe.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        if "vision_ready_at" in state and "chat_ready_at" in state:
            failed = [which for which in ("vision", "chat") if state.get(f"{which}_failed")]
            if failed:
                raise SystemExit(f"the app could not load its demo model(s): {', '.join(failed)}")
            return state
        time.sleep(0.05)
    raise SystemExit(f"the app's models were not ready within {timeout_s:.0f} s")


def end_app(app: subprocess.Popen[bytes]) -> None:
    """End the app and every process it started (none is left behind, whatever the app does)."""
    try:
        children = psutil.Process(app.pid).children(recursive=True)
    except psutil.Error:
        children = []
    app.terminate()
    try:
        app.wait(timeout=15)
    except subprocess.TimeoutExpired:
        app.kill()
        app.wait()
    for child in children:
        try:
            child.wait(timeout=10)
        except psutil.TimeoutExpired:
            child.kill()
        except psutil.Error:
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=3.0, help="seconds idle before measuring (default 3)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args()
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's
    with tempfile.TemporaryDirectory(prefix="npu-studio-bench-") as home:
        probe = Path(home) / "probe.json"
        app = start_app(Path(home) / "user", probe)
        try:
            wait_until_ready(app, probe, 300)
            time.sleep(args.idle)
            rows = measure(app.pid)
        finally:
            end_app(app)
    total = sum(r[2] for r in rows)
    print(f"Memory of the desktop app, both demo models loaded, idle {args.idle:.0f} s (MB)")
    print(f"   {'process':36}{'pid':>8}{'RSS':>9}{'PSS':>9}{'USS':>9}")
    for name, pid, rss, pss, uss in rows:
        print(f"   {name:36}{pid:8d}{rss:9.0f}{pss:9.0f}{uss:9.0f}")
    ok = total <= TARGET_MB
    print(f"   {'all processes':36}{'':8}{total:9.0f}{sum(r[3] for r in rows):9.0f}{sum(r[4] for r in rows):9.0f}")
    print(f"   total RSS {total:.0f} MB  target <= {TARGET_MB:.0f} MB  {'PASS' if ok else 'FAIL'}")
    if args.record:
        from tests.bench import perf_report

        by_role = {"main": 0.0, "chat": 0.0, "tracker": 0.0}
        for name, _, rss, _, _ in rows:
            key = "main" if name.startswith("main") else "tracker" if "tracker" in name else "chat"
            by_role[key] += rss
        values = {f"{key}_mb": value for key, value in by_role.items()} | {"total_mb": total}
        perf_report.record("memory", values, " ".join(["python", "tests/bench/bench_memory.py", *sys.argv[1:]]))
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
