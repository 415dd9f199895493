"""QDQ quantization of image classifiers for the NPU, calibrated on photos.

The Hexagon NPU (QNN HTP) runs quantized QDQ models; a float model there either falls back to the CPU
or runs in fp16 when the EP allows. This module turns a float classifier into a QDQ model with
onnxruntime's QNN-oriented configuration (`get_qnn_qdq_config`), calibrated on photos (plus flipped and
cropped views of them, so calibration sees more than the test photos), and checks the result against
the float model on the CPU: top-1 agreement per photo and the latency of both, measured side by side.

Measured on EfficientNet-Lite0 (FACTS): per-tensor weights ruin the depthwise convolutions, so
`per_channel=True` always; uint16 activations keep top-1 with the float model where uint8 loses some.
On the CPU the uint16 model is slower than float: QDQ models are for the NPU, not a CPU speed-up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import logging
import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from engines import runtime, workdirs
from engines.errors import ImageError, ModelError, StorageError, StudioError
from engines.models.library import suggest_name
from engines.models.manifest import (
    MANIFEST_NAME,
    SCHEMA_VERSION,
    file_entry,
    load_manifest,
    sha256_file,
    write_manifest,
)
from engines.models.paths import resolve_inside
from engines.models.safety import inspect_onnx
from engines.types import IMAGE_SUFFIXES
from engines.vision.images import Preprocess, crop_aspect, load_rgb, resize_and_crop, to_tensor
from engines.vision.scores import to_probabilities

log = logging.getLogger(__name__)

ACTIVATION_TYPES = ("uint8", "uint16")
WEIGHT_TYPES = ("uint8", "int8")
MODEL_NAME = "model.onnx"
_QUANT_TYPES = {"uint8": "QUInt8", "uint16": "QUInt16", "int8": "QInt8"}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class QuantizeOptions:
    activations: str = "uint16"
    weights: str = "uint8"
    per_channel: bool = True  # per-tensor weights ruin depthwise convolutions (measured)
    augment: bool = True  # calibrate on flipped and cropped views too
    latency_runs: int = 20
    force: bool = False  # replace an existing output folder

    def __post_init__(self) -> None:
        if self.activations not in ACTIVATION_TYPES:
            raise StudioError(
                f"Unknown activation type '{self.activations}'.", f"Use one of {', '.join(ACTIVATION_TYPES)}."
            )
        if self.weights not in WEIGHT_TYPES:
            raise StudioError(f"Unknown weight type '{self.weights}'.", f"Use one of {', '.join(WEIGHT_TYPES)}.")

    @property
    def precision(self) -> str:
        """Manifest precision, e.g. "qdq-a16w8" (16-bit activations, 8-bit weights)."""
        return f"qdq-a{self.activations.removeprefix('u').removeprefix('int')}w8"


@dataclass(frozen=True)
class PhotoResult:
    photo: str
    float_top1: str
    qdq_top1: str
    float_p: float
    qdq_p: float

    @property
    def agree(self) -> bool:
        return self.float_top1 == self.qdq_top1


@dataclass
class QuantizeReport:
    folder: Path
    precision: str
    options: QuantizeOptions
    calibration_photos: tuple[str, ...]
    calibration_samples: int
    photos: list[PhotoResult]
    views_agree: int
    views_total: int
    float_ms: float
    qdq_ms: float
    quantize_seconds: float
    float_bytes: int
    qdq_bytes: int
    notes: list[str] = field(default_factory=list)

    @property
    def model_path(self) -> Path:
        return self.folder / MODEL_NAME

    @property
    def agree(self) -> int:
        return sum(p.agree for p in self.photos)

    def summary_lines(self) -> list[str]:
        lines = [
            f"QDQ model ({self.precision}: {self.options.activations} activations, {self.options.weights} weights, "
            f"per-channel) written to {self.folder}",
            f"Calibrated on {self.calibration_samples} views of {len(self.calibration_photos)} photos "
            f"in {self.quantize_seconds:.1f} s; {self.float_bytes / 1e6:.1f} MB float -> "
            f"{self.qdq_bytes / 1e6:.1f} MB.",
            f"Top-1 agreement with the float model: {self.agree}/{len(self.photos)} photos, "
            f"{self.views_agree}/{self.views_total} views (flips and crops).",
        ]
        for p in self.photos:
            mark = "=" if p.agree else "≠"
            lines.append(
                f"  {mark} {p.photo}: float '{p.float_top1}' ({p.float_p:.0%}), QDQ '{p.qdq_top1}' ({p.qdq_p:.0%})"
            )
        lines.append(
            f"CPU EP latency, batch 1, median of {self.options.latency_runs} side by side: float "
            f"{self.float_ms:.1f} ms, QDQ {self.qdq_ms:.1f} ms (x{self.qdq_ms / self.float_ms:.2f})."
        )
        lines.append("QDQ models are made for the NPU; on the CPU they are not expected to be faster.")
        lines.extend(self.notes)
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "model": str(self.model_path),
            "precision": self.precision,
            "activations": self.options.activations,
            "weights": self.options.weights,
            "per_channel": self.options.per_channel,
            "calibration_photos": list(self.calibration_photos),
            "calibration_samples": self.calibration_samples,
            "top1_agreement": {"agree": self.agree, "total": len(self.photos)},
            "views_agreement": {"agree": self.views_agree, "total": self.views_total},
            "photos": [
                {
                    "photo": p.photo,
                    "float_top1": p.float_top1,
                    "qdq_top1": p.qdq_top1,
                    "float_p": round(p.float_p, 4),
                    "qdq_p": round(p.qdq_p, 4),
                    "agree": p.agree,
                }
                for p in self.photos
            ],
            "cpu_latency_ms": {"float": round(self.float_ms, 3), "qdq": round(self.qdq_ms, 3)},
            "quantize_seconds": round(self.quantize_seconds, 3),
            "float_bytes": self.float_bytes,
            "qdq_bytes": self.qdq_bytes,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class FloatSource:
    """The model to quantize: its file, how to preprocess for it, its labels and manifest (if any)."""

    model_path: Path
    preprocess: Preprocess
    labels: tuple[str, ...]
    manifest: Mapping[str, Any]
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
            if (path.parent / MANIFEST_NAME).is_file():
                return cls._from_folder(path.parent, path)
            inspect_onnx(path)  # its external data stays next to it, no custom-op libraries
            return cls(path, Preprocess(), (), {}, None, suggest_name(path.stem))
        raise ModelError(f"Model not found: {path}", "Give a model folder (with manifest.json) or an .onnx file.")

    @classmethod
    def _from_folder(cls, folder: Path, model: Path | None = None) -> FloatSource:
        manifest = load_manifest(folder)
        spec = manifest.get("classifier")
        if not isinstance(spec, dict):
            raise ModelError(
                f"{folder} is not an image classifier (its manifest has no 'classifier' section).",
                "Quantization here is for image classifiers.",
            )
        if str(manifest.get("precision", "fp32")).startswith("qdq"):
            raise ModelError(f"{folder.name} is already a quantized (QDQ) model.", "Quantize the float model instead.")
        try:
            pre = Preprocess.from_manifest(spec)
        except ValueError as exc:
            raise ModelError(f"The manifest in {folder} is not valid: {exc}", "Rebuild the model.") from exc
        # Every file the manifest names is read (and the labels copied into the new model): each must be
        # inside the folder, and the model's own external data too, before anything loads it.
        if model is None:
            entries = [f for f in manifest["files"] if isinstance(f, Mapping)]
            onnx_files = [f.get("path") for f in entries if str(f.get("path", "")).endswith(".onnx")]
            model = resolve_inside(
                folder, onnx_files[0] if onnx_files else MODEL_NAME, what=f"The manifest in {folder}", must_exist=True
            )
        elif not model.is_file():
            raise ModelError(f"{model} is missing.", "Rebuild or re-import the model.")
        inspect_onnx(model)
        named = spec.get("labels")
        labels_path = resolve_inside(
            folder, "labels.txt" if named is None else named, what=f"The labels file named by the manifest in {folder}"
        )
        labels: tuple[str, ...] = ()
        if labels_path.is_file():
            labels = tuple(s.strip() for s in labels_path.read_text(encoding="utf-8").splitlines() if s.strip())
        # The name becomes the default output folder's name: a manifest cannot choose a path with it.
        name = suggest_name(str(manifest.get("name") or folder.name))
        return cls(model, pre, labels, manifest, labels_path if labels else None, name)

    def label(self, index: int) -> str:
        return self.labels[index] if index < len(self.labels) else f"class {index}"


def _require_onnx() -> Any:
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
    onnx = _require_onnx()
    from onnxruntime.tools.onnx_model_utils import fix_output_shapes, make_dim_param_fixed

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
    onnx = _require_onnx()
    model = onnx.load(str(model_path), load_external_data=False)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if len(dims) == 4 and dims[2].dim_value > 0 and dims[3].dim_value > 0:
        return int(dims[2].dim_value), int(dims[3].dim_value)
    return None


def find_photos(folder: str | os.PathLike[str]) -> list[Path]:
    root = Path(folder)
    if not root.is_dir():
        raise ImageError(f"Calibration folder not found: {root}", "Give a folder of photos like the ones you classify.")
    photos = sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not photos:
        raise ImageError(f"No photos in {root}.", "Put a few JPEG or PNG photos there (10 or more is better).")
    return photos


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


def quantize_model(
    fixed_model: Path, out_model: Path, input_name: str, tensors: Sequence[np.ndarray], options: QuantizeOptions
) -> list[str]:
    """QNN-oriented QDQ quantization of a static-shape float model. Returns the quantizer's warnings."""
    _require_onnx()
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    class _Reader(PhotoReader, CalibrationDataReader):
        pass

    reader = _Reader(input_name, tensors)
    with _quantizer_warnings() as warnings:
        config = get_qnn_qdq_config(
            str(fixed_model),
            reader,
            activation_type=getattr(QuantType, _QUANT_TYPES[options.activations]),
            weight_type=getattr(QuantType, _QUANT_TYPES[options.weights]),
            per_channel=options.per_channel,
        )
        quantize(str(fixed_model), str(out_model), config)
    return warnings


@contextlib.contextmanager
def _quantizer_warnings() -> Iterator[list[str]]:
    """onnxruntime.quantization logs its advice on the root logger; keep it out of the console and
    return it to the caller instead."""
    captured: list[str] = []

    def keep(record: logging.LogRecord) -> bool:
        if "quantization" in record.pathname.replace("\\", "/") and record.name == "root":
            captured.append(record.getMessage())
            return False
        return True

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield captured
    finally:
        root.removeFilter(keep)


def summarize_quantizer_warnings(messages: Sequence[str]) -> list[str]:
    notes = []
    bias = [m for m in messages if "bias" in m and "exceeds the range" in m]
    if bias:
        notes.append(
            f"{len(bias)} layer(s) had their bias clipped to the int32 range (tiny per-channel weight scales; "
            "onnxruntime.quantization warns about it). The agreement above is measured with the clipped biases."
        )
    if any("opset 21" in m for m in messages):
        notes.append("16-bit activations need opset 21: the quantizer upgraded the model's opset.")
    return notes


def _cpu_session(model: Path) -> Any:
    ort = runtime.ort()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        return ort.InferenceSession(str(model), sess_options=so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        from engines.runtime.failures import explain

        raise explain(exc, "CPUExecutionProvider") from exc


def _top1(session: Any, input_name: str, tensor: np.ndarray, probabilities: bool) -> tuple[int, float]:
    raw = np.asarray(session.run(None, {input_name: tensor[None].astype(np.float32, copy=False)})[0])
    classes = raw.size if raw.ndim and raw.shape[0] == 1 else -1  # the same checks as every classification
    probs = to_probabilities(raw, 1, classes, "probabilities" if probabilities else "logits")[0]
    index = int(np.argmax(probs))
    return index, float(probs[index])


def side_by_side_latency(
    float_session: Any, qdq_session: Any, input_name: str, tensor: np.ndarray, runs: int
) -> tuple[float, float]:
    """Median batch-1 latency (ms) of both sessions, runs interleaved so both see the same machine load."""
    feed = {input_name: tensor[None].astype(np.float32, copy=False)}
    for session in (float_session, qdq_session):
        session.run(None, feed)  # warm-up
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(max(1, runs)):
        for session, bucket in ((float_session, times[0]), (qdq_session, times[1])):
            started = time.perf_counter()
            session.run(None, feed)
            bucket.append((time.perf_counter() - started) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def default_output(source: FloatSource) -> Path:
    folder = source.model_path.parent
    if source.manifest:
        return folder.parent / f"{folder.name}-qdq"
    return folder / f"{source.model_path.stem}-qdq"


def quantize_classifier(
    source: str | os.PathLike[str],
    calibration_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    options: QuantizeOptions | None = None,
    *,
    extra_manifest: Mapping[str, Any] | None = None,
    on_progress: Progress | None = None,
) -> QuantizeReport:
    """Quantize a float image classifier for the NPU and check it against the float model on the CPU.

    Writes OUT/model.onnx, the labels and a manifest (precision "qdq-a16w8" or "qdq-a8w8", devices
    ["npu"]) into a temporary folder first, then renames it into place."""
    options = options or QuantizeOptions()
    say = on_progress or (lambda text: None)
    float_source = FloatSource.open(source)
    out = Path(out_dir) if out_dir is not None else default_output(float_source)
    _check_output(out, float_source.model_path.parent, options.force, folder=bool(float_source.manifest))
    spec = float_source.preprocess
    if not float_source.manifest:
        size = model_input_size(float_source.model_path)
        if size is not None:
            spec = Preprocess(input_size=size, resize_shorter=round(max(size) * 256 / 224))
            float_source = dataclasses.replace(float_source, preprocess=spec)
    photos = find_photos(calibration_dir)
    say(f"Preparing {len(photos)} calibration photos…")
    all_views, centre, notes = calibration_set(photos, spec, options.augment)
    if float_source.manifest == {}:
        notes.append(
            "No manifest next to the model: preprocessing assumed (resize, centre crop, (x - 127) / 128, NCHW RGB)."
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        workdirs.sweep(out.parent, (f".{out.name}.",))  # left by a quantize that was killed
        work = workdirs.make(out.parent, f".{out.name}.")
    except OSError as exc:
        raise StorageError(
            f"The output folder {out} cannot be written: {exc.strerror or exc}.",
            "Choose another --out folder, or free some disk space.",
        ) from None
    try:
        fixed = work / "float_batch1.onnx"
        input_name = fix_batch_dimension(float_source.model_path, fixed)
        say(
            f"Quantizing ({options.activations} activations, {options.weights} weights, per-channel) "
            f"on {len(all_views)} views…"
        )
        started = time.perf_counter()
        staged = work / "staged"
        staged.mkdir()
        warnings = quantize_model(fixed, staged / MODEL_NAME, input_name, [t for _, t in all_views], options)
        notes.extend(summarize_quantizer_warnings(warnings))
        quantize_seconds = time.perf_counter() - started
        say("Comparing with the float model on the CPU…")
        report = _evaluate(float_source, staged, input_name, all_views, centre, options, quantize_seconds)
        report.notes[:0] = notes
        _write_folder(float_source, staged, out.name, report, extra_manifest or {})
        fixed.unlink()
        _replace(staged, out)
        report.folder = out
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _evaluate(
    source: FloatSource,
    staged: Path,
    input_name: str,
    all_views: Sequence[tuple[str, np.ndarray]],
    centre: Sequence[tuple[str, np.ndarray]],
    options: QuantizeOptions,
    quantize_seconds: float,
) -> QuantizeReport:
    float_session = _cpu_session(source.model_path)
    qdq_session = _cpu_session(staged / MODEL_NAME)
    float_input = float_session.get_inputs()[0].name
    probabilities = str(source.manifest.get("classifier", {}).get("output_kind", "logits")) == "probabilities"
    photos = []
    for name, tensor in centre:
        fi, fp = _top1(float_session, float_input, tensor, probabilities)
        qi, qp = _top1(qdq_session, input_name, tensor, probabilities)
        photos.append(PhotoResult(name, source.label(fi), source.label(qi), fp, qp))
    views_agree = sum(
        _top1(float_session, float_input, t, probabilities)[0] == _top1(qdq_session, input_name, t, probabilities)[0]
        for _, t in all_views
    )
    float_ms, qdq_ms = side_by_side_latency(float_session, qdq_session, input_name, centre[0][1], options.latency_runs)
    return QuantizeReport(
        folder=staged,
        precision=options.precision,
        options=options,
        calibration_photos=tuple(sorted({name.split(" ")[0] for name, _ in all_views})),
        calibration_samples=len(all_views),
        photos=photos,
        views_agree=int(views_agree),
        views_total=len(all_views),
        float_ms=float_ms,
        qdq_ms=qdq_ms,
        quantize_seconds=quantize_seconds,
        float_bytes=source.model_path.stat().st_size,
        qdq_bytes=(staged / MODEL_NAME).stat().st_size,
    )


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _write_folder(
    source: FloatSource, staged: Path, name: str, report: QuantizeReport, extra: Mapping[str, Any]
) -> None:
    files = [MODEL_NAME]
    if source.labels_path is not None:
        shutil.copyfile(source.labels_path, staged / source.labels_path.name)
        files.append(source.labels_path.name)
    classifier = dict(source.manifest.get("classifier", {}))
    if not classifier:
        pre = source.preprocess
        classifier = {
            "layout": pre.layout,
            "input_size": list(pre.input_size),
            "resize_shorter": pre.resize_shorter,
            "resample": pre.resample,
            "mean": list(pre.mean),
            "std": list(pre.std),
            "color": pre.color,
            "output_kind": "logits",
        }
    classifier["input"] = _input_name(staged / MODEL_NAME)
    classifier["batch"] = [1, 1]
    display = str(source.manifest.get("display_name", source.name))
    a, w = report.options.activations, report.options.weights
    manifest: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "name": name,
        "display_name": f"{display}, QDQ for the NPU ({a} activations, {w} weights)",
        "kind": str(source.manifest.get("kind", "image-classifier")),
        "licence": source.manifest.get("licence", ""),
        "licence_notes": source.manifest.get("licence_notes", ""),
        "source": {
            "derived_from": source.name,
            "float_model_sha256": sha256_file(source.model_path),
            "tool": "onnxruntime.quantization (get_qnn_qdq_config + quantize)",
            "packages": {"onnxruntime": _version("onnxruntime"), "onnx": _version("onnx")},
        },
        "precision": report.precision,
        "devices": ["npu"],
        "opset": _opset(staged / MODEL_NAME),
        "classifier": classifier,
        "quantization": {
            "format": "QDQ",
            "activations": a,
            "weights": w,
            "per_channel": report.options.per_channel,
            "calibration_method": "MinMax",
            "calibration_photos": list(report.calibration_photos),
            "calibration_samples": report.calibration_samples,
            "augmented": report.options.augment,
        },
        "verification": {
            "top1_agreement_with_float": {"agree": report.agree, "total": len(report.photos)},
            "views_agreement_with_float": {"agree": report.views_agree, "total": report.views_total},
            "cpu_latency_ms": {"float": round(report.float_ms, 2), "qdq": round(report.qdq_ms, 2)},
            "samples": {
                p.photo: {"top1": p.qdq_top1, "p": round(p.qdq_p, 4), "float_top1": p.float_top1} for p in report.photos
            },
        },
        **dict(extra),
    }
    manifest["files"] = [file_entry(staged, rel) for rel in sorted(files)]
    write_manifest(staged, manifest)


def _opset(model: Path) -> int | None:
    onnx = _require_onnx()
    imports = onnx.load(str(model), load_external_data=False).opset_import
    return next((int(o.version) for o in imports if o.domain in ("", "ai.onnx")), None)


def _check_output(out: Path, source_folder: Path, force: bool, *, folder: bool) -> None:
    """The output folder is replaced as a whole: it must not be, hold or sit inside the source model, and
    --force replaces only a model folder (one with a manifest) or an empty folder, never other files."""
    target, source = out.resolve(), source_folder.resolve()
    if target == source:
        raise ModelError("The output folder is the model's own folder.", "Choose another --out folder.")
    if target in source.parents:
        raise ModelError(
            f"The output folder {out} contains the source model ({source_folder}); replacing it would delete "
            "the source.",
            "Choose an --out folder outside the model's folder, e.g. next to it.",
        )
    if folder and source in target.parents:  # (a bare .onnx file's folder is not a model folder)
        raise ModelError(f"The output folder {out} is inside the source model's folder.",
                         "Choose an --out folder outside the model's folder, e.g. next to it.")
    if not out.exists() and not out.is_symlink():
        return
    if not force:
        raise ModelError(f"{out} already exists.", "Use --force to replace it, or choose another --out folder.")
    if out.is_symlink() or not out.is_dir():
        raise ModelError(f"{out} is not a folder; --force replaces only a model folder.", "Choose another --out.")
    if not (out / "manifest.json").is_file() and any(out.iterdir()):
        raise ModelError(
            f"{out} is not a model folder (no manifest.json) and is not empty; --force replaces only a model folder.",
            "Choose a new or empty --out folder.",
        )


def _input_name(model: Path) -> str:
    onnx = _require_onnx()
    return str(onnx.load(str(model), load_external_data=False).graph.input[0].name)


def _replace(staged: Path, out: Path) -> None:
    """Move the finished folder into place; an existing one (with --force) is swapped out, then removed."""
    old: Path | None = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-p{os.getpid()}-swap")  # named so that workdirs.sweep finds it
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out, old)
    os.replace(staged, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
