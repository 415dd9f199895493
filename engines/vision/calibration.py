"""Calibration data for QDQ quantization: the photos of a folder, each seen whole and (augmented) mirrored
and cropped closer, preprocessed exactly as classification does, and fed to onnxruntime.quantization
through its CalibrationDataReader protocol.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from engines.errors import ImageError
from engines.models.manifest import Preprocess
from engines.photo_folders import walk_photos
from engines.vision.images import crop_aspect, load_rgb, resize_and_crop, to_tensor


def find_photos(folder: str | os.PathLike[str]) -> list[Path]:
    """The photos of a calibration folder, walked as every photo folder is (engines/photo_folders.py)."""
    root = Path(folder)
    if not root.is_dir():
        raise ImageError(f"Calibration folder not found: {root}", "Give a folder of photos like the ones you classify.")
    walk = walk_photos([root])
    for problem in walk.unreadable_folders():
        raise ImageError(f"The calibration folder {root} cannot be read: {problem.detail}.",
                         "Check its permissions, or give another folder.")  # fmt: skip
    if not walk.photos:
        raise ImageError(f"No photos in {root}.", "Put a few JPEG or PNG photos there (10 or more is better).")
    return [Path(p) for p in walk.photos]


def views(img: Image.Image, spec: Preprocess, augment: bool) -> Iterator[tuple[str, np.ndarray]]:
    """The standard view of a photo, then (with `augment`) a mirror and crops at a closer zoom."""
    img = crop_aspect(img)  # the zooms below enlarge the whole photo: a 20000 x 1 strip would take gigabytes
    yield "centre", to_tensor(resize_and_crop(img, spec), spec)
    if not augment:
        return
    mirrored = ImageOps.mirror(img)
    yield "mirror", to_tensor(resize_and_crop(mirrored, spec), spec)
    h, w = spec.input_size
    closer = Preprocess(
        input_size=spec.input_size,
        resize_shorter=int(spec.resize_shorter * 1.3),
        resample=spec.resample,
        mean=spec.mean,
        std=spec.std,
        layout=spec.layout,
        color=spec.color,
    )
    for source, tag in ((img, ""), (mirrored, " mirror")):
        scale = closer.resize_shorter / min(source.size)
        big = source.resize(
            (max(w, round(source.size[0] * scale)), max(h, round(source.size[1] * scale))),
            Image.Resampling.BICUBIC,
            reducing_gap=3.0,
        )
        bw, bh = big.size
        for name, (left, top) in {
            "top-left": (0, 0),
            "bottom-right": (bw - w, bh - h),
        }.items():
            yield f"{name}{tag}", to_tensor(big.crop((left, top, left + w, top + h)), spec)
    whole = Preprocess(
        input_size=spec.input_size,
        resize_shorter=max(h, w),
        resample=spec.resample,
        mean=spec.mean,
        std=spec.std,
        layout=spec.layout,
        color=spec.color,
    )
    yield "wide", to_tensor(resize_and_crop(img, whole), spec)


def calibration_set(
    photos: Sequence[Path], spec: Preprocess, augment: bool
) -> tuple[list[tuple[str, np.ndarray]], list[tuple[str, np.ndarray]], list[str]]:
    """(every view, the centre views only, notes about photos that could not be read)."""
    all_views: list[tuple[str, np.ndarray]] = []
    centre: list[tuple[str, np.ndarray]] = []
    notes: list[str] = []
    for photo in photos:
        try:
            img = load_rgb(photo, min_side=int(max(spec.resize_shorter * 1.3, *spec.input_size)))
        except ImageError as exc:
            notes.append(f"Skipped {photo.name}: {exc.message}")
            continue
        for tag, tensor in views(img, spec, augment):
            all_views.append((f"{photo.name} {tag}", tensor))
            if tag == "centre":
                centre.append((photo.name, tensor))
    if not centre:
        raise ImageError("None of the calibration photos could be read.", "Use JPEG or PNG photos.")
    return all_views, centre, notes


class PhotoReader:
    """onnxruntime's CalibrationDataReader protocol over preprocessed views."""

    def __init__(self, input_name: str, tensors: Sequence[np.ndarray]) -> None:
        self.input_name = input_name
        self.tensors = list(tensors)
        self._next = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self._next >= len(self.tensors):
            return None
        tensor = self.tensors[self._next]
        self._next += 1
        return {self.input_name: tensor[None].astype(np.float32, copy=False)}

    def rewind(self) -> None:
        self._next = 0

    def __len__(self) -> int:
        return len(self.tensors)
