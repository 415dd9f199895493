"""JPEG folders for the folder benchmarks, made from the bundled sample photos, in two kinds.

* camera-like: each photo is a sample scaled to the wanted size, shifted and given fine noise, so it
  compresses (and costs to decode) like a camera's JPEG: ~3-5 MB at 12 MP.
* smooth: each photo is a small crop of a sample upscaled to the wanted size, low in detail, as a
  screenshot, a scan or a phone photo of a document is: under 1 MB at 12 MP, fast to decode, so
  inference is a larger share of the work.

Saved at quality 90; deterministic for a seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "assets" / "samples"
KINDS = ("camera", "smooth")
NOISE = 14  # +-: camera-like JPEG sizes (3-5 MB at 12 MP)
SMOOTH_SOURCE = 480  # the longer side a smooth photo is upscaled from


def make_photos(folder: Path, count: int, size: tuple[int, int], seed: int = 0, kind: str = "camera") -> list[Path]:
    """`count` JPEGs of `size` (width, height) and `kind` in `folder`; existing files of the same name are kept."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    folder.mkdir(parents=True, exist_ok=True)
    sources = sorted(p for p in SAMPLES.iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"})
    rng = np.random.default_rng(seed)
    width, height = size
    if kind == "camera":
        bases = [Image.open(p).convert("RGB").resize(size, Image.Resampling.BILINEAR) for p in sources]
        noise = rng.integers(-NOISE, NOISE + 1, (height, width, 3), dtype=np.int16)
    else:
        small = (SMOOTH_SOURCE, max(1, SMOOTH_SOURCE * height // width))
        bases = [Image.open(p).convert("RGB").resize(small, Image.Resampling.BILINEAR) for p in sources]
    made = []
    for i in range(count):
        path = folder / f"photo_{i:04d}.jpg"
        made.append(path)
        if path.exists():
            continue
        base = bases[i % len(bases)]
        shift = int(rng.integers(0, 64)) * (i // len(bases) + 1)
        if kind == "camera":
            arr = np.roll(np.asarray(base, dtype=np.int16), shift, axis=1) + np.roll(noise, i, axis=0)
            photo = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
        else:
            rolled = Image.fromarray(np.roll(np.asarray(base), shift % base.width, axis=1))
            photo = rolled.resize(size, Image.Resampling.BICUBIC)
        photo.save(path, "JPEG", quality=90)
    return made
