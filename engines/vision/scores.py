"""A classifier's raw output becomes probabilities only when it can be right.

A model that runs can still answer nonsense: an output without a batch axis (one row of scores read as
four photos, "100.00% class0" for each), more or fewer scores than labels, NaN or infinite scores (a
manifest `std` of 0 divides by zero), or "probabilities" that are logits (130.84%, -12.38%). Every
place that turns scores into what a user reads (classify, the app, bench, import's test run, quantize's
agreement) goes through `to_probabilities`, which refuses such output with the reason instead of
showing it. Pure numpy (the manifest's
mean/std rule is `engines.models.manifest.check_normalisation`).
"""

from __future__ import annotations

import numpy as np

from engines.errors import InputContractError, ModelError

# A probability row may be off by float rounding, no more.
RANGE_TOLERANCE = 1e-3
SUM_TOLERANCE = 1e-2


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    result: np.ndarray = exp / exp.sum(axis=-1, keepdims=True)
    return result


def to_probabilities(
    raw: np.ndarray, batch: int, classes: int, output_kind: str, what: str = "The model"
) -> np.ndarray:
    """(batch, classes) probabilities from a model's raw output, or an error saying why it is wrong."""
    raw = np.asarray(raw)
    if raw.ndim < 1 or raw.shape[0] != batch:
        raise InputContractError(
            f"{what} answered {batch} image{'s' if batch != 1 else ''} with output of shape {list(raw.shape)}: "
            "its first axis is not one row per image (no batch axis).",
            "Export the model with a batch axis first (N, classes).",
        )
    rows = raw.reshape(batch, -1)
    if rows.shape[1] != classes:
        raise InputContractError(
            f"{what} gives {rows.shape[1]} scores per image but has {classes} labels.",
            "Use the labels file that belongs to this model.",
        )
    # As few numpy calls as the checks allow: right after a run the caches are cold, and each call
    # costs ~10 us then (tests/bench/bench_vision.py measures this path next to the bare run).
    if not np.isfinite(rows).all():
        bad = int((~np.isfinite(rows)).sum())
        raise ModelError(
            f"{what} produced {bad} score{'s' if bad != 1 else ''} that {'are' if bad != 1 else 'is'} not a "
            "number (NaN or infinity); its results would be meaningless.",
            "Check the manifest's mean and std (a std of 0 divides by zero) and the model file.",
        )
    if output_kind == "probabilities":
        values = rows.astype(np.float64)
        low, high = float(values.min()), float(values.max())
        worst = float(np.abs(values.sum(axis=1) - 1.0).max())
        if low < -RANGE_TOLERANCE or high > 1 + RANGE_TOLERANCE or worst > SUM_TOLERANCE:
            raise ModelError(
                f"{what}'s manifest says it outputs probabilities, but its scores range from {low:.4g} to "
                f"{high:.4g} and a row sums to {1 + worst:.4g} (probabilities are in [0, 1] and sum to 1).",
                'Set "output_kind": "logits" in the manifest (NPU Studio then applies softmax).',
            )
        return np.clip(values, 0.0, 1.0).astype(np.float32)
    # softmax in float64 (the same operations as softmax(rows.astype(float64)), two calls fewer)
    exp = np.exp(np.subtract(rows, rows.max(axis=-1, keepdims=True), dtype=np.float64))
    result: np.ndarray = (exp / exp.sum(axis=-1, keepdims=True)).astype(np.float32)
    return result

