"""Folder classification against the script a user would write by hand, side by side in one run.

    .venv/bin/python tests/bench/bench_folder.py [--rounds N] [--large N] [--small N] [--keep DIR] [--strict]

Two folders are generated from the sample photos into a temporary folder: `--large` photos of 12 MP
and `--small` photos of ~1 MP (JPEG q90). For each, the two sides alternate (who goes first flips each
round), each as a whole process, as a user would time them:

* `npu-studio classify FOLDER --device cpu --json` (one pool decodes photos and runs batches side by
  side on one-thread sessions; the first photos decode while the model opens);
* tests/bench/folder_script.py: Pillow draft() + resize + crop + one onnxruntime session, batch 1.

Printed per folder: median seconds, the speed-up (target >= 1.5x), peak RSS of each process (target
<= 300 MB for the CLI), and whether the top-5 classes of every photo are identical. Then the app's
batch, through its VisionHost (the Classify view's path, its signals received as the view receives them), next
to classify_many called directly in the same process, for each folder (the lower ratio is recorded).
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
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

MODEL = REPO / "assets" / "models" / "efficientnet-lite0"
SCRIPT = Path(__file__).with_name("folder_script.py")
SPEEDUP_TARGET = 1.5
RSS_TARGET_MB = 300.0


@dataclass(frozen=True)
class ProcessRun:
    seconds: float
    peak_rss_mb: float
    top5: dict[str, list[int]]


def compile_bytecode() -> None:
    """Compile NPU Studio's own modules once, as an installed app has them (an MSI ships them compiled,
    and the script's libraries come compiled from their wheels). Without it, a shell that sets
    PYTHONDONTWRITEBYTECODE makes every CLI run compile ~300 modules again (~45 ms a run here)."""
    import compileall

    for package in ("app", "engines"):
        compileall.compile_dir(REPO / package, quiet=1, workers=1)


def run_process(command: list[str]) -> tuple[float, float, str]:
    """Wall time, peak RSS (MB) and stdout of one whole child process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
        if hasattr(os, "wait4"):
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak, not the largest child so far
            proc.returncode = os.waitstatus_to_exitcode(status)
            peak = usage.ru_maxrss / 1024  # KB on Linux
        else:  # pragma: no cover - Windows: psutil's peak working set
            import psutil

            peak = 0.0
            handle = psutil.Process(proc.pid)
            while proc.poll() is None:
                peak = max(peak, handle.memory_info().rss / 2**20)
                time.sleep(0.02)
        seconds = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode("utf-8")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with exit code {proc.returncode}")
    return seconds, peak, text


def run_cli(folder: Path) -> ProcessRun:
    command = [sys.executable, "-m", "app", "classify", str(folder), "--device", "cpu", "--json", "--model", str(MODEL)]
    seconds, peak, text = run_process(command)
    results = json.loads(text)["results"]
    return ProcessRun(seconds, peak, {Path(r["path"]).name: [t["index"] for t in r["top"]] for r in results})


def run_script(folder: Path) -> ProcessRun:
    seconds, peak, text = run_process([sys.executable, str(SCRIPT), str(MODEL), str(folder)])
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return ProcessRun(seconds, peak, {row["file"]: row["top"] for row in rows})


def compare(name: str, folder: Path, rounds: int) -> dict[str, float | bool | str]:
    cli: list[ProcessRun] = []
    script: list[ProcessRun] = []
    for round_no in range(rounds):
        if round_no % 2 == 0:
            cli.append(run_cli(folder))
            script.append(run_script(folder))
        else:
            script.append(run_script(folder))
            cli.append(run_cli(folder))
    cli_s = statistics.median(r.seconds for r in cli)
    script_s = statistics.median(r.seconds for r in script)
    speedup = script_s / cli_s
    identical = all(c.top5 == s.top5 for c, s in zip(cli, script, strict=True)) and len(cli[0].top5) > 0
    cli_rss = max(r.peak_rss_mb for r in cli)
    script_rss = max(r.peak_rss_mb for r in script)
    print(f"\n== {name}: {len(cli[0].top5)} photos, {rounds} alternating rounds, whole process (medians)")
    print(f"   {'':34}{'seconds':>9}{'photos/s':>10}{'peak RSS MB':>13}")
    sides = (("npu-studio classify --device cpu", cli_s, cli_rss), ("hand-written script", script_s, script_rss))
    for label, secs, rss in sides:
        print(f"   {label:34}{secs:9.2f}{len(cli[0].top5) / secs:10.1f}{rss:13.0f}")
    ok = verdict(speedup >= SPEEDUP_TARGET)
    print(f"   speed-up vs the script: {speedup:.2f}x  target >= {SPEEDUP_TARGET}x  {ok}")
    print(f"   top-5 identical for every photo: {identical}  {verdict(identical)}")
    print(f"   CLI peak RSS {cli_rss:.0f} MB  target <= {RSS_TARGET_MB:.0f} MB  {verdict(cli_rss <= RSS_TARGET_MB)}")
    pairs = ", ".join(f"{s.seconds:.2f}/{c.seconds:.2f}" for c, s in zip(cli, script, strict=True))
    print(f"   per round (script s / CLI s): {pairs}")
    return {
        "name": name,
        "speedup": speedup,
        "cli_s": cli_s,
        "script_s": script_s,
        "identical": identical,
        "cli_rss_mb": cli_rss,
        "ok": speedup >= SPEEDUP_TARGET and identical and cli_rss <= RSS_TARGET_MB,
    }


def app_batch(folder: Path, rounds: int) -> dict[str, float | bool | str]:
    """The app's batch through its VisionHost (its own thread, signals per photo) next to the same
    classifier's classify_many called directly, alternating, in one process."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

    from app.hosts import VisionHost
    from engines.types import DeviceChoice

    app = QCoreApplication.instance() or QCoreApplication([])
    choice = DeviceChoice.parse("cpu")
    host = VisionHost()
    host.start()
    paths = sorted(str(p) for p in folder.iterdir())
    loop = QEventLoop()
    outcome: dict[str, object] = {}

    def finished(summary: object) -> None:
        outcome["summary"] = summary
        loop.quit()

    def failed(error: object) -> None:
        outcome["error"] = error
        loop.quit()

    # What the Classify view does with each photo's signals (app/view_links.py): keep the result; the table
    # is filled from a timer a few times a second (measured by bench_responsiveness.py).
    shown: list[object] = []
    host.classified.connect(shown.append)
    host.progress.connect(lambda done, total: None)
    host.finished.connect(finished)
    host.failed.connect(failed)
    host.model_loaded.connect(lambda *_: loop.quit())
    host.load(str(MODEL), choice)
    QTimer.singleShot(300_000, loop.quit)
    loop.exec()
    classifier = host.worker._classifier(str(MODEL), choice)  # the host's own session, warmed up

    def through_host() -> float:
        outcome.clear()
        started = time.perf_counter()
        host.classify(paths, str(MODEL), choice, 5)
        loop.exec()
        if "error" in outcome:
            raise SystemExit(f"the app's batch failed: {outcome['error']}")
        return time.perf_counter() - started

    def direct() -> float:
        started = time.perf_counter()
        classifier.classify_many(paths, k=5)
        return time.perf_counter() - started

    host_s: list[float] = []
    direct_s: list[float] = []
    for round_no in range(rounds):
        pair = (through_host, direct) if round_no % 2 == 0 else (direct, through_host)
        for fn in pair:
            (host_s if fn is through_host else direct_s).append(fn())
    host.shutdown()
    del app
    h, d = statistics.median(host_s), statistics.median(direct_s)
    ratio = d / h
    if len(shown) != rounds * len(paths):
        raise SystemExit(f"the app's batch showed {len(shown)} results, not {rounds * len(paths)}")
    print(f"\n== App batch through VisionHost vs classify_many in-process: {len(paths)} photos, {rounds} rounds")
    print(f"   VisionHost {h:.2f} s ({len(paths) / h:.1f} photos/s), direct {d:.2f} s ({len(paths) / d:.1f} photos/s)")
    print(f"   throughput ratio host / direct: {ratio:.2f}  target >= 0.95  {verdict(ratio >= 0.95)}")
    return {"name": "app batch", "ratio": ratio, "host_s": h, "direct_s": d, "ok": ratio >= 0.95}


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Folder classification vs a hand-written script.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--large", type=int, default=100, help="photos of 12 MP (default 100)")
    parser.add_argument("--small", type=int, default=1000, help="photos of ~1 MP (default 1000)")
    parser.add_argument("--keep", type=Path, help="generate the photos here and keep them for the next run")
    parser.add_argument("--no-app", action="store_true", help="skip the app-batch measurement")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args(argv)
    if not (MODEL / "model.onnx").is_file():
        print(f"{MODEL} is missing: run `python assets/recipes/build_demo_models.py --only classifier`.")
        return 2
    with tempfile.TemporaryDirectory(prefix="npu-studio-folders-") as tmp:
        root = args.keep or Path(tmp)
        large, small = root / f"large-{args.large}", root / f"small-{args.small}"
        started = time.perf_counter()
        # In a child: this process stays small, and a child's peak RSS on Linux starts from its parent's
        # at fork time (the photo generation would otherwise show up as every child's peak).
        code = (
            "import sys; from pathlib import Path; from tests.bench.folder_photos import make_photos; "
            f"make_photos(Path({str(large)!r}), {args.large}, (4000, 3000)); "
            f"make_photos(Path({str(small)!r}), {args.small}, (1152, 864), seed=1)"
        )
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        print(f"photos ready in {time.perf_counter() - started:.0f} s ({root})")
        compile_bytecode()
        rows = [
            compare(f"{args.large} photos of 12 MP", large, args.rounds),
            compare(f"{args.small} photos of 1 MP", small, args.rounds),
        ]
        if not args.no_app:
            app_rows = [app_batch(large, args.rounds), app_batch(small, args.rounds)]
            worst = min(app_rows, key=lambda row: float(row["ratio"]))
            rows.append({**worst, "ok": all(bool(row["ok"]) for row in app_rows)})
    passed = all(bool(r["ok"]) for r in rows)
    print(f"\noverall: {verdict(passed)}")
    if args.record:
        from tests.bench import perf_report

        large_row, small_row = rows[0], rows[1]
        values = {
            f"{side}_{key}": float(row[key])
            for side, row in (("large", large_row), ("small", small_row))
            for key in ("cli_s", "script_s", "speedup", "cli_rss_mb")
        }
        values["identical"] = float(bool(large_row["identical"]) and bool(small_row["identical"]))
        values["app_ratio"] = float(rows[2]["ratio"]) if len(rows) > 2 else 0.0
        command = " ".join(["python", "tests/bench/bench_folder.py", *(argv if argv is not None else sys.argv[1:])])
        perf_report.record("folder", values, command)
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    raise SystemExit(main())
