"""Bounded fuzzing of the decode + preprocess path (hypothesis, derandomized: the same inputs every run).

Whatever the bytes, `preprocess` either returns a finite tensor of the model's shape or raises an
ImageError (a StudioError the app shows as a message). Any other exception is a bug. Valid images of
any size, mode and format must decode, for any preprocessing a manifest may ask for.
"""

from __future__ import annotations

import io
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from PIL import Image

from engines.errors import ImageError, StudioError
from engines.models.manifest import Preprocess
from engines.vision.images import preprocess
from tests.reliability.conftest import Recorder

CATEGORY = "Images"
SPEC = Preprocess(input_size=(24, 24), resize_shorter=28)


def fuzz_settings(examples: int) -> settings:
    return settings(FUZZ, max_examples=examples)


FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAGICS = [
    b"",
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00",
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    b"GIF89a",
    b"BM",
    b"II*\x00",
    b"MM\x00*",
    b"RIFF\x00\x00\x00\x00WEBPVP8 ",
    # formats NPU Studio does not read (Pillow has parsers for them; they must stay unused)
    b"DDS |\x00\x00\x00",
    b"%!PS-Adobe-3.0 EPSF-3.0\n",
    b"\x00\x00\x01\x00\x01\x00",
    b"8BPS\x00\x01",
    b"\x00\x00\x00\x0cjP  \r\n\x87\n",
    b"qoif",
    b"P6\n",
    b"\x0a\x05\x01\x08",
    b"SIMPLE  =                    T",
    b"BLP2",
    b"\x01\xda\x01\x01",
    b"\x59\xa6\x6a\x95",
    b"icns",
    b"FLIF",
]


def _encode(img: Image.Image, fmt: str, **kwargs: Any) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, fmt, **kwargs)
    return buffer.getvalue()


def _seeds() -> list[bytes]:
    """Real files in every format and most modes NPU Studio reads: what the mutations start from."""
    rgb = Image.effect_noise((40, 30), 70).convert("RGB")
    gray = rgb.convert("L")
    exif = Image.Exif()
    exif[0x0112] = 6
    frames = [rgb, rgb.transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    return [
        _encode(rgb, "JPEG", quality=80),
        _encode(rgb, "JPEG", progressive=True, exif=exif.tobytes()),
        _encode(rgb.convert("CMYK"), "JPEG"),
        _encode(gray, "JPEG"),
        _encode(rgb, "PNG"),
        _encode(rgb.convert("RGBA"), "PNG"),
        _encode(rgb.convert("P"), "PNG", transparency=0),
        _encode(Image.fromarray(np.asarray(gray, dtype=np.uint16) * 250), "PNG"),
        _encode(gray.convert("LA"), "PNG"),
        _encode(rgb.convert("P"), "GIF"),
        _encode(frames[0], "GIF", save_all=True, append_images=frames[1:]),
        _encode(rgb, "BMP"),
        _encode(rgb.convert("1"), "BMP"),
        _encode(rgb, "TIFF"),
        _encode(rgb, "TIFF", compression="tiff_lzw"),
        _encode(Image.fromarray(np.asarray(gray, dtype=np.float32)), "TIFF"),
        _encode(rgb, "WEBP", quality=70),
        _encode(rgb.convert("RGBA"), "WEBP", lossless=True),
    ]


SEEDS = _seeds()


def _check(data: bytes, spec: Preprocess = SPEC) -> str:
    """'decoded' or 'refused'; anything else raised fails the example."""
    try:
        tensor = preprocess(data, spec)
    except ImageError as exc:
        assert isinstance(exc, StudioError) and exc.message
        return "refused"
    h, w = spec.input_size
    assert tensor.shape == ((3, h, w) if spec.layout == "NCHW" else (h, w, 3))
    assert tensor.dtype == np.float32 and np.isfinite(tensor).all()
    return "decoded"


def _mutate(seed: bytes, edits: list[tuple[int, float, int]], cut: float) -> bytes:
    data = bytearray(seed)
    for op, where, value in edits:
        at = int(where * len(data)) if data else 0
        if op == 0:  # overwrite a byte
            if data:
                data[min(at, len(data) - 1)] = value
        elif op == 1:  # delete a run
            del data[at : at + 1 + value % 64]
        elif op == 2:  # insert bytes
            data[at:at] = bytes([value]) * (1 + value % 16)
        else:  # a header field set to an extreme value
            data[at : at + 4] = (b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x7f\xff\xff\xff")[value % 3]
    return bytes(data[: max(1, int(len(data) * cut))]) if cut < 1 else bytes(data)


Fuzzed = Callable[[Counter[str]], None]


def _run(name: str, fuzz: Fuzzed, expected: str, reliability: Recorder, examples: int) -> None:
    seen: Counter[str] = Counter()
    started = time.perf_counter()
    fuzz(seen)
    seconds = time.perf_counter() - started
    total = sum(seen.values())
    reliability.measure(
        f"fuzz: {name}", f"{total} inputs in {seconds:.1f} s ({seen['decoded']} decoded, {seen['refused']} refused)"
    )
    reliability.record(
        CATEGORY,
        f"fuzz: {name} ({examples} inputs)",
        expected,
        "every input decoded or refused with an ImageError; no other exception",
    )
    assert total >= examples // 2  # hypothesis really ran (it may stop early only on duplicates)


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns about the damaged TIFF/EXIF it repairs
def test_fuzz_random_bytes(reliability: Recorder) -> None:
    examples = 3000

    def fuzz(seen: Counter[str]) -> None:
        @fuzz_settings(examples)
        @given(magic=st.sampled_from(MAGICS), body=st.binary(max_size=1024))
        def one(magic: bytes, body: bytes) -> None:
            seen[_check(magic + body)] += 1

        one()

    _run("random bytes behind each format's magic number", fuzz, "decoded or ImageError", reliability, examples)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fuzz_mutated_real_files(reliability: Recorder) -> None:
    examples = 4000
    edit = st.tuples(st.integers(0, 3), st.floats(0, 1), st.integers(0, 255))

    def fuzz(seen: Counter[str]) -> None:
        @fuzz_settings(examples)
        @given(
            seed=st.sampled_from(SEEDS),
            edits=st.lists(edit, min_size=1, max_size=8),
            cut=st.one_of(st.just(1.0), st.floats(0.05, 1.0)),
        )
        def one(seed: bytes, edits: list[tuple[int, float, int]], cut: float) -> None:
            seen[_check(_mutate(seed, edits, cut))] += 1

        one()

    _run(
        "real JPEG/PNG/GIF/BMP/TIFF/WebP files with flipped, cut, inserted bytes",
        fuzz,
        "decoded or ImageError",
        reliability,
        examples,
    )


MODES = ["RGB", "RGBA", "L", "LA", "P", "1", "CMYK", "I;16", "I", "F", "YCbCr"]
FORMATS = {"PNG": "png", "JPEG": "jpg", "BMP": "bmp", "GIF": "gif", "TIFF": "tif", "WEBP": "webp"}
SIDES = st.one_of(st.integers(1, 64), st.integers(65, 700), st.sampled_from([3000, 9000, 30000]))


@st.composite
def _specs(draw: st.DrawFn) -> Preprocess:
    h, w = draw(st.integers(1, 64)), draw(st.integers(1, 64))
    return Preprocess(
        input_size=(h, w),
        resize_shorter=draw(st.integers(1, 80)),
        resample=draw(st.sampled_from(["bicubic", "bilinear", "lanczos", "nearest"])),
        mean=(draw(st.floats(0, 255)),) * 3,
        std=(draw(st.floats(0.01, 255)),) * 3,
        layout=draw(st.sampled_from(["NCHW", "NHWC"])),
        color=draw(st.sampled_from(["RGB", "BGR"])),
    )


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fuzz_valid_images_of_any_size_mode_and_format(reliability: Recorder) -> None:
    examples = 250

    def fuzz(seen: Counter[str]) -> None:
        @fuzz_settings(examples)
        @given(
            width=SIDES,
            height=SIDES,
            mode=st.sampled_from(MODES),
            fmt=st.sampled_from(sorted(FORMATS)),
            spec=_specs(),
        )
        def one(width: int, height: int, mode: str, fmt: str, spec: Preprocess) -> None:
            if width * height > 3_000_000:
                width = max(1, 3_000_000 // height)  # strips yes, huge photos no: keep the fuzz fast
            img = Image.new("RGB", (width, height), (200, 30, 30)).convert(mode)
            try:
                data = _encode(img, fmt)
            except (OSError, ValueError, KeyError):
                return  # this format cannot store this mode: nothing to test
            outcome = _check(data, spec)
            seen[outcome] += 1
            assert outcome == "decoded", f"a valid {width}x{height} {mode} {fmt} was refused"

        one()

    _run(
        "valid images: 1 to 30000 px sides, 11 modes, 6 formats, random preprocessing",
        fuzz,
        "all decoded to the model's shape",
        reliability,
        examples,
    )
