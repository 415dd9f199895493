"""Model variants: an NPU device choice prefers the QDQ (quantized) variant of a model when one exists.

Pure Python over manifests (no onnxruntime): the UI and the app can call it before any session exists.
A variant is a model folder whose manifest says `source.derived_from` = the float model's name, whose
precision starts with "qdq", and whose devices include "npu" (what `npu-studio quantize` and the demo
recipe write).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from engines.errors import ModelError
from engines.models.manifest import read_manifest
from engines.types import DeviceChoice, DeviceType, Policy

log = logging.getLogger(__name__)



def _manifest(folder: Path) -> Mapping[str, Any] | None:
    """The folder's manifest through the one reader (engines/models/manifest.py); None when unusable."""
    try:
        return read_manifest(folder, require_schema=False).data
    except ModelError:
        return None


def is_quantized(manifest: Mapping[str, Any]) -> bool:
    return str(manifest.get("precision", "")).lower().startswith("qdq")


def wants_npu(choice: DeviceChoice, npu_available: bool = False) -> bool:
    """True for an NPU choice (`npu`, `qnn`, ...), and for automatic choices that will pick the NPU."""
    if choice.wanted_type == DeviceType.NPU:
        return True
    automatic = choice.ep is None and choice.policy in (Policy.AUTO, Policy.MAX_EFFICIENCY)
    return automatic and npu_available


def _agreement(manifest: Mapping[str, Any]) -> float:
    found = manifest.get("verification", {})
    agreement = found.get("top1_agreement_with_float", {}) if isinstance(found, dict) else {}
    try:
        return float(agreement["agree"]) / float(agreement["total"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return 0.0


# What each NPU EP wants, from its documentation:
# - QNN (Hexagon HTP): a quantized QDQ model (8- or 16-bit activations, per-channel weights) or fp16.
# - OpenVINO (Intel NPU): FP32/FP16 models (the NPU compiler runs them in FP16) or INT8 QDQ models;
#   16-bit activations are not an NPU format there, so an a16 variant is skipped and the float model used.
# - VitisAI (AMD Ryzen AI): INT8 QDQ (AMD Quark XINT8: 8-bit activations) on every XDNA NPU; an FP32 model
#   is compiled to BF16 on XDNA2 (Ryzen AI 300) only. So an a8 variant, else the float model.
EIGHT_BIT_ACTIVATIONS_ONLY = frozenset({"OpenVINOExecutionProvider", "VitisAIExecutionProvider"})


def _activation_bits(manifest: Mapping[str, Any]) -> int:
    quant = manifest.get("quantization", {})
    activations = str(quant.get("activations", "") if isinstance(quant, dict) else "").lower()
    if activations:
        return 16 if "16" in activations else 8
    precision = str(manifest.get("precision", "")).lower()
    return 16 if "a16" in precision else 8


def accepts(ep: str | None, manifest: Mapping[str, Any]) -> bool:
    """Whether NPU EP `ep` takes this QDQ variant (None: the EP is not known yet; any QDQ variant)."""
    if ep in EIGHT_BIT_ACTIVATIONS_ONLY:
        return _activation_bits(manifest) == 8
    return True


def qdq_variants(model_folder: Path, roots: Iterable[Path], ep: str | None = None) -> list[Path]:
    """QDQ variants of the model in `model_folder`, best first (agreement with float, then 16-bit
    activations, then name)."""
    base = _manifest(model_folder)
    if base is None:
        return []
    name = str(base.get("name", model_folder.name))
    candidates: list[tuple[float, int, str, Path]] = []
    seen: set[Path] = set()
    for root in roots:
        if not root.is_dir():
            continue
        for folder in sorted(root.iterdir()):
            if not folder.is_dir() or folder.resolve() in seen or folder.resolve() == model_folder.resolve():
                continue
            seen.add(folder.resolve())
            manifest = _manifest(folder)
            if manifest is None or not is_quantized(manifest):
                continue
            source = manifest.get("source", {})
            derived = source.get("derived_from") if isinstance(source, dict) else None
            devices = [str(d).lower() for d in manifest.get("devices", [])]
            if derived != name or "npu" not in devices or not accepts(ep, manifest):
                continue
            sixteen = 1 if "16" in str(manifest.get("precision", "")) else 0
            candidates.append((-_agreement(manifest), -sixteen, folder.name, folder))
    return [c[3] for c in sorted(candidates)]


def resolve_variant(
    model_folder: str | os.PathLike[str],
    choice: DeviceChoice,
    models_root: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    npu_available: bool = False,
    ep: str | None = None,
) -> Path:
    """The folder to load for `choice`: the best QDQ variant of the model for an NPU choice when one
    exists (in `models_root` or next to the model) and the NPU EP `ep` takes it, else the model itself."""
    folder = Path(model_folder)
    if not wants_npu(choice, npu_available):
        return folder
    manifest = _manifest(folder)
    if manifest is None or is_quantized(manifest):
        return folder
    roots = _roots(models_root)
    variants = qdq_variants(folder, [*roots, folder.parent], ep or choice.ep)
    if variants:
        log.info("NPU choice: using the QDQ variant %s of %s", variants[0].name, folder.name)
        return variants[0]
    return folder


def _roots(models_root: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(models_root, str | os.PathLike):
        return [Path(models_root)]
    return [Path(r) for r in models_root]
