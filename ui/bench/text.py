"""Benchmark words: the results table's columns and cells for one model (a classifier's and a chat
model's numbers differ, so each kind has its own columns), the placement chip of a row, a row's
details, and a run's title in the history. Pure functions of the bench data (engines.bench.data), so
the view and its tests read the same words."""

from __future__ import annotations

import time

from engines import BENCH_CHAT, BENCH_FAILED, BenchRun, DeviceResult
from ui.common.placement_chip import ChipText, describe_placement, placement_from_dict

# Two-line headers: the unit under the name keeps every column as narrow as its numbers.
VISION_COLUMNS = (
    "Ran on",
    "Latency (ms)\np50 / p90 / p99",
    "Batch 1\nimages/s",
    "Batch N\nimages/s",
    "vs raw\nORT",
    "Load (s)\nfirst / cached",
    "CPU\n%",
    "Peak\nMB",
)
CHAT_COLUMNS = (
    "Ran on",
    "Per token (ms)\np50 / p90 / p99",
    "First token\nms",
    "Prefill\ntokens/s",
    "Decode\ntokens/s",
    "vs raw\ngenai",
    "Load (s)\nfirst / cached",
    "CPU\n%",
    "Peak\nMB",
)
COLUMN_TIPS = {
    "vs raw\nORT": "The engine's time per image against plain ONNX Runtime calls in the same run (1.00 = no overhead)",
    "vs raw\ngenai": "The engine's decode speed against a plain onnxruntime-genai loop in the same run (1.00 = same)",
    "Load (s)\nfirst / cached": "Creating the session the first time, and again with what the first one left behind",
    "CPU\n%": "Process CPU time over wall time while measuring (100 = one core busy)",
    "Peak\nMB": "The largest resident memory of the process while this device was measured",
}


def columns_for(kind: str, batch: int = 0) -> tuple[str, ...]:
    """The columns of a model kind's table; `batch` names the throughput run's batch size."""
    if kind == BENCH_CHAT:
        return CHAT_COLUMNS
    return tuple(c.replace("Batch N", f"Batch {batch}") if batch else c for c in VISION_COLUMNS)


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _three(p50: float, p90: float, p99: float) -> str:
    digits = 1 if p99 >= 10 else 2
    return f"{p50:.{digits}f} / {p90:.{digits}f} / {p99:.{digits}f}"


def row_chip(r: DeviceResult) -> ChipText:
    """Where the row ran, as the placement chip says it everywhere; a device that did not run says so
    in the same chip (the reason is its details)."""
    if not r.ok:
        what = "failed" if r.status == BENCH_FAILED else "not on this machine"
        return ChipText("error" if r.status == BENCH_FAILED else "neutral", f"{r.device}: {what}", r.reason or r.status)
    placement = placement_from_dict(r.placement)
    if placement is not None:
        return describe_placement(placement, r.device)
    ran = r.ran_on.split(" —", 1)[0] or r.device
    if r.fell_back:
        return ChipText("warn", f"Asked {r.device} → Ran on {ran}", r.fallback_reason or r.ran_on)
    return ChipText("ok", ran, r.ran_on)


def number_cells(r: DeviceResult) -> list[str]:
    """The row's numbers, in the order of columns_for(r.kind) after "Ran on" (plain text)."""
    count = len(columns_for(r.kind)) - 1
    if not r.ok:
        return ["—"] * count
    s, lat, res, chat = r.sessions, r.latency, r.resources, r.chat
    latency = _three(lat.p50_ms, lat.p90_ms, lat.p99_ms) if lat else "—"
    load = f"{s.first_s:.2f} / {s.cached_s:.2f}" if s else "—"
    tail = [load, _num(res.cpu_percent if res else None, 0), _num(res.peak_rss_mb if res else None, 0)]
    if r.kind == BENCH_CHAT:
        return [
            latency,
            _num(chat.time_to_first_token_ms if chat else None, 0),
            _num(chat.prefill_tokens_per_s if chat else None, 0),
            _num(chat.decode_tokens_per_s if chat else r.throughput_batch1, 1),
            _num(chat.decode_ratio if chat else None, 2),
            *tail,
        ]
    return [
        latency,
        _num(r.throughput_batch1, 1),
        _num(r.throughput_batch_n, 1),
        _num(r.overhead_ratio, 2),
        *tail,
    ]


def row_details(r: DeviceResult) -> str:
    """The row's tooltip: the chip's explanation, then the notes of the measurement."""
    lines = [row_chip(r).details]
    if r.sessions is not None and r.sessions.note:
        lines.append(r.sessions.note)
    lines.extend(r.notes)
    return "\n".join(line for line in lines if line)


def run_title(run: BenchRun) -> str:
    """The run in one line: when, and each model's fastest device."""
    parts = []
    for model in run.models():
        measured = [r for r in run.for_model(model) if r.ok and r.latency is not None]
        best = min(measured, key=lambda r: r.latency.p50_ms if r.latency else 0.0, default=None)
        if best is not None and best.latency is not None:
            parts.append(f"{model}: {best.label} {best.latency.p50_ms:.1f} {best.latency_unit}")
        else:
            parts.append(f"{model}: not measured")
    return f"{run_when(run)} · " + " · ".join(parts)


def run_when(run: BenchRun) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started))
