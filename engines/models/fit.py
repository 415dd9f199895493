"""Fit hints: whether a model fits in this machine's memory before anything loads it (its weights on disk
plus, for a chat model, the KV cache its context needs, against the free and installed RAM). Pure
Python: reads the manifest and genai_config.json, loads nothing.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines import jsonfile
from engines.errors import ModelError
from engines.models.library import GENAI_CONFIG, format_bytes, manifest_files
from engines.models.manifest import Manifest, list_model_files, read_manifest

FITS = "fits"
MAY_BE_SLOW = "may be slow"
WONT_FIT = "won't fit"
_WEIGHT_SUFFIXES = (".onnx", ".data", ".onnx_data", ".bin", ".pb")
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "int8": 1, "float64": 8}


@dataclass(frozen=True)
class FitHint:
    verdict: str  # FITS | MAY_BE_SLOW | WONT_FIT
    weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    available_bytes: int
    total_bytes: int
    context: int | None = None
    kv_detail: str = ""

    @property
    def needed_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes

    def message(self) -> str:
        parts = [f"weights {format_bytes(self.weights_bytes)}"]
        if self.context:
            parts.append(f"KV cache {format_bytes(self.kv_cache_bytes)} for {self.context:,} tokens")
        parts.append(f"working memory ~{format_bytes(self.overhead_bytes)}")
        memory = f"{format_bytes(self.available_bytes)} of {format_bytes(self.total_bytes)} RAM free"
        head = {FITS: "Fits", MAY_BE_SLOW: "May be slow", WONT_FIT: "Won't fit"}[self.verdict]
        tail = {
            FITS: "",
            MAY_BE_SLOW: " Other programs may be paged out while it runs; close some or use a shorter context.",
            WONT_FIT: " Use a smaller or more quantized model, or a shorter context.",
        }[self.verdict]
        return f"{head}: needs ~{format_bytes(self.needed_bytes)} ({', '.join(parts)}); {memory}.{tail}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "needed_bytes": self.needed_bytes,
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "overhead_bytes": self.overhead_bytes,
            "available_bytes": self.available_bytes,
            "total_bytes": self.total_bytes,
            "context": self.context,
            "kv_detail": self.kv_detail,
            "message": self.message(),
        }


def system_memory() -> tuple[int, int]:
    """(available, total) bytes of RAM. On Linux from /proc/meminfo, as psutil reads them itself
    (MemAvailable, MemTotal), without importing psutil on the way to a chat answer."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/meminfo", encoding="ascii") as fh:
                fields = {k: v for k, _, v in (line.partition(":") for line in fh)}
            return int(fields["MemAvailable"].split()[0]) * 1024, int(fields["MemTotal"].split()[0]) * 1024
        except (OSError, KeyError, ValueError, IndexError):
            pass  # an unusual kernel: psutil knows the others
    import psutil

    memory = psutil.virtual_memory()
    return int(memory.available), int(memory.total)


def kv_cache_bytes(config: Mapping[str, Any], context: int, dtype_bytes: int) -> tuple[int, str]:
    """layers x KV heads x head size x 2 (K and V) x context x bytes, from a genai_config."""
    decoder = _section(_section(config, "model"), "decoder")
    layers = _count(decoder.get("num_hidden_layers"))
    heads = _count(decoder.get("num_attention_heads"))
    kv_heads = _count(decoder.get("num_key_value_heads")) or heads
    head_size = _count(decoder.get("head_size"))
    if not head_size and heads:
        head_size = _count(decoder.get("hidden_size")) // heads
    size = layers * kv_heads * head_size * 2 * context * dtype_bytes
    detail = f"{layers} layers x {kv_heads} KV heads x {head_size} head size x 2 x {context} tokens x {dtype_bytes} B"
    return size, detail


def _section(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """`config[key]` when it is an object; a config edited by hand may hold anything there."""
    value = config.get(key)
    return value if isinstance(value, Mapping) else {}


def _count(value: object) -> int:
    """A non-negative whole number from a config value, 0 for anything else ("abc", [], -3, 1e300)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if not math.isfinite(value) or value < 0 or value > 1 << 40:
        return 0
    return int(value)


def estimate_fit(
    folder: Path,
    context: int | None = None,
    memory: tuple[int, int] | None = None,
) -> FitHint:
    """Whether the model in `folder` fits in RAM with `context` tokens (default: the config's max_length).

    fits: needs at most 80 % of the free RAM. may be slow: more than that but less than the installed
    RAM (other programs would be paged out). won't fit: more than the installed RAM.
    """
    available, total = memory or system_memory()
    manifest: Manifest | None = None
    try:
        manifest = read_manifest(folder)
        files = [(f.path, f.size) for f in manifest_files(manifest)]
    except ModelError:
        files = [(rel, (folder / rel).stat().st_size) for rel in list_model_files(folder)]
    weights = sum(size for rel, size in files if rel.lower().endswith(_WEIGHT_SUFFIXES))
    kv, detail, used_context = 0, "", None
    config_path = folder / GENAI_CONFIG
    if config_path.is_file():
        try:
            config = jsonfile.read_object(config_path)
        except jsonfile.JsonFileError as exc:
            raise ModelError(f"{GENAI_CONFIG} in {folder} could not be read: {exc.problem}.") from exc
        model = _section(config, "model")
        limit = _count(model.get("context_length")) or None
        default = _count(_section(config, "search").get("max_length")) or limit or 2048
        used_context = min(context or default, limit) if limit else (context or default)
        dtype = (manifest.kv_cache_dtype if manifest is not None else "") or _guess_kv_dtype(config)
        kv, detail = kv_cache_bytes(config, used_context, _DTYPE_BYTES.get(dtype, 4))
    overhead = max(256 << 20, weights // 10)
    needed = weights + kv + overhead
    if needed <= available * 0.8:
        verdict = FITS
    elif needed <= total:
        verdict = MAY_BE_SLOW
    else:
        verdict = WONT_FIT
    return FitHint(verdict, weights, kv, overhead, available, total, used_context, detail)


def _guess_kv_dtype(config: Mapping[str, Any]) -> str:
    """Without a recorded type: GPU/NPU builds of the genai builder use fp16 caches, CPU builds fp32."""
    text = json.dumps(_section(_section(_section(config, "model"), "decoder"), "session_options")).lower()
    return "float16" if any(ep in text for ep in ('"dml"', '"cuda"', '"qnn"', '"webgpu"')) else "float32"
