"""The same model on every device, side by side, with the engine's overhead measured against raw calls.

`run_benchmark(config, on_progress=..., on_result=..., cancel=...)` is a plain function (no Qt): for
each model and each requested device type it creates the session twice (first, then with what the
first left in a fresh compiled-model cache), warms up (excluded), then times the engine and the raw
runtime *interleaved* on the same session, so a noisy neighbour on a shared machine hits both alike:

- vision: `ImageClassifier.infer` vs a bare `session.run` on the same session, call for call (softmax
  and top-5 are CPU work either caller does, so neither side times them); p50 / p90 / p99 at batch 1,
  throughput at batch 1 and batch N;
- chat: `Conversation.send` vs a raw onnxruntime-genai loop on the same og.Model, token for token in
  lockstep (engines.bench.genai): time to first token, prefill and decode tokens/s.

A device type with no usable device is listed with the reason, never skipped; a run that fell back
(a "GPU" run that ended on the CPU) carries its placement and says so.
"""

from __future__ import annotations

import gc
import importlib.metadata
import logging
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.bench.data import (
    CHAT,
    FAILED,
    UNAVAILABLE,
    VISION,
    BenchConfig,
    BenchRun,
    DeviceResult,
    Resources,
    SessionTimes,
)
from engines.bench.measure import (
    BenchProgressCallback,
    DeviceJob,
    Reporter,
    ResourceMeter,
    check_cancel,
    interleave,
    measured_on,
)
from engines.bench.stats import LatencyStats, paired_overhead, throughput
from engines.errors import CancelledError, ModelError
from engines.runtime.devices import DiscoveryReport, discover
from engines.runtime.fallback import HEALTH, note_failure
from engines.types import CPU_EP, CancelToken, DeviceChoice, DeviceType, Placement, short_ep_name

log = logging.getLogger(__name__)

ResultCallback = Callable[[DeviceResult], None]



def model_kind(folder: str | os.PathLike[str]) -> str:
    """VISION for a classifier folder (manifest with a "classifier" section), CHAT for a genai folder."""
    root = Path(folder)
    if not root.is_dir():
        raise ModelError(f"Model folder not found: {root}.", "Pick a model folder that exists.")
    if (root / "genai_config.json").is_file():
        return CHAT
    from engines.models.manifest import has_manifest, read_manifest

    if has_manifest(root) and read_manifest(root, require_schema=False).classifier is not None:
        return VISION
    raise ModelError(
        f"{root} is neither an image classifier (manifest.json with a classifier section) nor an "
        "onnxruntime-genai chat model (genai_config.json).",
        "Benchmark one of the installed models (`npu-studio models`), or import the model first.",
    )


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def _distribution_version(*names: str) -> str:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def machine_info(report: DiscoveryReport) -> dict[str, Any]:
    import psutil

    return {
        "platform": report.platform,
        "system": f"{platform.system()} {platform.release()}",
        "processor": platform.processor() or platform.machine(),
        "cpu_count": psutil.cpu_count(logical=True) or 0,
        "python": platform.python_version(),
        "onnxruntime": report.ort_version,
        "onnxruntime_genai": _distribution_version(
            "onnxruntime-genai", "onnxruntime-genai-directml", "onnxruntime-genai-winml"
        ),
        "devices": [{"type": d.type.value, "ep": d.ep, "usable": d.usable, "reason": d.reason} for d in report.devices],
    }


def _unavailable_reason(report: DiscoveryReport, device: DeviceType) -> str:
    # Every EP that could drive this device type says why it cannot (QNN, OpenVINO, VitisAI for an NPU).
    reasons = [f"{d.short_ep}: {d.reason}" for d in report.devices if d.type == device and d.reason]
    return " ".join(reasons) if reasons else f"No {device.value} on this machine."


def run_benchmark(
    config: BenchConfig,
    *,
    on_progress: BenchProgressCallback | None = None,
    on_result: ResultCallback | None = None,
    cancel: CancelToken | None = None,
    report: DiscoveryReport | None = None,
) -> BenchRun:
    """Measure every model of `config` on every device type of `config`. Raises CancelledError when
    `cancel` is set (between calls); a device that fails becomes a FAILED result and the run goes on."""
    kinds = [(Path(folder), model_kind(folder)) for folder in config.models]
    report = report or discover()
    started_wall, started = time.time(), time.perf_counter()
    reporter = Reporter(len(kinds) * len(config.devices), on_progress)
    results: list[DeviceResult] = []
    for folder, kind in kinds:
        for device in config.devices:
            check_cancel(cancel)
            name = folder.name
            reporter.start_job(f"{name} on the {device.value}")
            usable = HEALTH.apply(report).usable(device)  # a device that failed earlier is not measured
            if not usable:
                reason = _unavailable_reason(HEALTH.apply(report), device)
                result = DeviceResult(name, kind, device.value, UNAVAILABLE, reason)
            else:
                ep = usable[0].ep
                from engines.bench.chat_run import bench_chat

                measure = _bench_vision if kind == VISION else bench_chat
                try:
                    result = measure(DeviceJob(folder, device, ep, config, report, reporter, cancel))
                except CancelledError:
                    raise
                except Exception as exc:
                    error = note_failure(exc, ep).error  # marks a failed device unusable for the run
                    log.warning("benchmark of %s on %s failed: %s", name, device.value, error.user_text())
                    result = DeviceResult(name, kind, device.value, FAILED, error.user_text(), ep=ep)
                finally:
                    gc.collect()  # the sessions of this device go before the next one loads
            reporter.update(1.0, detail="done")
            results.append(result)
            if on_result is not None:
                on_result(result)
    return BenchRun(
        run_id=time.strftime("%Y%m%d-%H%M%S", time.localtime(started_wall)) + "-" + uuid.uuid4().hex[:6],
        started=started_wall,
        seconds=time.perf_counter() - started,
        machine=machine_info(report),
        settings=config.as_dict(),
        results=tuple(results),
    )


# --------------------------------------------------------------------------------------------
# Vision
# --------------------------------------------------------------------------------------------


@dataclass
class _VisionTimes:
    engine_ms: list[float]
    raw_ms: list[float]
    batch: int
    batch_s: list[float]
    resources: Resources | None
    placement: Placement
    notes: list[str]


def _bench_vision(job: DeviceJob) -> DeviceResult:
    folder, device, ep, config, reporter, cancel = job.folder, job.device, job.ep, job.config, job.reporter, job.cancel
    from engines.api import open_classifier
    from engines.runtime.compiled_cache import CompiledModelCache

    choice = DeviceChoice(ep=ep)

    def open_on_device(cache: CompiledModelCache) -> Any:
        # The model as given (no variant swap): the bench compares one model across devices.
        return open_classifier(folder, choice, cache=cache, threads=config.threads, warmup=False, report=job.report)

    # A fresh cache: the first session pays the whole first-run cost (compiling, where the EP compiles),
    # the second loads what the first stored, whatever the user's own cache holds.
    with tempfile.TemporaryDirectory(prefix="npu-studio-bench-", ignore_cleanup_errors=True) as tmp:
        cache = CompiledModelCache(tmp)
        reporter.update(0.02, detail="creating the session (first)")
        first = open_on_device(cache)
        first_s, first_status = first.create_seconds, first.cache.status if first.cache else ""
        del first
        gc.collect()
        check_cancel(cancel)
        reporter.update(0.08, detail="creating the session (cached)")
        opened = open_on_device(cache)
        sessions = SessionTimes(
            first_s,
            opened.create_seconds,
            first_status,
            opened.cache.status if opened.cache else "",
            _session_note(ep, first_status),
        )
        # One piece of work through the one fallback path: a device failing mid-measurement is marked
        # unusable for the run and becomes this device's FAILED result (see run_benchmark).
        measured = opened.run(lambda engine: _measure_classifier(engine, config, reporter, cancel))
        del opened
        gc.collect()  # the session goes before its compiled model's folder does
    engine = LatencyStats.of(measured.engine_ms)
    raw = LatencyStats.of(measured.raw_ms) if measured.raw_ms else None
    overhead_ms, ratio = paired_overhead(measured.engine_ms, measured.raw_ms) if raw is not None else (None, None)
    placement = measured.placement
    return DeviceResult(
        **measured_on(folder, VISION, device, ep, placement),
        sessions=sessions,
        latency_unit="ms per image",
        latency=engine,
        samples_ms=tuple(measured.engine_ms),
        raw_latency=raw,
        overhead_ms=overhead_ms,
        overhead_ratio=ratio,
        throughput_unit="images/s",
        throughput_batch1=throughput(len(measured.engine_ms), sum(measured.engine_ms) / 1000),
        throughput_batch_n=(
            throughput(measured.batch * len(measured.batch_s), sum(measured.batch_s)) if measured.batch_s else None
        ),
        batch=measured.batch,
        resources=measured.resources,
        notes=tuple(measured.notes),
    )


def _measure_classifier(
    classifier: Any,
    config: BenchConfig,
    reporter: Reporter,
    cancel: CancelToken | None,
) -> _VisionTimes:
    """Warm up, then time the engine against raw session.run (alternately), then batch N."""
    import numpy as np

    spec = classifier.spec
    session = classifier.session
    contract = classifier.contract
    notes: list[str] = []
    h, w = spec.preprocess.input_size
    shape = (3, h, w) if spec.preprocess.layout == "NCHW" else (h, w, 3)
    rng = np.random.default_rng(0)
    x1 = rng.standard_normal((1, *shape)).astype(contract.dtype)
    batch = config.batch if contract.fixed_batch is None else 1
    if batch != config.batch:
        notes.append(f"The model has a fixed batch of {contract.fixed_batch}; batch {config.batch} was not run.")
    xn = rng.standard_normal((batch, *shape)).astype(contract.dtype)

    # The engine's inference call (input contract, IOBinding where it pays) against session.run: softmax
    # and top-5 are CPU work a raw caller does as well, and would blur the device comparison.
    def engine_call() -> object:
        return classifier.infer(x1)

    def engine_batch() -> object:
        return classifier.infer(xn)

    def raw_call() -> object:
        return session.run([contract.output_name], {contract.input_name: x1})[0]

    reporter.update(0.15, detail="warming up")
    for _ in range(config.warmup):
        check_cancel(cancel)
        engine_call()
        raw_call()
    if config.warmup and batch > 1:
        engine_batch()
    calls: dict[str, Callable[[], object]] = {"engine": engine_call}
    if config.compare_raw:
        calls["raw"] = raw_call
    batch_calls = max(3, -(-config.runs // (2 * batch))) if batch > 1 else 0
    total_steps = config.runs + batch_calls

    def step(done: int) -> None:
        reporter.update(0.2 + 0.8 * done / total_steps, detail=f"measuring {done}/{config.runs}")

    with ResourceMeter() as meter:
        times = interleave(calls, config.runs, cancel=cancel, on_step=step)
        batch_s: list[float] = []
        for i in range(batch_calls):
            check_cancel(cancel)
            started = time.perf_counter()
            engine_batch()
            batch_s.append(time.perf_counter() - started)
            reporter.update(0.2 + 0.8 * (config.runs + i + 1) / total_steps, detail=f"batch {batch}")
    if config.compare_raw:
        notes.append(
            "Overhead: ImageClassifier.infer against session.run on the same InferenceSession, called "
            "alternately; the median of the paired differences. Softmax and top-5 are not timed on either side."
        )
    if classifier.io_binding:
        notes.append("The engine uses IOBinding on this device; the raw calls use plain session.run.")
    return _VisionTimes(
        times["engine"], times.get("raw", []), batch, batch_s, meter.result, classifier.placement, notes
    )


def _session_note(ep: str, first_status: str) -> str:
    if ep == CPU_EP:
        return (
            "The CPU runs the ONNX model directly: there is nothing to compile or cache, so both numbers are "
            "plain session creations (the second one finds the model file in the OS file cache)."
        )
    if first_status in {"miss", "rebuilt"}:
        return f"First: {short_ep_name(ep)} compiled the model; cached: loaded the compiled model from the cache."
    if first_status == "not-needed":
        return f"{short_ep_name(ep)} runs the ONNX model directly: there is nothing to compile or cache."
    return ""
