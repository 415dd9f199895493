"""Every kind of photo a user may throw at the classifier, through `npu-studio classify` on the tiny colour
classifier (real ONNX Runtime on the CPU): odd formats and modes are classified correctly, bad files are
refused with a clear one-line message, and nothing is decoded by a parser NPU Studio does not use."""

from __future__ import annotations

import contextlib
import io
import json
import struct
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from app.cli import run
from tests.reliability.conftest import REPO, Recorder
from tests.unit.tiny_models import colour_classifier

CATEGORY = "Images"
RED = (230, 20, 20)
Maker = Callable[[Path], Path]  # writes the photo under a folder, returns its path


@pytest.fixture(scope="module")
def colours(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 16 x 16 input: big enough for crops and resizes to matter, small enough to be instant.
    return colour_classifier(tmp_path_factory.mktemp("models") / "colours", size=16)


def _classify(path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, what the user sees, the top label or "") for `npu-studio classify PATH --json`."""
    code = run(["classify", str(path), "--model", str(model), "--device", "cpu", "--json"])
    captured = capsys.readouterr()
    err = captured.err.strip()
    if code == 0:
        result = json.loads(captured.out)["results"][0]
        return code, f"classified as '{result['top'][0]['label']}'", result["top"][0]["label"]
    return code, err, ""


# --- photos that must work ---------------------------------------------------------------------------


def _saved(name: str, img: Image.Image, **kwargs: Any) -> Maker:
    def make(folder: Path) -> Path:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        img.save(path, **kwargs)
        return path

    return make


def _red_palette_with_transparency(folder: Path) -> Path:
    img = Image.new("P", (40, 30), 1)
    img.putpalette([255, 255, 255, *RED] + [0, 0, 0] * 254)
    img.info["transparency"] = 0
    img.paste(0, (0, 0, 4, 4))  # a transparent corner
    path = folder / "palette.png"
    img.save(path, transparency=0)
    return path


def _sixteen_bit(folder: Path) -> Path:
    arr = np.full((30, 40), 50_000, dtype=np.uint16)
    path = folder / "deep.png"
    Image.fromarray(arr).save(path)
    return path


def _sixteen_bit_tiff(folder: Path) -> Path:
    path = folder / "scan.tif"
    Image.fromarray(np.full((30, 40), 60_000, dtype=np.uint16)).save(path)
    return path


def _animated(folder: Path) -> Path:
    frames = [Image.new("RGB", (32, 32), c) for c in (RED, (0, 200, 0), (0, 0, 200))]
    path = folder / "animated.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=80, loop=0)
    return path


def _multipage_tiff(folder: Path) -> Path:
    pages = [Image.new("RGB", (32, 32), c) for c in (RED, (0, 200, 0))]
    path = folder / "pages.tiff"
    pages[0].save(path, save_all=True, append_images=pages[1:])
    return path


def _exif_rotated(folder: Path) -> Path:
    img = Image.new("RGB", (64, 16), RED)
    exif = Image.Exif()
    exif[0x0112] = 6  # shown rotated 90° clockwise
    path = folder / "rotated.jpg"
    img.save(path, exif=exif.tobytes())
    return path


def _bad_exif(folder: Path) -> Path:
    img = Image.new("RGB", (32, 32), RED)
    exif = Image.Exif()
    exif[0x0112] = 77  # no such orientation
    path = folder / "odd-orientation.jpg"
    img.save(path, exif=exif.tobytes())
    return path


def _unicode_path(folder: Path) -> Path:
    return _saved("фото 写真 📷/кот — café.png", Image.new("RGB", (32, 32), RED))(folder)


def _long_path(folder: Path) -> Path:
    deep = folder
    while len(str(deep)) < 300:
        deep = deep / ("a-rather-long-folder-name-" + "x" * 20)
    path = _saved("photo.png", Image.new("RGB", (32, 32), RED))(deep)
    assert len(str(path)) > 260  # longer than Windows' classic MAX_PATH
    return path


def _strip(size: tuple[int, int]) -> Maker:
    return _saved(f"strip-{size[0]}x{size[1]}.png", Image.new("RGB", size, RED))


def _bad_checksum(folder: Path) -> Path:
    """Pillow does not verify the pixel data's CRC: a flipped checksum byte still decodes."""
    path = _saved("checksum.png", Image.new("RGB", (32, 32), RED))(folder)
    data = bytearray(path.read_bytes())
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4 : idat])[0]
    data[idat + 4 + length] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def _big_jpeg(folder: Path) -> Path:
    return _saved("big.jpg", Image.new("RGB", (6000, 4000), RED), quality=85)(folder)


GOOD: list[tuple[str, Maker]] = [
    ("PNG named .jpg (wrong extension)", _saved("actually-png.jpg", Image.new("RGB", (32, 32), RED), format="PNG")),
    ("JPEG named .png (wrong extension)", _saved("actually-jpeg.png", Image.new("RGB", (32, 32), RED), format="JPEG")),
    ("JPEG with no extension", _saved("photo", Image.new("RGB", (32, 32), RED), format="JPEG")),
    ("CMYK JPEG", _saved("print.jpg", Image.new("CMYK", (32, 32), (0, 230, 230, 20)))),
    ("progressive JPEG", _saved("progressive.jpg", Image.new("RGB", (64, 48), RED), progressive=True)),
    ("6000 x 4000 JPEG (decoded at reduced scale)", _big_jpeg),
    ("16-bit grayscale PNG", _sixteen_bit),
    ("16-bit grayscale TIFF", _sixteen_bit_tiff),
    ("32-bit float TIFF", _saved("float.tif", Image.fromarray(np.full((20, 20), 0.5, dtype=np.float32)))),
    ("palette PNG with a transparent colour", _red_palette_with_transparency),
    ("RGBA PNG, half transparent", _saved("rgba.png", Image.new("RGBA", (32, 32), (*RED, 128)))),
    ("grayscale with alpha (LA) PNG", _saved("la.png", Image.new("LA", (32, 32), (100, 255)))),
    ("1-bit black and white BMP", _saved("bw.bmp", Image.new("1", (32, 32), 1))),
    ("animated GIF (first frame is used)", _animated),
    ("multi-page TIFF (first page is used)", _multipage_tiff),
    ("WebP", _saved("photo.webp", Image.new("RGB", (32, 32), RED))),
    ("EXIF-rotated JPEG", _exif_rotated),
    ("JPEG with an invalid EXIF orientation", _bad_exif),
    ("unicode folder and file name", _unicode_path),
    ("path longer than 260 characters", _long_path),
    ("PNG with a wrong pixel-data checksum", _bad_checksum),
    ("1 x 1 pixel image", _saved("dot.png", Image.new("RGB", (1, 1), RED))),
    ("20000 x 1 strip (would be a 3.9 GB resize)", _strip((20000, 1))),
    ("1 x 20000 strip", _strip((1, 20000))),
]
GRAY = {"16-bit grayscale PNG", "16-bit grayscale TIFF", "32-bit float TIFF", "grayscale with alpha (LA) PNG",
        "1-bit black and white BMP"}  # fmt: skip


@pytest.mark.parametrize(("name", "make"), GOOD, ids=[g[0] for g in GOOD])
def test_odd_but_valid_photos_are_classified(
    name: str,
    make: Maker,
    colours: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:
    path = make(tmp_path)
    code, outcome, label = _classify(path, colours, capsys)
    expected = "classified" if name in GRAY else "classified as 'red'"
    reliability.record(CATEGORY, name, expected, outcome)
    assert code == 0, outcome
    if name not in GRAY:
        assert label == "red"


def test_a_long_strip_is_resized_without_a_huge_intermediate_image(tmp_path: Path, reliability: Recorder) -> None:
    """In a fresh process: peak memory while preprocessing a 100 000 x 1 PNG (a few hundred bytes) for a
    224 x 224 model stays small (it used to build a 25 600 000 x 256 image first)."""
    path = tmp_path / "strip.png"
    Image.new("RGB", (100_000, 1), RED).save(path)
    code = f"""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a regression fails here, not the machine
    from engines.models.manifest import Preprocess
    from engines.vision.images import preprocess
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tensor = preprocess({str(path)!r}, Preprocess())
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(tensor.shape, (after - before) // 1024)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    shape, grown_mb = done.stdout.rsplit(" ", 1)
    within = int(grown_mb) < 100
    reliability.record(
        CATEGORY,
        "100000 x 1 PNG for a 224 x 224 model (memory)",
        "preprocessed with under 100 MB of extra memory",
        f"tensor {shape}; {'under' if within else 'over'} 100 MB of extra memory",
    )
    assert shape == "(3, 224, 224)"
    assert within, f"{grown_mb} MB"


# --- files that must be refused ----------------------------------------------------------------------


def _bytes(name: str, data: bytes) -> Maker:
    def make(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(data)
        return path

    return make


def _png_header(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")


def _jpeg_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.effect_noise((300, 200), 60).convert("RGB").save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _png_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.effect_noise((300, 200), 60).convert("RGB").save(buffer, "PNG")
    return buffer.getvalue()


def _jpeg_claiming(width: int, height: int) -> bytes:
    """A real JPEG whose frame header (SOF0) claims another size."""
    data = bytearray(_jpeg_bytes())
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def _garbage_idat_png() -> bytes:
    data = bytearray(_png_bytes())
    idat = data.index(b"IDAT")
    for i in range(idat + 10, idat + 400):
        data[i] = (i * 37) % 256
    return bytes(data)


def _tiff_with_text_offsets() -> bytes:
    """A TIFF whose StripOffsets tag is typed as text: Pillow raised a bare TypeError (found by fuzzing)."""
    data = bytearray(_encode_red("TIFF"))
    ifd = struct.unpack("<I", data[4:8])[0]
    for i in range(struct.unpack("<H", data[ifd : ifd + 2])[0]):
        entry = ifd + 2 + 12 * i
        if struct.unpack("<H", data[entry : entry + 2])[0] == 273:  # StripOffsets
            data[entry + 2 : entry + 4] = struct.pack("<H", 2)  # ASCII
    return bytes(data)


def _dds_unknown_pixel_format() -> bytes:
    """A DDS texture with pixel-format flags 0: Pillow raised NotImplementedError (found by fuzzing)."""
    data = bytearray(_encode_red("DDS"))
    data[80:84] = b"\0\0\0\0"
    return bytes(data)


def _encode_red(fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), RED).save(buffer, fmt)
    return buffer.getvalue()


EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 32 32\n0 0 moveto 32 32 lineto stroke\nshowpage\n%%EOF\n"

BAD: list[tuple[str, Maker, str]] = [
    ("zero-byte file", _bytes("empty.jpg", b""), "is empty (0 bytes)"),
    ("text file named .jpg", _bytes("notes.jpg", b"Dear diary, today I took no photo.\n" * 20), "not an image"),
    ("truncated JPEG (half the file)", _bytes("cut.jpg", _jpeg_bytes()[: len(_jpeg_bytes()) // 2]), "truncated"),
    ("truncated PNG (half the file)", _bytes("cut.png", _png_bytes()[: len(_png_bytes()) // 2]), "truncated"),
    ("PNG with scrambled pixel data", _bytes("scrambled.png", _garbage_idat_png()), "could not be decoded"),
    ("decompression bomb: 100 MP PNG header", _bytes("bomb100.png", _png_header(10_000, 10_000)), "too large"),
    ("decompression bomb: 400 MP PNG header", _bytes("bomb400.png", _png_header(20_000, 20_000)), "too large"),
    ("decompression bomb: JPEG claiming 60000 x 60000", _bytes("bomb.jpg", _jpeg_claiming(60000, 60000)), "too large"),
    ("TIFF whose strip offsets are text (fuzz finding)", _bytes("odd.tif", _tiff_with_text_offsets()), "could not be"),
    ("DDS texture, unknown pixel format (fuzz finding)", _bytes("t.dds", _dds_unknown_pixel_format()), "not an image"),
    ("EPS named .jpg (would run Ghostscript)", _bytes("vector.jpg", EPS), "not an image NPU Studio can read"),
    ("Windows icon (a format NPU Studio does not read)", _saved("i.ico", Image.new("RGB", (32, 32))), "not an image"),
    ("Windows program renamed .png", _bytes("setup.png", b"MZ\x90\x00\x03" + b"\0" * 500), "not an image"),
    ("a file that does not exist", lambda folder: folder / "gone.jpg", "Image not found"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "make", "words"), BAD, ids=[b[0] for b in BAD])
def test_bad_files_are_refused_in_one_clear_line(
    name: str,
    make: Maker,
    words: str,
    colours: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    reliability: Recorder,
) -> None:
    from PIL import EpsImagePlugin

    ghostscript: list[object] = []
    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", lambda *a, **k: ghostscript.append(a), raising=False)
    path = make(tmp_path)
    code, outcome, _ = _classify(path, colours, capsys)
    reliability.record(CATEGORY, name, "refused with a clear message", outcome)
    assert code == 2, outcome
    assert words in outcome
    assert len(outcome.splitlines()) == 1 and "Traceback" not in outcome
    assert ghostscript == []


def test_a_folder_with_good_and_bad_photos_goes_on(
    colours: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = tmp_path / "holiday"
    folder.mkdir()
    Image.new("RGB", (32, 32), RED).save(folder / "a-red.png")
    (folder / "b-empty.jpg").write_bytes(b"")
    (folder / "c-notes.jpg").write_text("not a photo")
    Image.new("RGB", (32, 32), (10, 200, 10)).save(folder / "d-green.png")
    code = run(["classify", str(folder), "--model", str(colours), "--device", "cpu", "--json"])
    results = json.loads(capsys.readouterr().out)["results"]
    summary = ", ".join(f"{Path(r['path']).name}: {'error' if r['error'] else r['top'][0]['label']}" for r in results)
    expected = "bad ones reported, the rest classified"
    reliability.record(CATEGORY, "folder with 2 good and 2 bad photos", expected, summary)
    assert code == 1  # some failed
    assert [bool(r["error"]) for r in results] == [False, True, True, False]
    assert results[0]["top"][0]["label"] == "red" and results[3]["top"][0]["label"] == "green"


def test_no_photo_stays_open_after_it_was_read(tmp_path: Path, reliability: Recorder) -> None:
    """A photo NPU Studio has read (or failed to read) is closed at once: on Windows an open handle would
    stop the user from deleting or renaming it."""
    import psutil

    from engines.errors import ImageError
    from engines.models.manifest import Preprocess
    from engines.vision.images import preprocess

    photos = [
        _animated(tmp_path),
        _multipage_tiff(tmp_path),
        _bytes("cut.jpg", _jpeg_bytes()[:3000])(tmp_path),
        _bytes("bomb.png", _png_header(20_000, 20_000))(tmp_path),
        _bytes("odd.tif", _tiff_with_text_offsets())(tmp_path),
    ]
    for photo in photos:
        with contextlib.suppress(ImageError):
            preprocess(photo, Preprocess(input_size=(16, 16), resize_shorter=16))
    still_open = sorted(Path(f.path).name for f in psutil.Process().open_files() if Path(f.path).parent == tmp_path)
    reliability.record(
        CATEGORY,
        "file handles after reading an animated GIF, a multi-page TIFF and three bad files",
        "every file closed",
        f"open afterwards: {', '.join(still_open) or 'none'}",
    )
    assert still_open == []
