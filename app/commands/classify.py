"""`npu-studio classify IMAGE... [--device ...] [--strict] [--top-k N] [--json]`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app import paths

if TYPE_CHECKING:
    from app.commands import Subcommands
    from engines import PhotoWalk

DEFAULT_CLASSIFIER = "efficientnet-lite0"
PROGRESS_AFTER_S = 2.0  # a batch shorter than this needs no progress line


def register(sub: Subcommands) -> None:
    parser = sub.add_parser("classify", help="classify photos on a chosen device")
    parser.add_argument("images", nargs="+", metavar="IMAGE", help="image files or folders")
    parser.add_argument(
        "--device", default="auto", help="auto, npu, gpu, cpu, efficiency, performance or an EP name (default auto)"
    )
    parser.add_argument("--strict", action="store_true", help="fail instead of falling back to another device")
    parser.add_argument("--model", help="classifier folder (default: the bundled EfficientNet-Lite0)")
    parser.add_argument("--top-k", type=int, default=5, metavar="N", help="classes to show (default 5)")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (default: ONNX Runtime's)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def model_folder(name: str | None, default: str = DEFAULT_CLASSIFIER) -> Path:
    """A model given as a folder path, or by name in the user's library or the bundled models."""
    from engines import locate_model

    return locate_model(name or default, paths.model_roots()).folder


def expand_images(items: list[str]) -> tuple[list[Path], PhotoWalk]:
    """The photos to classify (engines/photo_folders.py: the walk the Classify view makes too) and the walk,
    whose skipped entries the command reports. No photo at all is an error that says why."""
    from engines import ImageError, walk_photos

    walk = walk_photos(items)
    if not walk.photos:
        unreadable = walk.unreadable_folders()
        if unreadable and len(unreadable) == len(walk.skipped):
            first = unreadable[0]
            raise ImageError(f"The folder {first.path} cannot be read: {first.detail}.",
                             "Check its permissions, or give another folder.")  # fmt: skip
        said = "; ".join(walk.notes())
        raise ImageError(f"No images to classify{f' ({said})' if said else ''}.",
                         "Give image files or a folder with images.")  # fmt: skip
    return [Path(p) for p in walk.photos], walk


class FolderProgress:
    """A progress line on stderr for batches that take a while (silent for the first `after_s` seconds,
    then at most every `every_s`); overwritten in place on a terminal, one line per update otherwise."""

    def __init__(self, total: int, stream: TextIO, after_s: float | None = None, every_s: float = 1.0) -> None:
        self.total = total
        self.stream = stream
        self.after_s = PROGRESS_AFTER_S if after_s is None else after_s
        self.every_s = every_s
        self.done = 0
        self.started = time.monotonic()
        self.last_shown = 0.0
        self.shown = False
        self.in_place = bool(getattr(stream, "isatty", lambda: False)())

    def __call__(self, result: object) -> None:
        self.done = min(self.total, self.done + 1)
        now = time.monotonic()
        elapsed = now - self.started
        if elapsed >= self.after_s and (now - self.last_shown >= self.every_s or self.done == self.total):
            self.last_shown = now
            self._show(elapsed)

    def _show(self, elapsed: float) -> None:
        rate = self.done / elapsed if elapsed > 0 else 0.0
        line = f"classified {self.done}/{self.total} photos ({rate:.0f} photos/s)"
        self.stream.write(("\r" + line) if self.in_place else line + "\n")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown and self.in_place:
            self.stream.write("\n")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    import sys

    import engines
    from app.terminal import print_json

    if args.top_k < 1:
        raise engines.StudioError("--top-k must be at least 1.")
    choice = engines.DeviceChoice.parse(args.device, strict=args.strict)
    images, walk = expand_images(args.images)
    if not args.json:
        for note in walk.notes():
            print(f"npu-studio: note: {note}", file=sys.stderr)

    def progress(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr)

    # A device that fails mid-run (GPU removed, NPU out of memory) is marked unusable and the work moves
    # to the next device, unless strict mode says it must run where it was asked.
    opening: dict[str, Any] = {
        "cache": paths.compiled_cache_dir(),
        "on_progress": progress,
        "library": paths.model_roots(),
        "ask": None if args.strict else engines.accept_first,
        "threads": args.threads,
    }
    if len(images) == 1:
        # No warm-up run: the photo's own run checks the output as the warm-up would, and one run fewer
        # is ~10 % of a one-photo process.
        classifier = engines.open_classifier(args.model or DEFAULT_CLASSIFIER, choice, warmup=False, **opening)
        results = [classifier.classify(images[0], k=args.top_k)]
    else:
        # --json keeps stderr free of progress (scripts parse stdout, and some read stderr as errors).
        on_result = None if args.json else FolderProgress(len(images), sys.stderr)
        try:
            classifier, results = engines.classify_folder(
                args.model or DEFAULT_CLASSIFIER, images, choice, k=args.top_k, on_result=on_result, **opening
            )
        finally:
            if on_result is not None:
                on_result.close()
    placement = classifier.placement
    spec = classifier.spec
    for notice in classifier.device_switches:
        print(f"npu-studio: {notice}", file=sys.stderr)
    failed = [r for r in results if r.error]
    if args.json:
        print_json(
            {
                "model": spec.name,
                "device": choice.describe(),
                "placement": placement.as_dict(),
                "model_folder": str(classifier.model_folder),
                "session_seconds": classifier.create_seconds,
                "compiled_cache": classifier.cache.as_dict() if classifier.cache else None,
                "device_switches": classifier.device_switches,
                "skipped": [s.as_dict() for s in walk.skipped],
                "results": [r.as_dict() for r in results],
            }
        )
    else:
        print(f"{spec.name} ran on {placement.ran_on()} (requested: {choice.describe()})")
        if placement.fell_back:
            print(f"Fell back: {placement.reason}")
        for result in results:
            print(f"\n{result.path}")
            if result.error:
                print(f"  error: {result.error}")
                continue
            for score in result.top:
                print(f"  {score.probability * 100:6.2f}%  {score.label}")
            print(f"  inference {result.latency_ms:.1f} ms, preprocessing {result.preprocess_ms:.1f} ms")
    if failed and len(results) == 1:
        raise engines.StudioError(failed[0].error)
    return 1 if failed else 0
