"""`npu-studio quantize MODEL --calibration DIR [--activations uint8|uint16] [--weights uint8|int8] [--out DIR]`.

Makes the QDQ variant of a float image classifier for the NPU, calibrated on photos, and reports its
top-1 agreement with the float model and the CPU latency of both. By default the variant goes to the
user's model folder as `<name>-qdq`, where an NPU device choice finds it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app import paths

if TYPE_CHECKING:
    from app.commands import Subcommands


def register(sub: Subcommands) -> None:
    parser = sub.add_parser(
        "quantize",
        help="make a QDQ (quantized) variant of an image classifier for the NPU",
        description="Quantize a float image classifier to QDQ for the NPU (QNN), calibrated on photos; report "
        "top-1 agreement with the float model and both CPU latencies.",
    )
    parser.add_argument("model", metavar="MODEL", help="model folder (with manifest.json), .onnx file, or model name")
    parser.add_argument("--calibration", required=True, metavar="DIR", help="folder of photos to calibrate on")
    parser.add_argument("--activations", choices=("uint8", "uint16"), default="uint16", help="default uint16")
    parser.add_argument("--weights", choices=("uint8", "int8"), default="uint8", help="default uint8")
    parser.add_argument("--out", metavar="DIR", help="output folder (default: <user models>/<name>-qdq)")
    parser.add_argument("--force", action="store_true", help="replace the output folder if it exists")
    parser.add_argument("--no-augment", action="store_true", help="calibrate on the photos only (no flips/crops)")
    parser.add_argument("--runs", type=int, default=20, metavar="N", help="latency runs per model (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def _source(text: str) -> Path:
    path = Path(text)
    if path.exists():
        return path
    from app.commands.classify import model_folder

    return model_folder(text)


def _default_out(source: Path) -> Path:
    from engines import FloatSource

    name = FloatSource.open(source).name
    return paths.user_models_dir() / f"{name}-qdq"


def run(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import QuantizeOptions, StudioError, quantize_classifier

    if args.runs < 1:
        raise StudioError("--runs must be at least 1.", "Use e.g. --runs 20.")
    source = _source(args.model)
    out = Path(args.out) if args.out else _default_out(source)
    options = QuantizeOptions(
        activations=args.activations,
        weights=args.weights,
        augment=not args.no_augment,
        latency_runs=args.runs,
        force=args.force,
    )

    def progress(text: str) -> None:
        if not args.json:
            print(text, file=sys.stderr, flush=True)

    report = quantize_classifier(source, args.calibration, out, options, on_progress=progress)
    if args.json:
        print_json(report.as_dict())
    else:
        print("\n".join(report.summary_lines()))
    return 0
