"""The folder a QDQ model is written to: where it goes by default, what it may replace (never the source
model, never files that are not a model folder), its manifest (what it was made from, how, and how well
it agrees with the float model), and the swap that puts a finished folder into place.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engines import names, workdirs
from engines.errors import ModelError
from engines.models.manifest import MANIFEST_NAME, SCHEMA_VERSION, file_entry, has_manifest, sha256_file, write_manifest
from engines.models.paths import is_within
from engines.vision.float_source import MODEL_NAME, FloatSource, model_input_name, model_opset

if TYPE_CHECKING:
    from engines.vision.quantize import QuantizeReport


def default_output(source: FloatSource) -> Path:
    folder = source.model_path.parent
    if source.manifest is not None:
        return folder.parent / f"{folder.name}-qdq"
    return folder / f"{source.model_path.stem}-qdq"


def check_output(out: Path, source_folder: Path, force: bool, *, folder: bool) -> None:
    """The output folder is replaced as a whole: it must not be, hold or sit inside the source model, and
    --force replaces only a model folder (one with a manifest) or an empty folder, never other files. Its
    name follows the rules of every platform (engines/names.py)."""
    problem = names.name_problem(out.name, "output folder name") or names.path_length_problem(
        out / MODEL_NAME, "output model path")
    with contextlib.suppress(OSError):
        other = names.case_collision(out.name, [p.name for p in out.parent.iterdir()])
        if other and not problem:
            problem = (f"'{out.name}' differs from {out.parent / other} only in case; on Windows and macOS they "
                       "would be one folder")
    if problem:
        raise ModelError(f"{problem}.", "Choose another --out folder.")
    target, source = out.resolve(), source_folder.resolve()
    if target == source:
        raise ModelError("The output folder is the model's own folder.", "Choose another --out folder.")
    if is_within(source, target):
        raise ModelError(
            f"The output folder {out} contains the source model ({source_folder}); replacing it would delete "
            "the source.",
            "Choose an --out folder outside the model's folder, e.g. next to it.",
        )
    if folder and is_within(target, source):  # (a bare .onnx file's folder is not a model folder)
        raise ModelError(f"The output folder {out} is inside the source model's folder.",
                         "Choose an --out folder outside the model's folder, e.g. next to it.")
    if not out.exists() and not out.is_symlink():
        return
    if not force:
        raise ModelError(f"{out} already exists.", "Use --force to replace it, or choose another --out folder.")
    if out.is_symlink() or not out.is_dir():
        raise ModelError(f"{out} is not a folder; --force replaces only a model folder.", "Choose another --out.")
    if not has_manifest(out) and any(out.iterdir()):
        raise ModelError(
            f"{out} is not a model folder (no {MANIFEST_NAME}) and is not empty; --force replaces only a model folder.",
            "Choose a new or empty --out folder.",
        )


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def write_folder(
    source: FloatSource, staged: Path, name: str, report: QuantizeReport, extra: Mapping[str, Any]
) -> None:
    files = [MODEL_NAME]
    if source.labels_path is not None:
        shutil.copyfile(source.labels_path, staged / source.labels_path.name)
        files.append(source.labels_path.name)
    original = source.manifest
    classifier = dict(original.classifier or {}) if original is not None else {}
    if not classifier:
        classifier = {**source.preprocess.manifest_section(), "output_kind": "logits"}
    classifier["input"] = model_input_name(staged / MODEL_NAME)
    classifier["batch"] = [1, 1]
    display = (original.display_name if original is not None else "") or source.name
    a, w = report.options.activations, report.options.weights
    manifest: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "name": name,
        "display_name": f"{display}, QDQ for the NPU ({a} activations, {w} weights)",
        "kind": (original.kind if original is not None else "") or "image-classifier",
        "licence": original.licence if original is not None else "",
        "licence_notes": original.licence_notes if original is not None else "",
        "source": {
            "derived_from": source.name,
            "float_model_sha256": sha256_file(source.model_path),
            "tool": "onnxruntime.quantization (get_qnn_qdq_config + quantize)",
            "packages": {"onnxruntime": _version("onnxruntime"), "onnx": _version("onnx")},
        },
        "precision": report.precision,
        "devices": ["npu"],
        "opset": model_opset(staged / MODEL_NAME),
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


def replace_folder(staged: Path, out: Path) -> None:
    """Move the finished folder into place; an existing one (with --force) is swapped out, then removed."""
    old: Path | None = None
    if out.exists():
        old = out.with_name(workdirs.name(f".{out.name}.old-"))  # named so that workdirs.sweep finds it
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out, old)
    os.replace(staged, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
