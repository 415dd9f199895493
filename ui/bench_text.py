"""Benchmark words: the results table's columns and cells, and a run's one-line title in the history.
Pure functions of the bench data (engines.bench.data), so the view and its tests read the same words."""

from __future__ import annotations

import time

from engines.bench.data import BenchRun, DeviceResult
from ui.placement_chip import describe_placement, placement_from_dict

COLUMNS = (
    "Model",
    "Device",
    "Ran on",
    "Session first / cached (s)",
    "p50",
    "p90",
    "p99",
    "Unit",
    "Batch 1 /s",
    "Batch N /s",
    "vs raw",
    "First token (ms)",
    "Prefill tok/s",
    "Decode tok/s",
    "CPU %",
    "Peak RSS (MB)",
)


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def result_cells(r: DeviceResult) -> list[str]:
    """One table row (plain text)."""
    if not r.ok:
        return [r.model, r.device, f"{r.status}: {r.reason}"] + ["—"] * (len(COLUMNS) - 3)
    s, lat, res, chat = r.sessions, r.latency, r.resources, r.chat
    ratio = chat.decode_ratio if chat is not None else r.overhead_ratio
    placement = placement_from_dict(r.placement)
    if placement is not None:
        ran_on = describe_placement(placement, r.device).text
    else:
        ran_on = r.ran_on + (f" (fell back: {r.fallback_reason})" if r.fell_back else "")
    return [
        r.model,
        r.label,
        ran_on,
        f"{s.first_s:.2f} / {s.cached_s:.2f}" if s else "—",
        _num(lat.p50_ms if lat else None),
        _num(lat.p90_ms if lat else None),
        _num(lat.p99_ms if lat else None),
        r.latency_unit,
        _num(r.throughput_batch1, 1),
        f"{_num(r.throughput_batch_n, 1)} (×{r.batch})" if r.throughput_batch_n is not None else "—",
        _num(ratio, 3),
        _num(chat.time_to_first_token_ms if chat else None, 0),
        _num(chat.prefill_tokens_per_s if chat else None, 0),
        _num(chat.decode_tokens_per_s if chat else None, 1),
        _num(res.cpu_percent if res else None, 0),
        _num(res.peak_rss_mb if res else None, 0),
    ]


def run_title(run: BenchRun) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started))
    parts = []
    for model in run.models():
        measured = [r for r in run.for_model(model) if r.ok and r.latency is not None]
        best = min(measured, key=lambda r: r.latency.p50_ms if r.latency else 0.0, default=None)
        if best is not None and best.latency is not None:
            parts.append(f"{model}: {best.label} {best.latency.p50_ms:.1f} {best.latency_unit}")
        else:
            parts.append(f"{model}: not measured")
    return f"{when} · " + " · ".join(parts)
