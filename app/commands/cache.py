"""`npu-studio cache [list|clear] [--json]`: the compiled-model (EPContext) cache."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from app import paths

if TYPE_CHECKING:
    from app.commands import Subcommands


def register(sub: Subcommands) -> None:
    parser = sub.add_parser(
        "cache", help="list or clear compiled NPU models (first loads compile; later loads use this cache)"
    )
    parser.add_argument("action", nargs="?", choices=("list", "clear"), default="list", help="default: list")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def run(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import CompiledModelCache

    cache = CompiledModelCache(paths.compiled_cache_dir())
    if args.action == "clear":
        removed, freed = cache.clear()
        if args.json:
            print_json({"folder": str(cache.root), "removed": removed, "freed_bytes": freed})
        else:
            print(f"Removed {removed} compiled model(s), {_size(freed)} freed ({cache.root}).")
            print("The next NPU load of each model compiles it again.")
        return 0
    entries = cache.entries()
    if args.json:
        listing = [e.as_dict() for e in entries]
        print_json({"folder": str(cache.root), "total_bytes": cache.total_bytes(), "entries": listing})
        return 0
    print(f"Compiled-model cache: {cache.root}")
    if not entries:
        print("Empty. Models are compiled here the first time they run on an NPU (QNN); the CPU and DirectML")
        print("run ONNX models directly and need no compiled copy.")
        return 0
    for entry in entries:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created))
        print(f"- {entry.model_name} for {entry.ep}  ({_size(entry.size_bytes)}, compiled {created} in "
              f"{entry.compile_seconds:.1f} s)")
        print(f"    {entry.ep_version}; ONNX Runtime {entry.ort_version}"
              + (f"; driver {entry.driver_version}" if entry.driver_version else ""))
        if entry.options:
            print("    options: " + ", ".join(f"{k}={v}" for k, v in sorted(entry.options.items())))
    print(f"{len(entries)} compiled model(s), {_size(cache.total_bytes())}. `npu-studio cache clear` removes them.")
    return 0
