"""What checking a model added by reference costs before it loads, side by side in one run.

    .venv/bin/python tests/bench/bench_reference_check.py [--model FOLDER] [--runs 7]

The model (the demo chat model by default) is linked into a temporary folder, added by reference, and then
checked three ways, each the median of `--runs`, the order rotating every round:

- stamps only: every file's size and modification time (what a reference was checked with before);
- before a load: the same, plus a re-hash of every file that is not a big weight file (configs, tokenizer,
  chat template, the graph) and of a big one whose inode or ctime moved (`check_reference`);
- verify: every file re-hashed (`npu-studio models verify`).

It also prints SHA-256's throughput here, and what re-hashing a model of `--gb` GB would cost at that rate
(its small files are a few MB whatever the weights weigh, so the check before a load barely grows).
The page cache is warm: a first, cold read of multi-GB weights from disk costs more than these figures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import environment
from environment import REPO

from engines.models import reference_check
from engines.models.manifest import read_manifest
from engines.models.reference import add_reference
from engines.models.reference_check import always_hashed, check_reference


def _linked_copy(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for file in source.iterdir():
        if file.is_file() and file.name != "manifest.json":
            try:
                os.link(file, target / file.name)
            except OSError:
                shutil.copyfile(file, target / file.name)
    return target


def _median_ms(action: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=REPO / "assets" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--gb", type=float, default=3.0, help="the size of the model to extrapolate to")
    args = parser.parse_args(argv)
    environment.banner()
    work = Path(tempfile.mkdtemp(prefix="npu-studio-bench-reference-"))
    try:
        folder = _linked_copy(args.model, work / "model")
        entry = add_reference(folder, work / "library", name="bench")
        manifest = read_manifest(work / "library" / "bench")
        files = [(f["path"], int(f["size"])) for f in manifest["files"]]
        total = sum(size for _, size in files)
        hashed = [(rel, size) for rel, size in files if always_hashed(rel, size)]
        print(f"model: {args.model.name}, {len(files)} files, {total / 1e6:.1f} MB; re-hashed before every load: "
              f"{sum(size for _, size in hashed) / 1e6:.2f} MB ({', '.join(rel for rel, _ in hashed)})")  # fmt: skip

        def stamps_only() -> object:
            saved = reference_check.always_hashed
            reference_check.always_hashed = lambda rel, size: False  # type: ignore[assignment]
            try:
                return _no_problems(check_reference(manifest, folder))
            finally:
                reference_check.always_hashed = saved  # type: ignore[assignment]

        ways: dict[str, Callable[[], object]] = {
            "stamps only": stamps_only,
            "before a load": lambda: _no_problems(check_reference(manifest, folder)),
            "verify": lambda: _no_problems(check_reference(manifest, folder, hashes=True)),
        }
        for action in ways.values():
            action()  # warm the page cache and the imports
        results: dict[str, list[float]] = {name: [] for name in ways}
        names = list(ways)
        for round_ in range(args.runs):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                results[name].append(_median_ms(ways[name], 1))
        base = statistics.median(results["stamps only"])
        for name in names:
            ms = statistics.median(results[name])
            print(f"{name:<14} {ms:9.2f} ms   x{ms / base:7.1f} of stamps only")
        data = os.urandom(64 << 20)
        started = time.perf_counter()
        hashlib.sha256(data).hexdigest()
        rate = len(data) / (time.perf_counter() - started)
        print(f"sha256 here: {rate / 1e6:.0f} MB/s (64 MB in memory)")
        before_load = statistics.median(results["before a load"])
        print(f"a {args.gb:g} GB model at that rate: verify ~{args.gb * 1e9 / rate:.1f} s; before a load ~"
              f"{before_load:.0f} ms (its small files hashed, its weights only stat()ed)")  # fmt: skip
        print(f"(entry {entry.name} referred to {folder})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _no_problems(problems: list[str]) -> list[str]:
    if problems:
        raise SystemExit(f"the reference changed while it was measured: {problems}")
    return problems


if __name__ == "__main__":
    sys.exit(main())
