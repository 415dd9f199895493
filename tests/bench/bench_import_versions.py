"""Import time of candidate releases of one package, side by side in one run (how the lock's pins are picked).

    .venv/bin/python tests/bench/bench_import_versions.py ml-dtypes==0.6.0 ml-dtypes==0.7.0 [--import onnx]
    .venv/bin/python tests/bench/bench_import_versions.py numpy==2.3.5 numpy==2.4.6 --import numpy --runs 15

Each candidate is installed once with `pip install --no-deps --target` into a cache folder
(~/.cache/npu-studio-bench/imports) and put first on PYTHONPATH, so it shadows this environment's copy while
everything else stays as installed. Then `python -X importtime -c "import MODULE"` runs for each candidate in
turn (the order rotates every round), and the median of the module's cumulative import time and of the
whole process's wall time are printed, with each candidate's ratio to the first.
`--import` names the module to time (default: the package's own import name), e.g. `onnx` to see what a
release of `ml-dtypes` costs the module that imports it.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
CACHE = Path(os.environ.get("NPU_STUDIO_BENCH_CACHE", Path.home() / ".cache" / "npu-studio-bench")) / "imports"
IMPORT_NAMES = {"pillow": "PIL", "pyside6-essentials": "PySide6", "protobuf": "google.protobuf", "pyyaml": "yaml"}


def install(spec: str) -> Path:
    """The folder holding `spec` alone (installed once, reused)."""
    folder = CACHE / re.sub(r"[^A-Za-z0-9_.=-]", "_", spec)
    if not (folder / ".complete").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:", "--upgrade",
             "--target", str(folder), spec],
            check=True,
        )
        (folder / ".complete").write_text(spec, encoding="utf-8")
    return folder


def cumulative_us(stderr: str, module: str) -> int:
    """The cumulative import time `-X importtime` reports for `module` itself."""
    for line in stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2].strip() == module and parts[0].startswith("import time:"):
            return int(parts[1].strip())
    raise SystemExit(f"`-X importtime` printed no line for {module}:\n{stderr[-2000:]}")


def one_run(folder: Path, module: str) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], env=env, capture_output=True, text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"import {module} failed with {folder.name}:\n{proc.stderr[-2000:]}")
    return cumulative_us(proc.stderr, module) / 1e6, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="+", help="candidate releases, e.g. ml-dtypes==0.6.0 ml-dtypes==0.7.0")
    parser.add_argument("--import", dest="module", default=None, help="module to time (default: the package's)")
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args(argv)
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's
    name = Requirement(args.specs[0]).name.lower()
    module = args.module or IMPORT_NAMES.get(name, name.replace("-", "_"))
    folders = [install(spec) for spec in args.specs]
    for folder in folders:  # warm the file cache and the bytecode of each candidate; not counted
        one_run(folder, module)
    times: dict[str, list[tuple[float, float]]] = {spec: [] for spec in args.specs}
    for round_no in range(args.runs):
        shift = round_no % len(folders)
        for spec, folder in list(zip(args.specs, folders, strict=True))[shift:] + list(
            zip(args.specs, folders, strict=True)
        )[:shift]:
            times[spec].append(one_run(folder, module))
    print(f"import {module}: {args.runs} runs per candidate, alternating; medians")
    print(f"{'candidate':32} {'import s':>9} {'process s':>10} {'import vs first':>16}")
    base = statistics.median(t for t, _ in times[args.specs[0]])
    for spec in args.specs:
        imp = statistics.median(t for t, _ in times[spec])
        wall = statistics.median(w for _, w in times[spec])
        print(f"{spec:32} {imp:9.3f} {wall:10.3f} {imp / base:15.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
