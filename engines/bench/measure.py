"""What every benchmark measurement shares: alternating timed calls, the resource meter, progress across
jobs, cancel checks, and the fields of a measured result. The vision run (engines/bench/runner.py) and
the chat run (engines/bench/chat_run.py) both use these."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.bench.data import OK, BenchConfig, BenchProgress, Resources
from engines.errors import CancelledError
from engines.runtime.devices import DiscoveryReport
from engines.types import CancelToken, DeviceType, Placement

BURST = 1  # calls per candidate before switching: pairs of calls made back to back
RSS_SAMPLE_SECONDS = 0.05

BenchProgressCallback = Callable[[BenchProgress], None]
Clock = Callable[[], float]


def check_cancel(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.cancelled:
        raise CancelledError("Benchmark cancelled.")


# --------------------------------------------------------------------------------------------
# Measuring helpers
# --------------------------------------------------------------------------------------------


def interleave(
    calls: Mapping[str, Callable[[], object]],
    count: int,
    *,
    burst: int = BURST,
    cancel: CancelToken | None = None,
    on_step: Callable[[int], None] | None = None,
    clock: Clock = time.perf_counter,
) -> dict[str, list[float]]:
    """Time `count` calls of each candidate (milliseconds), alternating them in bursts of `burst` and
    reversing the order every other burst, so that slow spells hit every candidate alike."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    items = list(calls.items())
    done = 0
    round_index = 0
    while done < count:
        n = min(burst, count - done)
        order = items if round_index % 2 == 0 else items[::-1]
        for name, fn in order:
            samples = times[name]
            for _ in range(n):
                check_cancel(cancel)
                started = clock()
                fn()
                samples.append((clock() - started) * 1000)
        done += n
        round_index += 1
        if on_step is not None:
            on_step(done)
    return times


class ResourceMeter:
    """Process CPU % (CPU time / wall time) and peak RSS (sampled in a thread) over a `with` block."""

    def __init__(self, interval: float = RSS_SAMPLE_SECONDS) -> None:
        import psutil

        self._process = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._peak = 0
        self._cpu0 = 0.0
        self._wall0 = 0.0
        self.result: Resources | None = None
        self._cpu_count = psutil.cpu_count(logical=True) or 1

    def _cpu(self) -> float:
        times = self._process.cpu_times()
        return float(times.user + times.system)

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self._peak = max(self._peak, int(self._process.memory_info().rss))

    def __enter__(self) -> ResourceMeter:
        self._peak = int(self._process.memory_info().rss)
        self._cpu0, self._wall0 = self._cpu(), time.perf_counter()
        self._thread = threading.Thread(target=self._sample, name="bench-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall0
        cpu = self._cpu() - self._cpu0
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._peak = max(self._peak, int(self._process.memory_info().rss))
        self.result = Resources(
            cpu_percent=100 * cpu / wall if wall > 0 else 0.0,
            cpu_count=self._cpu_count,
            peak_rss_mb=self._peak / (1024 * 1024),
        )


class Reporter:
    """Turns per-job fractions into overall progress for the callback."""

    def __init__(self, jobs: int, callback: BenchProgressCallback | None) -> None:
        self.jobs = max(1, jobs)
        self.job = 0
        self.stage = ""
        self._callback = callback

    def start_job(self, stage: str) -> None:
        self.job += 1
        self.update(0.0, stage)

    def update(self, fraction: float, stage: str | None = None, detail: str = "") -> None:
        if stage is not None:
            self.stage = stage
        if self._callback is None:
            return
        overall = (self.job - 1 + min(1.0, max(0.0, fraction))) / self.jobs
        self._callback(BenchProgress(overall, self.stage, detail, self.job, self.jobs))


def measured_on(folder: Path, kind: str, device: DeviceType, ep: str, placement: Placement) -> dict[str, Any]:
    """The fields every measured result shares: what ran, and where it really ran."""
    return {
        "model": folder.name,
        "kind": kind,
        "device": device.value,
        "status": OK,
        "ep": ep,
        "ran_on": placement.ran_on(),
        "fell_back": placement.fell_back,
        "fallback_reason": placement.reason if placement.fell_back else "",
        "placement": placement.as_dict(),
    }


@dataclass(frozen=True)
class DeviceJob:
    """One model on one device type, as the runner hands it to the chat or the vision measurement."""

    folder: Path
    device: DeviceType
    ep: str  # the device's first usable EP
    config: BenchConfig
    report: DiscoveryReport  # the devices found, which the sessions are opened against
    reporter: Reporter
    cancel: CancelToken | None
