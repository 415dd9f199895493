"""Camera-like JPEG folders for the folder benchmarks, made from the bundled sample photos.

Each photo is a sample photo scaled to the wanted size, shifted and given fine noise (so it compresses
like a camera JPEG, not like a smooth upscale) and saved at quality 90. Deterministic for a seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "assets" / "samples"


def make_photos(folder: Path, count: int, size: tuple[int, int], seed: int = 0) -> list[Path]:
    """`count` JPEGs of `size` (width, height) in `folder`; existing files of the same name are kept."""
    folder.mkdir(parents=True, exist_ok=True)
    sources = sorted(p for p in SAMPLES.iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"})
    rng = np.random.default_rng(seed)
    width, height = size
    bases = [Image.open(p).convert("RGB").resize(size, Image.Resampling.BILINEAR) for p in sources]
    noise = rng.integers(-10, 11, (height, width, 3), dtype=np.int16)
    made = []
    for i in range(count):
        path = folder / f"photo_{i:04d}.jpg"
        made.append(path)
        if path.exists():
            continue
        base = np.asarray(bases[i % len(bases)], dtype=np.int16)
        shift = int(rng.integers(0, 64))
        arr = np.roll(base, shift * (i // len(bases) + 1), axis=1) + np.roll(noise, i, axis=0)
        Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(path, quality=90)
    return made
