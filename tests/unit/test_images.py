"""Decoding and preprocessing: every kind of photo users throw at it, and every bad file."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engines.errors import ImageError
from engines.models.manifest import Preprocess
from engines.vision.images import load_rgb, preprocess, resize_and_crop, to_tensor

SPEC = Preprocess()


def _save(img: Image.Image, path: Path, **kwargs: object) -> Path:
    img.save(path, **kwargs)
    return path


def test_modes_become_rgb(tmp_path: Path) -> None:
    cases = {
        "gray.png": Image.new("L", (40, 30), 128),
        "rgba.png": Image.new("RGBA", (40, 30), (255, 0, 0, 0)),
        "palette.png": Image.new("RGB", (40, 30), (0, 0, 255)).convert("P"),
        "cmyk.jpg": Image.new("CMYK", (40, 30), (0, 255, 255, 0)),
        "bw.bmp": Image.new("1", (40, 30), 1),
    }
    for name, img in cases.items():
        rgb = load_rgb(_save(img, tmp_path / name))
        assert rgb.mode == "RGB" and rgb.size == (40, 30), name
    # A fully transparent pixel is composited on white, not black.
    assert load_rgb(tmp_path / "rgba.png").getpixel((0, 0)) == (255, 255, 255)
    assert load_rgb(tmp_path / "palette.png").getpixel((0, 0)) == (0, 0, 255)
    red = load_rgb(tmp_path / "cmyk.jpg").getpixel((5, 5))
    assert isinstance(red, tuple) and red[0] > 200 and red[1] < 60


def test_16_bit_images_keep_their_contrast(tmp_path: Path) -> None:
    arr = np.zeros((20, 20), dtype=np.uint16)
    arr[:, 10:] = 65535
    path = tmp_path / "deep.png"
    Image.fromarray(arr).save(path)
    rgb = np.asarray(load_rgb(path))
    assert rgb[0, 0, 0] == 0 and rgb[0, 15, 0] == 255


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    img = Image.new("RGB", (60, 20), (10, 200, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise when shown
    path = tmp_path / "rotated.jpg"
    img.save(path, exif=exif.tobytes())
    assert load_rgb(path).size == (20, 60)


def test_animated_gif_uses_the_first_frame(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (16, 16), c) for c in [(255, 0, 0), (0, 255, 0)]]
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=100, loop=0)
    pixel = load_rgb(path).getpixel((4, 4))
    assert isinstance(pixel, tuple) and pixel[0] > 200 and pixel[1] < 50


def test_large_jpegs_are_decoded_at_reduced_scale(tmp_path: Path) -> None:
    path = _save(Image.new("RGB", (4000, 3000), (90, 120, 30)), tmp_path / "big.jpg", quality=80)
    img = load_rgb(path, min_side=256)
    assert 256 <= min(img.size) < 3000 // 4, "draft mode should decode at 1/8 or 1/4 scale"
    assert min(load_rgb(path).size) == 3000


def test_wrong_extension_and_unicode_path_still_work(tmp_path: Path) -> None:
    folder = tmp_path / "фото 写真 📷"
    folder.mkdir()
    path = _save(Image.new("RGB", (30, 30), "white"), folder / "actually-a-png.jpg", format="PNG")
    assert load_rgb(path).size == (30, 30)


def test_preprocess_shape_range_and_layout(tmp_path: Path) -> None:
    path = _save(Image.new("RGB", (500, 300), (127, 255, 0)), tmp_path / "wide.png")
    tensor = preprocess(path, SPEC)
    assert tensor.shape == (3, 224, 224) and tensor.dtype == np.float32
    assert np.allclose(tensor[0], 0.0) and np.allclose(tensor[1], 128 / 128) and np.allclose(tensor[2], -127 / 128)
    nhwc = to_tensor(resize_and_crop(load_rgb(path), SPEC), Preprocess(layout="NHWC", color="BGR"))
    assert nhwc.shape == (224, 224, 3)
    assert np.allclose(nhwc[..., 0], -127 / 128)  # BGR: blue first


def test_resize_keeps_aspect_and_centre_crops() -> None:
    img = Image.new("RGB", (1000, 500))
    img.paste((255, 0, 0), (0, 0, 250, 500))  # a red strip on the left quarter is cropped away
    out = resize_and_crop(img, SPEC)
    assert out.size == (224, 224)
    assert all(out.getpixel((x, 112)) == (0, 0, 0) for x in (0, 112, 223))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty (0 bytes)"),
        (b"this is a text file, not a photo\n" * 10, "not an image"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.jpg"
    path.write_bytes(content)
    with pytest.raises(ImageError) as caught:
        preprocess(path, SPEC)
    assert expected in caught.value.message


def test_truncated_jpeg(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jpg"
    Image.effect_noise((400, 300), 50).convert("RGB").save(whole, quality=90)
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(ImageError) as caught:
        preprocess(cut, SPEC)
    assert "truncated" in caught.value.message


def _png_header_only(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")


@pytest.mark.parametrize("side", [10_000, 20_000])  # 100 MP (Pillow warns) and 400 MP (Pillow refuses)
def test_decompression_bombs_are_refused(tmp_path: Path, side: int) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(_png_header_only(side, side))
    with pytest.raises(ImageError) as caught:
        preprocess(path, SPEC)
    assert "too large to open safely" in caught.value.message
    assert "megapixels" in caught.value.hint


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="not found"):
        preprocess(tmp_path / "nope.png", SPEC)
    with pytest.raises(ImageError, match="is a folder"):
        preprocess(tmp_path, SPEC)


def test_bytes_input(tmp_path: Path) -> None:
    path = _save(Image.new("RGB", (64, 64), "white"), tmp_path / "w.png")
    assert preprocess(path.read_bytes(), SPEC).shape == (3, 224, 224)
    with pytest.raises(ImageError, match="empty"):
        preprocess(b"", SPEC)


def test_manifest_preprocessing_is_validated() -> None:
    assert Preprocess.from_manifest({"input_size": [160, 160], "resize_shorter": 180}).input_size == (160, 160)
    for bad in ({"input_size": [1]}, {"mean": [1, 2]}, {"resample": "magic"}, {"layout": "CHWN"}):
        with pytest.raises(ValueError):
            Preprocess.from_manifest(bad)


@pytest.mark.parametrize(
    "spec",
    [
        Preprocess(),
        Preprocess(layout="NHWC", color="BGR"),
        Preprocess(mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_to_tensor_gives_the_same_bits_as_normalising_the_float_image(
    spec: Preprocess, dtype: type[np.floating]
) -> None:
    # What a hand-written script computes: (float32(pixels) - mean) / std, then the layout.
    pixels = np.random.default_rng(3).integers(0, 256, (224, 224, 3), dtype=np.uint8)
    floats = pixels.astype(np.float32)
    if spec.color == "BGR":
        floats = floats[..., ::-1]
    expected = (floats - np.asarray(spec.mean, np.float32)) / np.asarray(spec.std, np.float32)
    if spec.layout == "NCHW":
        expected = expected.transpose(2, 0, 1)
    tensor = to_tensor(Image.fromarray(pixels), spec, dtype)
    assert tensor.dtype == dtype and tensor.flags.c_contiguous
    assert np.array_equal(tensor, np.ascontiguousarray(expected).astype(dtype))


def test_a_tiny_std_gives_infinities_without_a_warning() -> None:
    """A hostile manifest's std: the tensor holds inf (the result check refuses the model), and numpy's
    overflow warning does not leak to the user's console."""
    import warnings

    img = Image.new("RGB", (8, 8), (200, 10, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = to_tensor(img, Preprocess(input_size=(8, 8), std=(1e-45, 1e-45, 1e-45)))
    assert not np.isfinite(tensor).all()


def test_a_resize_split_in_two_passes_gives_the_very_bytes_of_one_resize() -> None:
    from engines.vision import images

    rng = np.random.default_rng(5)
    sizes = [(1152, 864), (864, 1152), (577, 1350), (277, 1543), (1500, 300), (300, 1500), (1679, 1897), (640, 480)]
    sizes += [(int(rng.integers(100, 1600)), int(rng.integers(100, 1600))) for _ in range(40)]
    images._GEOMETRIES.clear()
    split = 0
    for w, h in sizes:
        for mode in ("RGB", "L"):
            pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            img = Image.fromarray(pixels).convert(mode)
            scale = 256 / min(w, h)
            new_w, new_h = max(224, round(w * scale)), max(224, round(h * scale))
            left, top = (new_w - 224) // 2, (new_h - 224) // 2
            if new_w * new_h > images.MAX_RESIZE_FACTOR * 224 * 224:
                continue  # the long-strip path: resized through a box, not this one
            one = img.resize((new_w, new_h), Image.Resampling.BICUBIC, reducing_gap=3.0)
            expected = np.asarray(one.crop((left, top, left + 224, top + 224)))
            for _ in range(3):  # first sight, the probe, then the verdict
                assert np.array_equal(np.asarray(resize_and_crop(img, SPEC)), expected), (w, h, mode)
            split += images._GEOMETRIES.get((mode, w, h, new_w, new_h, left, 224, Image.Resampling.BICUBIC)) is True
    assert split >= 40  # most shapes take the split (tall strips and large reductions do not)


def test_the_probe_runs_only_for_a_geometry_seen_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    from engines.vision import images

    images._GEOMETRIES.clear()
    probes: list[int] = []
    real = np.random.default_rng
    def counting(seed: int) -> np.random.Generator:
        probes.append(seed)
        return real(seed)

    monkeypatch.setattr(images.np.random, "default_rng", counting)
    img = Image.new("RGB", (800, 600), (10, 200, 30))
    resize_and_crop(img, SPEC)
    assert probes == []  # a single photo never pays for the probe
    resize_and_crop(img, SPEC)
    resize_and_crop(img, SPEC)
    assert len(probes) == 1
