"""IOBinding vs plain `run` on the CPU EP, side by side in one run, on the demo classifier.

    .venv/bin/python tests/bench/bench_iobinding.py [--model DIR] [--rounds N] [--batch 1,8]

Two ImageClassifier instances on the same model, one with `io_binding=True` (input bound from numpy,
output bound to a preallocated OrtValue reused between calls) and one plain (`session.run`, a new
output array each call). For each batch size the two alternate call by call (who goes first flips
every round) over the same preprocessed photos; medians and the bound/plain ratio are printed.

What to expect: on the CPU EP the input is already in the EP's memory and the output is 1000 floats
per image, so binding saves one small allocation per call and little else: a ratio close to 1.0.
IOBinding pays where inputs or outputs would otherwise cross to a device (DirectML, QNN, CUDA), which
is why engines/vision/classifier.py turns it on only for those EPs (IOBINDING_EPS).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from engines.types import DeviceChoice  # noqa: E402
from engines.vision.classifier import ClassifierSpec, ImageClassifier  # noqa: E402
from engines.vision.images import preprocess  # noqa: E402

DEFAULT_MODEL = REPO / "assets" / "models" / "efficientnet-lite0"
SAMPLES = REPO / "assets" / "samples"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--rounds", type=int, default=60, help="calls per variant and batch size")
    parser.add_argument("--batch", default="1,8", help="comma-separated batch sizes")
    args = parser.parse_args()
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's
    if not (args.model / "manifest.json").is_file():
        print(
            f"No model at {args.model}. Build it: .venv/bin/python assets/recipes/build_demo_models.py "
            "--only classifier",
            file=sys.stderr,
        )
        return 2
    spec = ClassifierSpec.from_folder(args.model)
    cpu = DeviceChoice.parse("cpu")
    bound = ImageClassifier(spec, cpu, io_binding=True)
    plain = ImageClassifier(spec, cpu, io_binding=False)
    assert bound.io_binding and not plain.io_binding
    photos = sorted(p for p in SAMPLES.iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"})
    tensors = [preprocess(p, spec.preprocess) for p in photos]
    print(f"model {spec.name}, CPU EP ({bound.placement.badge()}), {len(photos)} photos, {args.rounds} rounds")
    print(f"{'batch':>5}  {'plain run (ms)':>15}  {'IOBinding (ms)':>15}  {'bound/plain':>11}  outputs equal")
    for batch_size in (int(b) for b in args.batch.split(",")):
        batches = [
            np.stack([tensors[(start + i) % len(tensors)] for i in range(batch_size)]) for start in range(len(tensors))
        ]
        same = all(np.allclose(bound.infer(b), plain.infer(b), atol=1e-5) for b in batches)
        times: dict[str, list[float]] = {"plain": [], "bound": []}
        for round_no in range(args.rounds):
            batch = batches[round_no % len(batches)]
            order = [("plain", plain), ("bound", bound)]
            if round_no % 2:
                order.reverse()
            for name, classifier in order:
                started = time.perf_counter()
                classifier.infer(batch)
                times[name].append((time.perf_counter() - started) * 1000)
        plain_ms = statistics.median(times["plain"])
        bound_ms = statistics.median(times["bound"])
        print(f"{batch_size:>5}  {plain_ms:>15.2f}  {bound_ms:>15.2f}  {bound_ms / plain_ms:>11.3f}  {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
