"""Model variants: an NPU device choice prefers the QDQ (quantized) variant of a model when one exists.

Pure Python over manifests (no onnxruntime): the UI and the app can call it before any session exists.
A variant is a model folder whose manifest says `source.derived_from` = the float model's name, whose
precision starts with "qdq", and whose devices include "npu" (what `npu-studio quantize` and the demo
recipe write).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from engines.errors import ModelError
from engines.models.manifest import Manifest, read_manifest
from engines.types import DeviceChoice, DeviceType

log = logging.getLogger(__name__)


def _manifest(folder: Path) -> Manifest | None:
    """The folder's manifest through the one reader (engines/models/manifest.py); None when unusable."""
    try:
        return read_manifest(folder, require_schema=False)
    except ModelError:
        return None




# What each NPU EP wants, from its documentation:
# - QNN (Hexagon HTP): a quantized QDQ model (8- or 16-bit activations, per-channel weights) or fp16.
# - OpenVINO (Intel NPU): FP32/FP16 models (the NPU compiler runs them in FP16) or INT8 QDQ models;
#   16-bit activations are not an NPU format there, so an a16 variant is skipped and the float model used.
# - VitisAI (AMD Ryzen AI): INT8 QDQ (AMD Quark XINT8: 8-bit activations) on every XDNA NPU; an FP32 model
#   is compiled to BF16 on XDNA2 (Ryzen AI 300) only. So an a8 variant, else the float model.
EIGHT_BIT_ACTIVATIONS_ONLY = frozenset({"OpenVINOExecutionProvider", "VitisAIExecutionProvider"})


def accepts(ep: str | None, manifest: Manifest) -> bool:
    """Whether NPU EP `ep` takes this QDQ variant (None: the EP is not known yet; any QDQ variant)."""
    if ep in EIGHT_BIT_ACTIVATIONS_ONLY:
        return manifest.activation_bits == 8
    return True


def qdq_variants(model_folder: Path, roots: Iterable[Path], ep: str | None = None) -> list[Path]:
    """QDQ variants of the model in `model_folder`, best first (agreement with float, then 16-bit
    activations, then name)."""
    base = _manifest(model_folder)
    if base is None:
        return []
    name = base.model_name
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
            if manifest is None or not manifest.quantized:
                continue
            devices = [d.lower() for d in manifest.devices]
            if manifest.derived_from != name or "npu" not in devices or not accepts(ep, manifest):
                continue
            sixteen = 1 if "16" in manifest.precision else 0
            candidates.append((-manifest.top1_agreement, -sixteen, folder.name, folder))
    return [c[3] for c in sorted(candidates)]


def resolve_variant(
    model_folder: str | os.PathLike[str],
    choice: DeviceChoice,
    models_root: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    ep: str | None = None,
) -> Path:
    """The folder to load for `choice`: the best QDQ variant of the model for a choice that names the NPU
    when one exists (in `models_root` or next to the model) and the NPU EP `ep` takes it, else the model
    itself. Whether a policy (`auto`, ...) lands on the NPU is the planner's answer: its caller asks it
    (engines/api.py) and passes the NPU choice and the planned EP."""
    folder = Path(model_folder)
    if choice.wanted_type != DeviceType.NPU:
        return folder
    manifest = _manifest(folder)
    if manifest is None or manifest.quantized:
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
