"""Benchmark statistics as plain functions of the samples: percentiles, latency summaries, throughput and
the engine-over-raw ratios. Pure Python (no numpy, no runtime), like the rest of the bench data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError("q must be in [0, 100]")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


@dataclass(frozen=True)
class LatencyStats:
    count: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> LatencyStats:
        if not samples_ms:
            raise ValueError("no latency samples")
        return cls(
            count=len(samples_ms),
            mean_ms=sum(samples_ms) / len(samples_ms),
            p50_ms=percentile(samples_ms, 50),
            p90_ms=percentile(samples_ms, 90),
            p99_ms=percentile(samples_ms, 99),
            min_ms=min(samples_ms),
            max_ms=max(samples_ms),
        )


def throughput(items: int, seconds: float) -> float:
    """Items per second (0 when nothing was timed)."""
    return items / seconds if seconds > 0 else 0.0


def paired_overhead(engine_ms: Sequence[float], raw_ms: Sequence[float]) -> tuple[float, float]:
    """(overhead in ms, overhead ratio) from calls made alternately, engine[i] next to raw[i].

    The overhead is the median of the pairwise differences: a slow spell on a shared machine hits
    both members of a pair alike and cancels out, where a ratio of two separate medians would swing
    by several percent. The ratio is (raw p50 + overhead) / raw p50: 1.00 means no overhead, 1.05
    means 5 % slower than raw."""
    if not engine_ms or len(engine_ms) != len(raw_ms):
        raise ValueError("paired overhead needs two equally long, non-empty lists")
    raw_p50 = median(raw_ms)
    if raw_p50 <= 0:
        raise ValueError("raw latency must be positive")
    overhead = median([e - r for e, r in zip(engine_ms, raw_ms, strict=True)])
    return overhead, (raw_p50 + overhead) / raw_p50


def rate_ratio(engine_rate: float, raw_rate: float) -> float:
    """Engine rate / raw rate (tokens/s): 1.00 means as fast as raw, 0.97 means 3 % slower."""
    if raw_rate <= 0:
        raise ValueError("raw rate must be positive")
    return engine_rate / raw_rate
