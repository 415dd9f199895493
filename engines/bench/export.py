"""Benchmark runs as CSV: one row per model and device, the columns a spreadsheet wants, written by the
one CSV writer (engines/csvfile.py: no cell is ever run as a formula). Pure Python."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import TextIO

from engines import csvfile
from engines.bench.data import BenchRun, DeviceResult

CSV_COLUMNS = (
    "run_id",
    "model",
    "kind",
    "device",
    "status",
    "reason",
    "ep",
    "ran_on",
    "fell_back",
    "fallback_reason",
    "session_first_s",
    "session_cached_s",
    "compiled_cache",
    "latency_unit",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "mean_ms",
    "samples",
    "raw_p50_ms",
    "overhead_ms",
    "overhead_ratio",
    "throughput_unit",
    "throughput_batch1",
    "batch",
    "throughput_batch_n",
    "cpu_percent",
    "peak_rss_mb",
    "time_to_first_token_ms",
    "prefill_tokens_per_s",
    "decode_tokens_per_s",
    "raw_decode_tokens_per_s",
    "decode_ratio",
    "notes",
)


def _num(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def csv_row(run_id: str, r: DeviceResult) -> dict[str, str]:
    s, lat, res, chat = r.sessions, r.latency, r.resources, r.chat
    return {
        "run_id": run_id,
        "model": r.model,
        "kind": r.kind,
        "device": r.device,
        "status": r.status,
        "reason": r.reason,
        "ep": r.ep,
        "ran_on": r.ran_on,
        "fell_back": "yes" if r.fell_back else "no",
        "fallback_reason": r.fallback_reason,
        "session_first_s": _num(s.first_s if s else None),
        "session_cached_s": _num(s.cached_s if s else None),
        "compiled_cache": f"{s.first_status}/{s.cached_status}" if s and s.first_status else "",
        "latency_unit": r.latency_unit,
        "p50_ms": _num(lat.p50_ms if lat else None),
        "p90_ms": _num(lat.p90_ms if lat else None),
        "p99_ms": _num(lat.p99_ms if lat else None),
        "mean_ms": _num(lat.mean_ms if lat else None),
        "samples": str(lat.count) if lat else "",
        "raw_p50_ms": _num(r.raw_latency.p50_ms if r.raw_latency else None),
        "overhead_ms": _num(r.overhead_ms, 4),
        "overhead_ratio": _num(r.overhead_ratio, 4),
        "throughput_unit": r.throughput_unit,
        "throughput_batch1": _num(r.throughput_batch1, 2),
        "batch": str(r.batch),
        "throughput_batch_n": _num(r.throughput_batch_n, 2),
        "cpu_percent": _num(res.cpu_percent if res else None, 1),
        "peak_rss_mb": _num(res.peak_rss_mb if res else None, 1),
        "time_to_first_token_ms": _num(chat.time_to_first_token_ms if chat else None, 1),
        "prefill_tokens_per_s": _num(chat.prefill_tokens_per_s if chat else None, 1),
        "decode_tokens_per_s": _num(chat.decode_tokens_per_s if chat else None, 2),
        "raw_decode_tokens_per_s": _num(chat.raw_decode_tokens_per_s if chat else None, 2),
        "decode_ratio": _num(chat.decode_ratio if chat else None, 4),
        "notes": " | ".join(r.notes),
    }


def write_csv(runs: Iterable[BenchRun], out: TextIO) -> int:
    """One row per model x device of every run. Returns the number of rows."""
    writer = csvfile.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    for run in runs:
        for result in run.results:
            row = csv_row(run.run_id, result)
            writer.writerow(row[column] for column in CSV_COLUMNS)
            count += 1
    return count


def csv_text(runs: Iterable[BenchRun]) -> str:
    buffer = io.StringIO()
    write_csv(runs, buffer)
    return buffer.getvalue()
