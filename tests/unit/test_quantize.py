"""QDQ quantization for the NPU, run for real on the CPU with a small generated conv classifier, and the
NPU-prefers-QDQ variant choice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

from engines.errors import ImageError, ModelError, StudioError
from engines.models.manifest import Preprocess, read_manifest, verify_files
from engines.models.variants import resolve_variant
from engines.types import DeviceChoice
from engines.vision.float_source import fix_batch_dimension
from engines.vision.images import preprocess
from engines.vision.quantize import QuantizeOptions, quantize_classifier

CLASSES = 10
SIZE = 32


def conv_classifier(path: Path, seed: int = 0, extra_input: bool = False) -> Path:
    """Conv -> Relu -> depthwise Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm, dynamic batch."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 8).astype(np.float32)
    w2 = rng.normal(0, 0.5, (8, 1, 3, 3)).astype(np.float32)
    w3 = rng.normal(0, 1.0, (CLASSES, 8)).astype(np.float32)
    b3 = rng.normal(0, 0.1, CLASSES).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"], transB=1),
    ]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, SIZE, SIZE])]
    if extra_input:
        inputs.append(helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1]))
    graph = helper.make_graph(
        nodes,
        "tiny-classifier",
        inputs,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (w3, "w3"), (b3, "b3"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


CLASSIFIER_SPEC = {
    "input": "input",
    "output": "logits",
    "layout": "NCHW",
    "input_size": [SIZE, SIZE],
    "batch": [1, 64],
    "resize_shorter": 36,
    "resample": "bicubic",
    "mean": [127.0, 127.0, 127.0],
    "std": [128.0, 128.0, 128.0],
    "color": "RGB",
    "output_kind": "logits",
    "labels": "labels.txt",
    "num_classes": CLASSES,
}


def model_folder(root: Path, name: str = "tiny", precision: str = "fp32", **extra: object) -> Path:
    from engines.models.manifest import file_entry, write_manifest

    folder = root / name
    folder.mkdir(parents=True)
    conv_classifier(folder / "model.onnx")
    (folder / "labels.txt").write_text("\n".join(f"label {i}" for i in range(CLASSES)) + "\n")
    manifest = {
        "schema": 1,
        "name": name,
        "display_name": "Tiny test classifier",
        "kind": "image-classifier",
        "licence": "Apache-2.0",
        "precision": precision,
        "devices": ["cpu", "gpu", "npu"],
        "opset": 20,
        "classifier": CLASSIFIER_SPEC,
        **extra,
        "files": [file_entry(folder, "labels.txt"), file_entry(folder, "model.onnx")],
    }
    write_manifest(folder, manifest)
    return folder


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(1)
    for i in range(6):
        yy, xx = np.mgrid[0:48, 0:64]
        base = np.stack([(xx * (i + 1) * 4) % 256, (yy * (7 - i) * 5) % 256, ((xx + yy) * 3 * i) % 256], axis=-1)
        noisy = np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(folder / f"photo{i}.{'jpg' if i % 2 else 'png'}")
    (folder / "notes.txt").write_text("not a photo, ignored")
    return folder


def quantized_ops(model_path: Path) -> onnx.ModelProto:
    return onnx.load(str(model_path))


def test_quantize_writes_a_qdq_folder_that_agrees_with_the_float_model(tmp_path: Path, photos: Path) -> None:
    source = model_folder(tmp_path / "models")
    progress: list[str] = []
    report = quantize_classifier(
        source, photos, tmp_path / "models" / "tiny-qdq", QuantizeOptions(latency_runs=3), on_progress=progress.append
    )

    out = tmp_path / "models" / "tiny-qdq"
    assert report.folder == out
    assert sorted(p.name for p in out.iterdir()) == ["labels.txt", "manifest.json", "model.onnx"]
    manifest = read_manifest(out)
    assert verify_files(manifest) == []
    assert manifest.precision == "qdq-a16w8" and manifest.devices == ("npu",) and manifest.activation_bits == 16
    assert manifest.derived_from == "tiny"
    assert manifest.classifier is not None
    assert manifest.classifier["batch"] == [1, 1] and manifest.classifier["input_size"] == [SIZE, SIZE]
    assert manifest.quantization["per_channel"] is True
    assert manifest.quantization["calibration_samples"] == 6 * 7, "each photo plus 6 flipped/cropped views"
    assert manifest.verification["top1_agreement_with_float"] == {"agree": report.agree, "total": 6}
    assert manifest.top1_agreement == report.agree / 6
    assert manifest.document["opset"] >= 21, "16-bit QDQ needs opset 21"
    assert progress and progress[0].startswith("Preparing 6 calibration photos")

    model = quantized_ops(out / "model.onnx")
    ops = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, SIZE, SIZE], "the batch dimension is fixed to 1 for the NPU"
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    activation_zero_points = [
        inits[n.input[2]] for n in model.graph.node if n.op_type == "QuantizeLinear" and len(n.input) > 2
    ]
    assert activation_zero_points and all(z.dtype == np.uint16 for z in activation_zero_points)
    per_channel = [
        inits[n.input[1]]
        for n in model.graph.node
        if n.op_type == "DequantizeLinear" and n.input[0] in inits and inits[n.input[0]].ndim == 4
    ]
    assert any(scale.size == 8 for scale in per_channel), "conv weights are quantized per channel"

    # The report's agreement is what an independent comparison on the CPU finds.
    spec = Preprocess.from_manifest(CLASSIFIER_SPEC)
    float_session = ort.InferenceSession(str(source / "model.onnx"), providers=["CPUExecutionProvider"])
    qdq_session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    agree = 0
    for photo in sorted(p for p in photos.iterdir() if p.suffix in {".png", ".jpg"}):
        x = preprocess(photo, spec)[None]
        agree += int(
            np.argmax(float_session.run(None, {"input": x})[0]) == np.argmax(qdq_session.run(None, {"input": x})[0])
        )
    assert report.agree == agree
    assert {p.photo for p in report.photos} == {f"photo{i}.{'jpg' if i % 2 else 'png'}" for i in range(6)}
    assert report.views_total == 42 and 0 <= report.views_agree <= 42
    assert report.float_ms > 0 and report.qdq_ms > 0
    text = "\n".join(report.summary_lines())
    assert f"Top-1 agreement with the float model: {agree}/6 photos" in text
    assert "float" in text and "QDQ" in text and " ms" in text


def test_uint8_activations_and_int8_weights(tmp_path: Path, photos: Path) -> None:
    source = model_folder(tmp_path)
    options = QuantizeOptions(activations="uint8", weights="int8", augment=False, latency_runs=1)
    report = quantize_classifier(source, photos, tmp_path / "out", options)
    manifest = read_manifest(tmp_path / "out")
    assert manifest.precision == "qdq-a8w8" and manifest.quantization["weights"] == "int8"
    assert manifest.activation_bits == 8
    assert report.calibration_samples == 6
    model = quantized_ops(tmp_path / "out" / "model.onnx")
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weight_types = {
        inits[n.input[0]].dtype
        for n in model.graph.node
        if n.op_type == "DequantizeLinear" and n.input[0] in inits and inits[n.input[0]].ndim == 4
    }
    assert weight_types == {np.dtype(np.int8)}


def test_a_bare_onnx_file_is_quantized_with_preprocessing_from_its_input_shape(tmp_path: Path, photos: Path) -> None:
    model = tmp_path / "bare"
    model.mkdir()
    conv_classifier(model / "net.onnx")
    report = quantize_classifier(model / "net.onnx", photos, None, QuantizeOptions(augment=False, latency_runs=1))
    assert report.folder == model / "net-qdq"
    manifest = read_manifest(report.folder)
    assert manifest.classifier is not None and manifest.classifier["input_size"] == [SIZE, SIZE]
    assert manifest.name == "net-qdq" and manifest.derived_from == "net"
    assert any("No manifest next to the model" in n for n in report.notes)
    assert report.photos[0].float_top1.startswith("class ")


def test_fix_batch_dimension(tmp_path: Path) -> None:
    source = conv_classifier(tmp_path / "m.onnx")
    assert fix_batch_dimension(source, tmp_path / "fixed.onnx") == "input"
    fixed = onnx.load(str(tmp_path / "fixed.onnx"))
    assert [d.dim_value for d in fixed.graph.input[0].type.tensor_type.shape.dim] == [1, 3, SIZE, SIZE]
    assert [d.dim_value for d in fixed.graph.output[0].type.tensor_type.shape.dim] == [1, CLASSES]


def test_bad_inputs_give_clear_errors(tmp_path: Path, photos: Path) -> None:
    source = model_folder(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ImageError, match="No photos"):
        quantize_classifier(source, empty, tmp_path / "o1")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(ImageError, match="None of the calibration photos"):
        quantize_classifier(source, broken, tmp_path / "o2")
    with pytest.raises(ImageError, match="not found"):
        quantize_classifier(source, tmp_path / "missing", tmp_path / "o3")
    (tmp_path / "exists").mkdir()
    with pytest.raises(ModelError, match="already exists"):
        quantize_classifier(source, photos, tmp_path / "exists")
    with pytest.raises(ModelError, match="not found"):
        quantize_classifier(tmp_path / "nothing", photos, tmp_path / "o4")
    two_inputs = tmp_path / "two"
    two_inputs.mkdir()
    conv_classifier(two_inputs / "m.onnx", extra_input=True)
    with pytest.raises(ModelError, match="2 inputs"):
        quantize_classifier(two_inputs / "m.onnx", photos, tmp_path / "o5")
    qdq = model_folder(tmp_path / "q", precision="qdq-a16w8")
    with pytest.raises(ModelError, match="already a quantized"):
        quantize_classifier(qdq, photos, tmp_path / "o6")
    with pytest.raises(StudioError, match="Unknown activation type"):
        QuantizeOptions(activations="int4")
    assert not (tmp_path / "o1").exists() and not any(p.name.startswith(".o") for p in tmp_path.iterdir())


def test_force_replaces_an_existing_variant(tmp_path: Path, photos: Path) -> None:
    source = model_folder(tmp_path)
    out = tmp_path / "variant"
    out.mkdir()
    (out / "manifest.json").write_text("{}")  # an earlier variant: a model folder
    (out / "stale.txt").write_text("old")
    quantize_classifier(source, photos, out, QuantizeOptions(augment=False, latency_runs=1, force=True))
    assert not (out / "stale.txt").exists() and (out / "model.onnx").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _variant(root: Path, name: str, derived_from: str, precision: str, agree: int, devices: list[str]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    manifest = {
        "schema": 1,
        "name": name,
        "precision": precision,
        "devices": devices,
        "source": {"derived_from": derived_from},
        "verification": {"top1_agreement_with_float": {"agree": agree, "total": 6}},
        "files": [],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_an_npu_choice_prefers_the_qdq_variant(tmp_path: Path) -> None:
    bundled = tmp_path / "bundled"
    user = tmp_path / "user"
    user.mkdir()
    float_model = _variant(bundled, "efficientnet-lite0", "", "fp32", 6, ["cpu", "gpu", "npu"])
    a8 = _variant(bundled, "efficientnet-lite0-qdq-a8", "efficientnet-lite0", "qdq-a8w8", 5, ["npu"])
    a16 = _variant(user, "efficientnet-lite0-qdq", "efficientnet-lite0", "qdq-a16w8", 6, ["npu"])
    _variant(user, "other-qdq", "other-model", "qdq-a16w8", 6, ["npu"])
    roots = [user, bundled]

    assert resolve_variant(float_model, DeviceChoice.parse("npu"), roots) == a16
    assert resolve_variant(float_model, DeviceChoice.parse("qnn"), roots) == a16
    assert resolve_variant(float_model, DeviceChoice.parse("npu", strict=True), bundled) == a8, "found in its root"
    for other in ("cpu", "gpu", "dml", "performance"):
        assert resolve_variant(float_model, DeviceChoice.parse(other), roots) == float_model
    assert resolve_variant(float_model, DeviceChoice.parse("auto"), roots) == float_model, "the planner's call"
    assert resolve_variant(a8, DeviceChoice.parse("npu"), roots) == a8, "a QDQ model is used as given"
    assert resolve_variant(tmp_path / "no-manifest", DeviceChoice.parse("npu"), roots) == tmp_path / "no-manifest"


def test_variants_not_for_the_npu_or_damaged_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "models"
    float_model = _variant(root, "m", "", "fp32", 6, ["cpu", "npu"])
    _variant(root, "m-int8-cpu", "m", "qdq-a8w8", 6, ["cpu"])
    damaged = root / "m-broken"
    damaged.mkdir()
    (damaged / "manifest.json").write_text("{ not json")
    assert resolve_variant(float_model, DeviceChoice.parse("npu"), root) == float_model
    beside = _variant(root, "m-qdq", "m", "qdq-a16w8", 4, ["npu"])
    assert resolve_variant(float_model, DeviceChoice.parse("npu"), tmp_path / "elsewhere") == beside


def test_the_cli_reports_agreement_and_both_latencies(
    tmp_path: Path, photos: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.cli import run

    monkeypatch.setenv("NPU_STUDIO_HOME", str(tmp_path / "home"))
    source = model_folder(tmp_path / "models")
    assert run(["quantize", str(source), "--calibration", str(photos), "--runs", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert Path(data["folder"]) == tmp_path / "home" / "data" / "models" / "tiny-qdq"
    assert data["top1_agreement"]["total"] == 6 and data["cpu_latency_ms"]["qdq"] > 0
    assert run(["quantize", str(source), "--calibration", str(photos)]) == 2
    assert "already exists" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run(["quantize", str(source), "--calibration", str(photos), "--activations", "int4"])
