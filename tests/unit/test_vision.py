"""ImageClassifier on real CPU sessions of tiny generated models: results, batching, contracts, cancel."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto
from PIL import Image

from engines.errors import CancelledError, InputContractError, ModelError
from engines.types import CancelToken, DeviceChoice
from engines.vision.classifier import ClassifierSpec, ImageClassifier, top_k
from engines.vision.scores import softmax
from tests.unit.tiny_models import colour_classifier

CPU = DeviceChoice.parse("cpu")


def _photo(path: Path, colour: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> Path:
    Image.new("RGB", size, colour).save(path)
    return path


@pytest.fixture
def classifier(tmp_path: Path) -> ImageClassifier:
    return ImageClassifier.from_folder(colour_classifier(tmp_path / "colours"), CPU)


def test_classifies_by_colour_with_probabilities(classifier: ImageClassifier, tmp_path: Path) -> None:
    result = classifier.classify(_photo(tmp_path / "r.png", (250, 10, 10)), k=3)
    assert result.top[0].label == "red"
    assert len(result.top) == 3
    assert result.top[0].probability > result.top[1].probability >= result.top[2].probability
    assert 0 < sum(s.probability for s in result.top) <= 1.0 + 1e-6
    assert result.latency_ms > 0 and result.preprocess_ms > 0
    assert classifier.placement.badge() == "CPU — all 3 nodes"
    assert classifier.warmup_ms > 0


def test_batch_keeps_input_order_and_reports_bad_files(classifier: ImageClassifier, tmp_path: Path) -> None:
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not a jpeg")
    paths = [
        _photo(tmp_path / "1.png", (0, 240, 0)),
        broken,
        _photo(tmp_path / "2.png", (0, 0, 240)),
        _photo(tmp_path / "3.png", (240, 0, 0)),
    ]
    streamed: list[str] = []
    results = classifier.classify_many(paths, k=1, on_result=lambda r: streamed.append(r.path))
    assert [r.path for r in results] == [str(p) for p in paths]
    assert [r.top[0].label if r.top else r.error[:30] for r in results] == [
        "green",
        "'broken.jpg' is not an image N",
        "blue",
        "red",
    ]
    assert sorted(streamed) == sorted(str(p) for p in paths)


def test_batched_and_single_runs_agree(classifier: ImageClassifier, tmp_path: Path) -> None:
    paths = [_photo(tmp_path / f"{i}.png", (i * 20, 200 - i * 10, 90)) for i in range(11)]
    batched = classifier.classify_many(paths, k=4)
    singles = [classifier.classify(p, k=4) for p in paths]
    for b, s in zip(batched, singles, strict=True):
        assert [x.index for x in b.top] == [x.index for x in s.top]
        assert np.allclose([x.probability for x in b.top], [x.probability for x in s.top], atol=1e-5)


def test_iobinding_path_gives_the_same_answer(tmp_path: Path) -> None:
    folder = colour_classifier(tmp_path / "colours")
    plain = ImageClassifier.from_folder(folder, CPU, io_binding=False)
    bound = ImageClassifier.from_folder(folder, CPU, io_binding=True)
    batch = np.random.default_rng(0).random((5, 3, 8, 8), dtype=np.float32)
    assert np.allclose(plain.infer(batch), bound.infer(batch), atol=1e-6)
    assert np.allclose(plain.infer(batch[:2]), bound.infer(batch[:2]), atol=1e-6)  # a second batch size
    assert not plain.io_binding and bound.io_binding


def test_cancel_stops_a_batch(classifier: ImageClassifier, tmp_path: Path) -> None:
    paths = [_photo(tmp_path / f"{i}.png", (200, 0, 0)) for i in range(20)]
    token = CancelToken()
    seen: list[str] = []

    def on_result(result: object) -> None:
        seen.append("x")
        if len(seen) == 3:
            token.cancel()

    classifier.max_batch = 1
    with pytest.raises(CancelledError):
        classifier.classify_many(paths, cancel=token, on_result=on_result)
    assert len(seen) == 3


def test_fixed_batch_models_run_one_image_at_a_time(tmp_path: Path) -> None:
    clf = ImageClassifier.from_folder(colour_classifier(tmp_path / "b1", batch=1), CPU)
    assert clf.max_batch == 1
    paths = [_photo(tmp_path / f"{i}.png", (0, 0, 255)) for i in range(3)]
    assert [r.top[0].label for r in clf.classify_many(paths)] == ["blue"] * 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"labels": ("a", "b", "c")}, "3 classes but there are"),
        ({"extra_input": True}, "needs extra inputs (scale)"),
        ({"input_type": TensorProto.INT64}, "a float image tensor is expected"),
    ],
)
def test_input_contract_errors(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    folder = colour_classifier(tmp_path / "m", **kwargs)  # type: ignore[arg-type]
    if "labels" in kwargs:
        (folder / "labels.txt").write_text("a\nb\nc\nd\n")  # 4 labels for a 3-class model
    with pytest.raises(InputContractError) as caught:
        ImageClassifier.from_folder(folder, CPU)
    assert message in caught.value.message


def test_manifest_size_must_match_the_model(tmp_path: Path) -> None:
    folder = colour_classifier(tmp_path / "m")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["classifier"]["input_size"] = [16, 16]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputContractError, match=r"manifest says NCHW \[3, 16, 16\]"):
        ImageClassifier.from_folder(folder, CPU)


def test_broken_model_folders(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no manifest.json"):
        ClassifierSpec.from_folder(tmp_path)
    folder = colour_classifier(tmp_path / "m")
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(ModelError, match="manifest .* is not valid"):
        ClassifierSpec.from_folder(folder)
    folder = colour_classifier(tmp_path / "m2")
    (folder / "labels.txt").unlink()
    with pytest.raises(ModelError, match="Labels file not found"):
        ClassifierSpec.from_folder(folder)
    folder = colour_classifier(tmp_path / "m3")
    (folder / "model.onnx").write_bytes(b"\x08\x01garbage" * 3)
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        ImageClassifier.from_folder(folder, CPU)
    folder = colour_classifier(tmp_path / "m4")
    (folder / "model.onnx").unlink()
    with pytest.raises(ModelError, match="Model file not found"):
        ImageClassifier.from_folder(folder, CPU)


def test_softmax_and_top_k() -> None:
    probs = softmax(np.array([[1.0, 3.0, 2.0, 1000.0]]))
    assert np.isfinite(probs).all() and np.isclose(probs.sum(), 1.0)
    top = top_k(softmax(np.array([0.0, 3.0, 2.0])), ["a", "b", "c"], 10)
    assert [s.label for s in top] == ["b", "c", "a"]
