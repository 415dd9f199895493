"""The float classifier a QDQ model is made from: its file, preprocessing, labels and manifest, read with
the inside-the-folder rule and the ONNX safety check, and the graph facts quantization needs (a static
batch of 1, the input's name and size, the opset), read with the `onnx` package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines import runtime
from engines.errors import ModelError, StudioError
from engines.models.library import suggest_name
from engines.models.manifest import Manifest, Preprocess, has_manifest, read_manifest
from engines.models.paths import resolve_inside
from engines.models.safety import inspect_onnx

MODEL_NAME = "model.onnx"


@dataclass(frozen=True)
class FloatSource:
    """The model to quantize: its file, how to preprocess for it, its labels and manifest (if any)."""

    model_path: Path
    preprocess: Preprocess
    labels: tuple[str, ...]
    manifest: Manifest | None  # None for a bare .onnx file
    labels_path: Path | None
    name: str

    @classmethod
    def open(cls, source: str | os.PathLike[str]) -> FloatSource:
        path = Path(source)
        if path.is_dir():
            return cls._from_folder(path)
        if path.is_file():
            if path.suffix.lower() != ".onnx":
                raise ModelError(f"{path.name} is not an ONNX model.", "Give a model folder or an .onnx file.")
            if has_manifest(path.parent):
                return cls._from_folder(path.parent, path)
            inspect_onnx(path)  # its external data stays next to it, no custom-op libraries
            return cls(path, Preprocess(), (), None, None, suggest_name(path.stem))
        raise ModelError(f"Model not found: {path}", "Give a model folder (with manifest.json) or an .onnx file.")

    @classmethod
    def _from_folder(cls, folder: Path, model: Path | None = None) -> FloatSource:
        manifest = read_manifest(folder)
        if manifest.classifier is None:
            raise ModelError(
                f"{folder} is not an image classifier (its manifest has no 'classifier' section).",
                "Quantization here is for image classifiers.",
            )
        if manifest.precision.startswith("qdq"):
            raise ModelError(f"{folder.name} is already a quantized (QDQ) model.", "Quantize the float model instead.")
        try:
            pre = manifest.preprocess()
        except ValueError as exc:
            raise ModelError(f"The manifest in {folder} is not valid: {exc}", "Rebuild the model.") from exc
        # Every file the manifest names is read (and the labels copied into the new model): each must be
        # inside the folder, and the model's own external data too, before anything loads it.
        if model is None:
            onnx_files = [f.path for f in manifest.files if f.path.endswith(".onnx")]
            model = resolve_inside(
                folder, onnx_files[0] if onnx_files else MODEL_NAME, what=f"The manifest in {folder}", must_exist=True
            )
        elif not model.is_file():
            raise ModelError(f"{model} is missing.", "Rebuild or re-import the model.")
        inspect_onnx(model)
        labels_path = resolve_inside(
            folder, manifest.labels_file, what=f"The labels file named by the manifest in {folder}"
        )
        labels: tuple[str, ...] = ()
        if labels_path.is_file():
            labels = tuple(s.strip() for s in labels_path.read_text(encoding="utf-8").splitlines() if s.strip())
        # The name becomes the default output folder's name: a manifest cannot choose a path with it.
        name = suggest_name(manifest.model_name)
        return cls(model, pre, labels, manifest, labels_path if labels else None, name)

    def label(self, index: int) -> str:
        return self.labels[index] if index < len(self.labels) else f"class {index}"


def require_onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:
        raise StudioError(
            "Quantization needs the 'onnx' package, which is not installed.",
            "Install it with `pip install onnx` (or the npu-studio[recipes] extra).",
        ) from exc
    return onnx


def fix_batch_dimension(source: Path, target: Path) -> str:
    """Copy `source` to `target` with the batch dimension of every input fixed to 1 (QNN needs static
    shapes). Returns the image input's name."""
    onnx = require_onnx()
    model_utils = runtime.load("onnxruntime.tools.onnx_model_utils")
    fix_output_shapes, make_dim_param_fixed = model_utils.fix_output_shapes, model_utils.make_dim_param_fixed

    try:
        model = onnx.load(str(source))
    except Exception as exc:
        raise ModelError(f"{source.name} could not be read as an ONNX model: {exc}", "Check the file.") from exc
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise ModelError(
            f"{source.name} has {len(inputs)} inputs; a single-image classifier has one.",
            "Quantize a single-input image classifier.",
        )
    dims = inputs[0].type.tensor_type.shape.dim
    if len(dims) != 4:
        raise ModelError(f"{source.name}'s input has {len(dims)} dimensions, not 4 (N, C, H, W).", "Check the model.")
    first = dims[0]
    if first.HasField("dim_param"):
        make_dim_param_fixed(model.graph, first.dim_param, 1)
    elif first.dim_value != 1:
        first.dim_value = 1
    fix_output_shapes(model)
    onnx.save(model, str(target))
    return str(inputs[0].name)


def model_input_size(model_path: Path) -> tuple[int, int] | None:
    onnx = require_onnx()
    model = onnx.load(str(model_path), load_external_data=False)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if len(dims) == 4 and dims[2].dim_value > 0 and dims[3].dim_value > 0:
        return int(dims[2].dim_value), int(dims[3].dim_value)
    return None


def model_opset(model: Path) -> int | None:
    onnx = require_onnx()
    imports = onnx.load(str(model), load_external_data=False).opset_import
    return next((int(o.version) for o in imports if o.domain in ("", "ai.onnx")), None)


def model_input_name(model: Path) -> str:
    onnx = require_onnx()
    return str(onnx.load(str(model), load_external_data=False).graph.input[0].name)
