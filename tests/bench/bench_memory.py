"""The desktop app's memory: every process it runs, both demo models loaded, idle.

The real app (Studio: window, views, hosts) starts in this process with an empty user folder, loads the
classifier (in the vision thread) and the chat model (in the chat engine's child process), idles for
a few seconds and then reports the resident memory (RSS), proportional (PSS) and unique memory (USS,
where the OS says) of each process it owns: the main process and the chat engine's child (and, where
the chat engine is started by multiprocessing spawn on POSIX, its resource tracker). Target: all together <= 400 MB RSS.

Run: `QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_memory.py [--idle S] [--strict]`
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("NPU_STUDIO_HOME", tempfile.mkdtemp(prefix="npu-studio-bench-"))

import psutil  # noqa: E402

TARGET_MB = 400.0


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


def measure() -> list[tuple[str, int, float, float, float]]:
    """(role, pid, RSS, PSS, USS) in MB per process. RSS counts the shared libraries' pages in every
    process that maps them; PSS shares them out; USS is what ending the process would free."""
    main = psutil.Process()
    rows = []
    for process in [main, *main.children(recursive=True)]:
        try:
            info = process.memory_full_info()
            uss, pss = getattr(info, "uss", 0.0), getattr(info, "pss", 0.0)
            rows.append((role(process, main.pid), process.pid, info.rss / 2**20, pss / 2**20, uss / 2**20))
        except psutil.Error:
            continue
    return rows


def pump_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        QApplication.processEvents()
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=3.0, help="seconds idle before measuring (default 3)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args()
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's

    from app import model_trials
    from app.gui import Studio, create_application
    from app.logs import setup_logging

    setup_logging(debug=False, console=False)  # what `npu-studio` does before it opens the window
    model_trials.configure()  # the bundled models are trusted, as in the app
    app = create_application()
    studio = Studio(app, preload=False)
    studio.show()
    pump_until(lambda: "window_shown_s" in studio.timings, 30, "the window")
    studio.load_classifier()
    studio.load_chat_model()
    pump_until(lambda: studio.vision.worker.session_count > 0, 300, "the classifier")
    pump_until(lambda: bool(studio.chat_view.status.info), 300, "the chat model")
    until = time.monotonic() + args.idle
    pump_until(lambda: time.monotonic() > until, args.idle + 5, "idle")
    gc.collect()
    rows = measure()
    total = sum(r[2] for r in rows)
    print(f"Memory of the desktop app, both demo models loaded, idle {args.idle:.0f} s (MB)")
    print(f"   {'process':36}{'pid':>8}{'RSS':>9}{'PSS':>9}{'USS':>9}")
    for name, pid, rss, pss, uss in rows:
        print(f"   {name:36}{pid:8d}{rss:9.0f}{pss:9.0f}{uss:9.0f}")
    ok = total <= TARGET_MB
    print(f"   {'all processes':36}{'':8}{total:9.0f}{sum(r[3] for r in rows):9.0f}{sum(r[4] for r in rows):9.0f}")
    print(f"   total RSS {total:.0f} MB  target <= {TARGET_MB:.0f} MB  {'PASS' if ok else 'FAIL'}")
    studio.window.close()
    studio.shutdown()
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
