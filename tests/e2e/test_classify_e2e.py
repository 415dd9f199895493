"""The real EfficientNet-Lite0 demo model, through the engine and through the CLI as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from engines.types import DeviceChoice
from engines.vision.classifier import ImageClassifier

CAT_CLASSES = {"tabby", "tiger cat", "Egyptian cat", "Persian cat", "Siamese cat"}


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.fixture(scope="module")
def classifier(demo_classifier: Path) -> ImageClassifier:
    return ImageClassifier.from_folder(demo_classifier, DeviceChoice.parse("cpu"))


def test_cat_and_espresso(classifier: ImageClassifier, samples: Path) -> None:
    cat = classifier.classify(samples / "chelsea.png")
    assert cat.top[0].label in CAT_CLASSES
    coffee = classifier.classify(samples / "coffee.png")
    assert coffee.top[0].label == "espresso"
    assert coffee.top[0].probability > 0.5
    assert classifier.placement.badge().startswith("CPU — all ")


# What each shipped sample shows, as ImageNet-1k names it (it has no "rocket": "missile" is its nearest).
SAMPLE_CLASSES = {
    "chelsea.png": CAT_CLASSES,
    "coffee.png": {"espresso"},
    "camera.png": {"tripod"},
    "rocket.jpg": {"missile", "projectile"},
}
CLEAR_TOP1 = 0.30  # the Classify view says "Low confidence" below this


@pytest.mark.parametrize("folder", ["efficientnet-lite0", "efficientnet-lite0-qdq"])
def test_every_sample_is_one_the_model_gets_right(folder: str, demo_classifier: Path, samples: Path) -> None:
    """The samples the app offers (samples.json, in its order, each captioned) are classified right, with a
    clear top-1, by the float model and by the NPU's QDQ variant (run here on the CPU EP)."""
    listed = json.loads((samples / "samples.json").read_text(encoding="utf-8"))["samples"]
    shipped = sorted(p.name for p in samples.iterdir() if p.suffix.lower() in {".png", ".jpg"})
    assert sorted(item["file"] for item in listed) == shipped == sorted(SAMPLE_CLASSES)
    assert all(item["caption"] and item["caption"] != Path(item["file"]).stem for item in listed)
    model = demo_classifier.parent / folder
    if not model.is_dir():
        pytest.fail(f"{model} is not built: python assets/recipes/build_demo_models.py")
    clf = ImageClassifier.from_folder(model, DeviceChoice.parse("cpu"))
    for item in listed:
        top = clf.classify(samples / item["file"], k=1).top[0]
        assert top.label in SAMPLE_CLASSES[item["file"]], (item, top)
        assert top.probability >= CLEAR_TOP1, (item, top)


def test_batch_of_all_samples_matches_single_runs(classifier: ImageClassifier, samples: Path) -> None:
    photos = sorted(p for p in samples.iterdir() if p.suffix in {".png", ".jpg"})
    batched = classifier.classify_many(photos, k=1)
    assert [r.top[0].index for r in batched] == [classifier.classify(p, k=1).top[0].index for p in photos]


def test_cli_devices_json_is_honest() -> None:
    out = cli("devices", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    by_ep = {d["ep"]: d for d in report["devices"]}
    assert by_ep["CPUExecutionProvider"]["usable"] is True
    for ep in ("QNNExecutionProvider", "DmlExecutionProvider"):
        assert by_ep[ep]["usable"] is False
        assert len(by_ep[ep]["reason"]) > 20


def test_cli_classify_cpu_json(demo_classifier: Path, samples: Path) -> None:
    out = cli("classify", str(samples / "chelsea.png"), "--device", "cpu", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["results"][0]["top"][0]["label"] in CAT_CLASSES
    assert data["placement"]["active_eps"] == ["CPUExecutionProvider"]
    assert data["placement"]["fell_back"] is False


def test_cli_strict_npu_fails_cleanly(demo_classifier: Path, samples: Path) -> None:
    out = cli("classify", str(samples / "chelsea.png"), "--device", "npu", "--strict")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert "No usable NPU" in out.stderr and "strict mode off" in out.stderr


def test_cli_npu_without_strict_falls_back_and_says_why(demo_classifier: Path, samples: Path) -> None:
    out = cli("classify", str(samples / "chelsea.png"), "--device", "npu", "--json")
    assert out.returncode == 0, out.stderr
    placement = json.loads(out.stdout)["placement"]
    assert placement["fell_back"] is True
    assert placement["active_eps"] == ["CPUExecutionProvider"]
    assert "No usable NPU" in placement["reason"]
    text = cli("classify", str(samples / "chelsea.png"), "--device", "npu")
    assert "Fell back: No usable NPU" in text.stdout


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("notes.jpg", b"hello, this is text", "is not an image"),
        ("empty.png", b"", "is empty (0 bytes)"),
    ],
)
def test_cli_bad_images(demo_classifier: Path, tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    out = cli("classify", str(path), "--device", "cpu")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert expected in out.stderr


def test_cli_truncated_and_oversized_images(demo_classifier: Path, samples: Path, tmp_path: Path) -> None:
    whole = tmp_path / "photo.jpg"
    Image.open(samples / "chelsea.png").convert("RGB").save(whole, quality=95)
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(whole.read_bytes()[:3000])
    out = cli("classify", str(cut), "--device", "cpu")
    assert out.returncode == 2 and "truncated" in out.stderr and "Traceback" not in out.stderr
    from tests.unit.test_images import _png_header_only

    bomb = tmp_path / "huge.png"
    bomb.write_bytes(_png_header_only(30_000, 30_000))
    out = cli("classify", str(bomb), "--device", "cpu")
    assert out.returncode == 2 and "too large to open safely" in out.stderr


def test_cli_batch_reports_each_bad_file_and_goes_on(demo_classifier: Path, samples: Path, tmp_path: Path) -> None:
    folder = tmp_path / "batch"
    folder.mkdir()
    shutil.copy(samples / "coffee.png", folder / "a.png")
    (folder / "b.jpg").write_bytes(b"junk")
    out = cli("classify", str(folder), "--device", "cpu", "--json")
    assert out.returncode == 1
    results = json.loads(out.stdout)["results"]
    assert results[0]["top"][0]["label"] == "espresso"
    assert "is not an image" in results[1]["error"]


def test_cli_missing_and_corrupt_model(demo_classifier: Path, samples: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken-model"
    shutil.copytree(demo_classifier, broken)
    data = (broken / "model.onnx").read_bytes()
    (broken / "model.onnx").write_bytes(data[: len(data) // 3])
    out = cli("classify", str(samples / "coffee.png"), "--model", str(broken), "--device", "cpu")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "not a valid ONNX model" in out.stderr
    (broken / "model.onnx").unlink()
    out = cli("classify", str(samples / "coffee.png"), "--model", str(broken), "--device", "cpu")
    assert out.returncode == 2 and "Model file not found" in out.stderr
    out = cli("classify", str(samples / "coffee.png"), "--model", "no-such-model")
    assert out.returncode == 2 and "is not installed" in out.stderr


def test_debug_shows_the_traceback(demo_classifier: Path, tmp_path: Path) -> None:
    path = tmp_path / "x.png"
    path.write_bytes(b"")
    out = cli("--debug", "classify", str(path), "--device", "cpu")
    assert out.returncode != 0 and "Traceback" in out.stderr
