"""The manifest an import writes: what the user states (`ImportDetails`, `ClassifierOptions`), and what is
read from the copied files themselves (a classifier's input, checked with one CPU run; a genai folder's
context, EOS tokens and KV-cache type; the precision of the weights; a model card's licence).
`engines.models.importer` copies and commits; this module only describes what was copied.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines import jsonfile
from engines.errors import ModelError
from engines.models.library import DEVICE_CLASSES, GENAI_CONFIG, KIND_CLASSIFIER, KIND_LLM
from engines.models.manifest import (
    SCHEMA_VERSION,
    Manifest,
    Preprocess,
    list_model_files,
    read_manifest,
    write_manifest,
)
from engines.types import EP_DEVICE_TYPE

# ImageNet normalisation on 0-255 pixels (torchvision's convention): the most common one for classifiers.
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)


@dataclass(frozen=True)
class ClassifierOptions:
    """How to feed an imported classifier (the CLI's --size/--mean/--std/--layout ...)."""

    labels: Path
    input_size: tuple[int, int] | None = None  # None: read from the model's input shape
    resize_shorter: int | None = None  # None: input size x 256/224 (the usual resize-then-crop)
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    layout: str | None = None  # NCHW | NHWC; None: from the model's input shape
    color: str = "RGB"
    resample: str = "bilinear"
    output_kind: str | None = None  # logits | probabilities; None: detected with a test run


@dataclass
class ImportDetails:
    """What the user states about the model (kept in the manifest)."""

    name: str | None = None
    display_name: str = ""
    licence: str = ""
    precision: str = ""
    devices: tuple[str, ...] = ()
    source: dict[str, Any] = field(default_factory=dict)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def _base_manifest(name: str, kind: str, details: ImportDetails, defaults: Mapping[str, Any]) -> dict[str, Any]:
    devices = [d for d in (details.devices or defaults.get("devices") or ()) if d in DEVICE_CLASSES]
    source = dict(defaults.get("source") or {})
    source.update(details.source)
    source.setdefault("imported_at", _now())
    return {
        "schema": SCHEMA_VERSION,
        "name": name,
        "display_name": details.display_name or str(defaults.get("display_name") or name),
        "kind": kind,
        "licence": details.licence or str(defaults.get("licence") or ""),
        "source": source,
        "precision": details.precision or str(defaults.get("precision") or ""),
        "devices": devices or ["cpu"],
    }


def _kept(original: Manifest) -> dict[str, Any]:
    """What an import keeps of the manifest the source folder already has (the import's options win)."""
    return {"display_name": original.display_name, "licence": original.licence, "precision": original.precision,
            "devices": list(original.devices)}  # fmt: skip


def classifier_manifest(
    tmp: Path, name: str, source: Path, options: ClassifierOptions, details: ImportDetails
) -> dict[str, Any]:
    model_file = source.name
    precision = details.precision or detect_precision(tmp / model_file)
    defaults = {
        "precision": precision,
        "devices": ["npu", "cpu"] if precision.startswith("qdq") else ["cpu", "gpu", "npu"],
        "source": {"imported_from": str(source), "labels_from": str(options.labels)},
    }
    manifest = _base_manifest(name, KIND_CLASSIFIER, details, defaults)
    spec = _classifier_section(tmp / model_file, options)
    manifest["classifier"] = spec
    write_manifest(tmp, {**manifest, "files": [{"path": model_file}, {"path": "labels.txt"}]})
    spec.update(_check_classifier(tmp, spec))
    return manifest


def _classifier_section(model: Path, options: ClassifierOptions) -> dict[str, Any]:
    """The manifest's `classifier` object, with what the options leave open read from the model's input."""
    from engines import runtime

    size, layout = options.input_size, (options.layout or "").upper() or None
    if size is None or layout is None:
        try:
            session = runtime.ort().InferenceSession(str(model), providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise _open_error(model, exc) from exc
        image = [i for i in session.get_inputs() if len(i.shape or ()) == 4]
        shape = list(image[0].shape) if len(image) == 1 else []
        if layout is None:
            layout = "NHWC" if shape and shape[3] == 3 and shape[1] != 3 else "NCHW"
        if size is None:
            h, w = (shape[2], shape[3]) if layout == "NCHW" and shape else (shape[1:3] if shape else (None, None))
            if not isinstance(h, int) or not isinstance(w, int) or h <= 0 or w <= 0:
                raise ModelError(f"{model.name} has a dynamic image size, so NPU Studio cannot tell what to feed it.",
                                 "Give the size with --size (for example --size 224).")
            size = (h, w)
    if layout not in {"NCHW", "NHWC"}:
        raise ModelError(f"Layout {layout!r} is not supported.", "Use --layout NCHW or --layout NHWC.")
    for label, values in (("mean", options.mean), ("std", options.std)):
        if len(values) != 3:
            raise ModelError(f"--{label} needs 3 numbers (one per channel).", "For example --mean 123.7 116.3 103.5")
    if any(v == 0 for v in options.std):
        raise ModelError("--std values must not be zero.", "Use the standard deviations the model was trained with.")
    resize = options.resize_shorter or round(max(size) * 256 / 224)
    pre = Preprocess(input_size=(int(size[0]), int(size[1])), resize_shorter=int(resize), resample=options.resample,
                     mean=_triple(options.mean), std=_triple(options.std), layout=layout, color=options.color.upper())
    return {**pre.manifest_section(), "output_kind": options.output_kind or "auto", "labels": "labels.txt"}


def _triple(values: Sequence[float]) -> tuple[float, float, float]:
    return float(values[0]), float(values[1]), float(values[2])


def _open_error(model: Path, exc: BaseException) -> ModelError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ModelError(f"ONNX Runtime could not open {model.name} on the CPU: {first}",
                      "Check that the file is a complete, standard ONNX model.")


def _check_classifier(folder: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Open the copied classifier on the CPU, check its contract, run one blank image; returns what the
    run taught (input/output names, class count, output kind)."""
    import io

    import numpy as np
    from PIL import Image

    from engines import runtime
    from engines.vision.classifier import ClassifierSpec, check_contract
    from engines.vision.images import preprocess
    from engines.vision.scores import to_probabilities

    parsed = ClassifierSpec.from_folder(folder)
    try:
        session = runtime.ort().InferenceSession(str(parsed.model_path), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise _open_error(parsed.model_path, exc) from exc
    contract = check_contract(session, parsed)
    # A mid-grey photo through the manifest's own preprocessing: a normalisation that overflows shows here.
    h, w = parsed.preprocess.input_size
    grey = io.BytesIO()
    Image.new("RGB", (w, h), (128, 128, 128)).save(grey, "PNG")
    tensor = preprocess(grey.getvalue(), parsed.preprocess)[None].astype(contract.dtype)
    try:
        out = np.asarray(session.run([contract.output_name], {contract.input_name: tensor})[0])
    except Exception as exc:
        raise ModelError(f"The classifier failed on a test image: {str(exc).splitlines()[0]}",
                         "Check --size and --layout against the model's input.") from exc
    # The same checks as every classification (batch axis, one score per label, finite numbers, true
    # probabilities), so that what imports is what classifies.
    kind = spec.get("output_kind")
    if kind not in {"logits", "probabilities"}:
        to_probabilities(out, 1, len(parsed.labels), "logits", "The classifier")
        flat = out.reshape(-1).astype(np.float64)
        kind = "probabilities" if flat.min() >= 0 and abs(flat.sum() - 1.0) < 1e-3 else "logits"
    to_probabilities(out, 1, len(parsed.labels), str(kind), "The classifier")
    return {"input": contract.input_name, "output": contract.output_name, "num_classes": len(parsed.labels),
            "output_kind": kind}


def classifier_folder_manifest(
    tmp: Path, name: str, source: Path, original: Manifest, details: ImportDetails
) -> dict[str, Any]:
    from engines.models.safety import inspect_onnx

    defaults = {**_kept(original), "source": {"imported_from": str(source)}}
    manifest = _base_manifest(name, KIND_CLASSIFIER, details, defaults)
    manifest["classifier"] = dict(original.classifier or {})
    write_manifest(tmp, {**manifest, "files": [{"path": rel} for rel in list_model_files(tmp)]})
    for onnx_file in sorted(tmp.rglob("*.onnx")):
        inspect_onnx(onnx_file)
    manifest["classifier"].update(_check_classifier(tmp, manifest["classifier"]))
    return manifest


def genai_manifest(tmp: Path, name: str, source: Path, details: ImportDetails) -> dict[str, Any]:
    from engines.chat.folder import validate_model_folder

    info = validate_model_folder(tmp)  # the copy is what will be loaded: validate it, not only the source
    original: Mapping[str, Any] = {}
    with contextlib.suppress(ModelError):
        original = _kept(read_manifest(source))  # e.g. a copy of a library model: keep licence, precision, devices
    config = jsonfile.read_object(tmp / GENAI_CONFIG)  # validated above: it parses
    decoder_file = tmp / config["model"]["decoder"]["filename"]
    precision = details.precision or str(original.get("precision") or "") or detect_precision(decoder_file)
    defaults = {
        "display_name": original.get("display_name") or name,
        "licence": original.get("licence") or _licence_from_readme(source),
        "precision": precision,
        "devices": original.get("devices") or genai_devices(info.config_providers, precision),
        "source": {} if "repo_id" in details.source else {"imported_from": str(source)},
    }
    manifest = _base_manifest(name, KIND_LLM, details, defaults)
    eos = config["model"].get("eos_token_id")
    chat: dict[str, Any] = {
        "context_length": info.context_length,
        "eos_token_ids": eos if isinstance(eos, list) else [eos] if isinstance(eos, int) else [],
        "default_max_length": info.default_max_length,
        "kv_cache_dtype": kv_cache_dtype(decoder_file),
    }
    if (tmp / "chat_template.jinja").is_file():
        chat["chat_template"] = "chat_template.jinja"
    manifest["chat"] = chat
    return manifest


def genai_devices(config_providers: Sequence[str], precision: str) -> list[str]:
    """Which device classes a genai folder suits, from the providers its config names."""
    if precision == "npu-context":
        return ["npu"]
    kinds = []
    for ep in config_providers:
        device = EP_DEVICE_TYPE.get(ep)
        if device is not None and device.value.lower() not in kinds:
            kinds.append(device.value.lower())
    return kinds or ["cpu"]


_LICENCE_RE = re.compile(r"^licen[sc]e:\s*['\"]?([A-Za-z0-9.+-]+)", re.MULTILINE | re.IGNORECASE)


def _licence_from_readme(folder: Path) -> str:
    """The `license:` of a Hugging Face model card (README.md front matter) in the folder itself: nothing
    outside the folder being imported is read (a card one level up belongs to other files; use --licence)."""
    for candidate in (folder / "README.md",):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            text = candidate.read_text(encoding="utf-8")[:4000]
            if text.startswith("---"):
                match = _LICENCE_RE.search(text.split("---", 2)[1])
                if match:
                    return match.group(1)
    return ""


def _load_graph(model_file: Path) -> Any:
    import onnx

    try:
        return onnx.load(str(model_file), load_external_data=False)
    except Exception as exc:
        raise ModelError(f"{model_file.name} is not a valid ONNX model ({type(exc).__name__}).",
                         "Copy the model folder again; the file may be incomplete.") from exc


def detect_precision(model_file: Path) -> str:
    """`int4` (MatMulNBits), `qdq` (Quantize/DequantizeLinear), `npu-context` (precompiled EPContext),
    `fp16` or `fp32` (the type of most weights)."""
    import onnx

    model = _load_graph(model_file)
    ops = {node.op_type for node in model.graph.node}
    if "EPContext" in ops:
        return "npu-context"
    if "MatMulNBits" in ops:
        return "int4"
    if {"QuantizeLinear", "DequantizeLinear"} <= ops:
        return "qdq"
    halves = sum(1 for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16)
    return "fp16" if halves * 2 > len(model.graph.initializer) else "fp32"


def kv_cache_dtype(model_file: Path) -> str:
    """The element type of the decoder's past key/value inputs (`float32`, `float16`, ...)."""
    import onnx

    model = _load_graph(model_file)
    for value in model.graph.input:
        if "past" in value.name and value.type.tensor_type.elem_type:
            return str(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
    return "float32"
