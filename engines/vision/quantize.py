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

from engines import runtime, workdirs
from engines.errors import StorageError, StudioError
from engines.models.manifest import Preprocess
from engines.vision.calibration import PhotoReader, calibration_set, find_photos
from engines.vision.float_source import MODEL_NAME, FloatSource, fix_batch_dimension, model_input_size, require_onnx
from engines.vision.qdq_folder import check_output, default_output, replace_folder, write_folder
from engines.vision.scores import to_probabilities

log = logging.getLogger(__name__)

ACTIVATION_TYPES = ("uint8", "uint16")
WEIGHT_TYPES = ("uint8", "int8")
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


def quantize_model(
    fixed_model: Path, out_model: Path, input_name: str, tensors: Sequence[np.ndarray], options: QuantizeOptions
) -> list[str]:
    """QNN-oriented QDQ quantization of a static-shape float model. Returns the quantizer's warnings."""
    require_onnx()
    quantization = runtime.load("onnxruntime.quantization")
    CalibrationDataReader, QuantType, quantize = (
        quantization.CalibrationDataReader, quantization.QuantType, quantization.quantize
    )
    get_qnn_qdq_config = runtime.load("onnxruntime.quantization.execution_providers.qnn").get_qnn_qdq_config

    class _Reader(PhotoReader, CalibrationDataReader):  # type: ignore[misc,valid-type]
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
    check_output(out, float_source.model_path.parent, options.force, folder=float_source.manifest is not None)
    spec = float_source.preprocess
    if float_source.manifest is None:
        size = model_input_size(float_source.model_path)
        if size is not None:
            spec = Preprocess(input_size=size, resize_shorter=round(max(size) * 256 / 224))
            float_source = dataclasses.replace(float_source, preprocess=spec)
    photos = find_photos(calibration_dir)
    say(f"Preparing {len(photos)} calibration photos…")
    all_views, centre, notes = calibration_set(photos, spec, options.augment)
    if float_source.manifest is None:
        notes.append(
            "No manifest next to the model: preprocessing assumed (resize, centre crop, (x - 127) / 128, NCHW RGB)."
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        workdirs.sweep(out.parent, (f".{out.name}.",))  # left by a quantize that was killed (any --out folder)
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
        write_folder(float_source, staged, out.name, report, extra_manifest or {})
        fixed.unlink()
        replace_folder(staged, out)
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
    probabilities = source.manifest is not None and source.manifest.output_kind == "probabilities"
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


