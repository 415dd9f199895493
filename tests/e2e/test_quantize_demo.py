"""`npu-studio quantize` on the real demo classifier (EfficientNet-Lite0), calibrated on the sample photos."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engines.models.manifest import read_manifest, verify_files
from engines.models.variants import qdq_variants, resolve_variant
from engines.types import DeviceChoice
from engines.vision.classifier import ImageClassifier

pytestmark = pytest.mark.e2e


def test_quantize_the_demo_classifier(
    demo_classifier: Path, samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import run

    out = tmp_path / "models" / "efficientnet-lite0-qdq"
    code = run(["quantize", str(demo_classifier), "--calibration", str(samples), "--out", str(out), "--runs", "10"])
    printed = capsys.readouterr().out
    print(printed)  # the numbers, for the record (pytest -s)

    assert code == 0
    agreement = re.search(r"Top-1 agreement with the float model: (\d+)/(\d+) photos", printed)
    assert agreement is not None
    agree, total = int(agreement.group(1)), int(agreement.group(2))
    photos = [p for p in samples.iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"}]
    assert total == len(photos) >= 4 and agree >= total - 1
    latency = re.search(r"float ([\d.]+) ms, QDQ ([\d.]+) ms", printed)
    assert latency is not None and float(latency.group(1)) > 0 and float(latency.group(2)) > 0

    manifest = read_manifest(out)
    assert verify_files(manifest) == []
    assert manifest.precision == "qdq-a16w8" and manifest.devices == ("npu",)
    assert manifest.derived_from == "efficientnet-lite0"
    made, original = manifest.classifier, read_manifest(demo_classifier).classifier
    assert made is not None and original is not None
    for key in ("mean", "std", "input_size", "resize_shorter", "layout", "color", "labels"):
        assert made[key] == original[key], key
    assert (out / "labels.txt").read_bytes() == (demo_classifier / "labels.txt").read_bytes()

    # The variant is what an NPU choice loads, and it classifies like the float model on the CPU EP.
    assert out in qdq_variants(demo_classifier, [out.parent])
    # The recipe's own QDQ variant beside the demo model is an equally good answer when it is built.
    picked = resolve_variant(demo_classifier, DeviceChoice.parse("npu"), out.parent)
    assert picked in {out, demo_classifier.parent / out.name}
    classifier = ImageClassifier.from_folder(out, DeviceChoice.parse("cpu"))
    assert classifier.spec.quantized
    assert classifier.classify(samples / "coffee.png").top[0].label == "espresso"
