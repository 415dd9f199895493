"""One command, whole process, against what it does at its least: how much NPU Studio adds around the runtime.

    .venv/bin/python tests/bench/bench_cli_start.py [--rounds N] [--photo PHOTO] [--strict] [--record]

Each pair runs as whole processes, alternating (who goes first flips each round), medians compared:

* `npu-studio classify PHOTO --device cpu` and `npu-studio classify PHOTO` (device auto: discovery and the
  plugin EPs included) against tests/bench/one_photo_script.py, the script a user would write (import
  onnxruntime, PIL and numpy, one session, preprocess, run, print the top-5). Goal <= 1.2x.
* `npu-studio devices` against a bare `python -c "import onnxruntime"`. Goal <= 1.3x.

PHOTO defaults to one camera-like 12 MP JPEG made from the sample photos (tests/bench/folder_photos.py).
The CLI runs with its own empty user folder (NPU_STUDIO_HOME), warmed by one uncounted run, as a second
use of an installed app would; the bytecode of NPU Studio's modules is compiled first, as an install has it.
"""

from __future__ import annotations

import argparse
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

from tests.bench import environment  # noqa: E402
from tests.bench.bench_folder import compile_bytecode  # noqa: E402

MODEL = REPO / "assets" / "models" / "efficientnet-lite0"
SCRIPT = Path(__file__).with_name("one_photo_script.py")
CLASSIFY_GOAL = 1.2
DEVICES_GOAL = 1.3


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, the process and its threads) of one whole process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
        if hasattr(os, "wait4"):
            _, status, usage = os.wait4(proc.pid, 0)
            code, cpu = os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
        else:  # pragma: no cover - Windows: no rusage of a child
            code, cpu = proc.wait(), float("nan")
        seconds = time.perf_counter() - started
        if code != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(command)} failed ({code}):\n{err.read().decode(errors='replace')}")
    return seconds, cpu


def _label(command: list[str]) -> str:
    return " ".join("python" if part == sys.executable else part for part in command)[:66]


def compare(
    name: str, ours: list[str], peer: list[str], env: dict[str, str], rounds: int, goal: float
) -> tuple[float, float, bool]:
    """(our median wall seconds, the peer's, whether the ratio meets `goal`)."""
    timed(ours, env)  # warm: the user folder, the file cache
    timed(peer, env)
    mine: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for round_no in range(rounds):
        order = ((ours, mine), (peer, theirs)) if round_no % 2 == 0 else ((peer, theirs), (ours, mine))
        for command, into in order:
            into.append(timed(command, env))
    wall = statistics.median(w for w, _ in mine), statistics.median(w for w, _ in theirs)
    cpu = statistics.median(c for _, c in mine), statistics.median(c for _, c in theirs)
    ratio = wall[0] / wall[1]
    ok = ratio <= goal
    print(f"\n== {name}: {rounds} alternating rounds, whole process, medians")
    print(f"   {'':68}{'wall s':>8}{'CPU s':>8}")
    print(f"   {_label(ours):68}{wall[0]:8.3f}{cpu[0]:8.3f}")
    print(f"   {_label(peer):68}{wall[1]:8.3f}{cpu[1]:8.3f}")
    print(f"   ratio {ratio:.2f}x (CPU time {cpu[0] / cpu[1]:.2f}x)  goal <= {goal}x  {'PASS' if ok else 'FAIL'}")
    pairs = ", ".join(f"{x:.2f}/{y:.2f}" for (x, _), (y, _) in zip(mine, theirs, strict=True))
    print(f"   per round, wall (ours/peer s): {pairs}")
    return wall[0], wall[1], ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--photo", type=Path, help="the photo to classify (default: a generated 12 MP JPEG)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args(argv)
    environment.banner()
    if not (MODEL / "model.onnx").is_file():
        print(f"{MODEL} is missing: run `python assets/recipes/build_demo_models.py --only classifier`.")
        return 2
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="npu-studio-start-") as tmp:
        photo = args.photo
        if photo is None:
            from tests.bench.folder_photos import make_photos

            (photo,) = make_photos(Path(tmp) / "photo", 1, (4000, 3000))
        env = {**os.environ, "PYTHONPATH": str(REPO), "NPU_STUDIO_HOME": str(Path(tmp) / "home")}
        cli = [sys.executable, "-m", "app"]
        script = [sys.executable, str(SCRIPT), str(MODEL), str(photo)]
        cpu = compare("classify one photo, --device cpu", [*cli, "classify", str(photo), "--device", "cpu"], script,
                      env, args.rounds, CLASSIFY_GOAL)
        auto = compare("classify one photo, default device (auto)", [*cli, "classify", str(photo)], script, env,
                       args.rounds, CLASSIFY_GOAL)
        devices = compare("devices", [*cli, "devices"], [sys.executable, "-c", "import onnxruntime"], env,
                          args.rounds, DEVICES_GOAL)  # fmt: skip
    passed = cpu[2] and auto[2] and devices[2]
    print(f"\noverall: {'PASS' if passed else 'FAIL'}  (load average {os.getloadavg()[0]:.1f})")
    if args.record:
        from tests.bench import perf_report

        values = {
            "classify_cpu_s": cpu[0], "classify_script_s": cpu[1], "classify_cpu_ratio": cpu[0] / cpu[1],
            "classify_auto_s": auto[0], "classify_auto_ratio": auto[0] / auto[1],
            "devices_s": devices[0], "import_ort_s": devices[1], "devices_ratio": devices[0] / devices[1],
        }  # fmt: skip
        command = " ".join(["python", "tests/bench/bench_cli_start.py", *(argv if argv is not None else sys.argv[1:])])
        perf_report.record("start", values, command)
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
