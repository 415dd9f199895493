"""Per-photo costs of a folder, measured one at a time on one core: decoding + preprocessing (the CLI's own
fast path, engines.vision.images.preprocess) and inference (a one-thread onnxruntime session, batch 1).
The folder benchmark states its 2-core bound from them.

    python folder_costs.py MODEL_DIR FOLDER [--photos N]  -> JSON: decode_ms, infer_ms (medians), photos
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--photos", type=int, default=30, help="photos to time (spread over the folder)")
    args = parser.parse_args(argv)

    import onnxruntime as ort

    from engines.vision.classifier import read_preprocess
    from engines.vision.images import preprocess

    spec = read_preprocess(args.model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(args.model / "model.onnx"), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    photos = sorted(p for p in args.folder.iterdir() if p.is_file())
    step = max(1, len(photos) // max(1, args.photos))
    chosen = photos[::step][: args.photos]
    session.run(None, {name: preprocess(chosen[0], spec)[None]})  # warm-up: arena, kernels, file cache
    decode, infer = [], []
    for path in chosen:
        started = time.perf_counter()
        tensor = preprocess(path, spec)
        decoded = time.perf_counter()
        session.run(None, {name: tensor[None]})
        done = time.perf_counter()
        decode.append((decoded - started) * 1000)
        infer.append((done - decoded) * 1000)
    print(json.dumps({"decode_ms": statistics.median(decode), "infer_ms": statistics.median(infer),
                      "photos": len(chosen)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
