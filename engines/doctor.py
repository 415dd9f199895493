"""`npu-studio doctor`: what this machine really runs, checked step by step, for a bug report.

Versions (ONNX Runtime and its build, EP plugins, the QNN SDK, onnxruntime-genai, drivers as ONNX
Runtime reports them), every device with the reason it is unusable, then on each usable device: a
strict session on a tiny generated model (its output checked against numpy), the demo classifier
(first and cached session creation, warm-up, latency, top-1 on the sample photos) and a few chat
tokens. Devices that are not there are reported as unavailable with the reason; nothing is skipped
silently and no failure stops the run. The result is a readable text report, JSON, and a zip with
both plus the recent logs, the settings and the versions, every text redacted by the caller's
Redactor (engines/redaction.py, app/diagnostics.py).

The chat check goes through `ChatProbe` (default: `chat_probe`, over engines.chat.conversation) so the caller can
replace or leave it out.
"""

from __future__ import annotations

import base64
import importlib.metadata
import logging
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engines import runtime
from engines.doctor_report import DoctorReport, Step
from engines.runtime.compiled_cache import CompiledModelCache, needs_cache, qnn_sdk_version
from engines.runtime.devices import DiscoveryReport, discover
from engines.runtime.failures import diagnose
from engines.types import CPU_EP, Device, DeviceChoice, Policy, short_ep_name

log = logging.getLogger(__name__)


PACKAGES = (
    "onnxruntime",
    "onnxruntime-qnn",
    "onnxruntime-directml",
    "onnxruntime-windowsml",
    "onnxruntime-genai",
    "onnxruntime-genai-directml",
    "onnxruntime-genai-winml",
    "windowsml",
    "onnxruntime-ep-openvino",
    "numpy",
    "pillow",
    "PySide6-Essentials",
    "npu-studio",
)
CHAT_PROMPT = "What is the capital of France?"

# A 4-node probe model (Conv 3->8 3x3, Relu, GlobalAveragePool, Flatten; input 1x3x16x16, output 1x8),
# made with onnx.helper (see tests/unit/test_doctor.py, which rebuilds it and compares). Embedded so
# that the doctor needs no `onnx` package on a user's machine.
PROBE_MODEL = base64.b64decode(
    "CAgSCm5wdS1zdHVkaW86vwgKJQoBeAoBdwoBYhIBYyIEQ29udioRCgRwYWRzQAFAAUABQAGgAQcKDAoBYxIBciIEUmVsdQoZCgFy"
    "EgFwIhFHbG9iYWxBdmVyYWdlUG9vbAoPCgFwEgF5IgdGbGF0dGVuEgxkb2N0b3ItcHJvYmUq8AYICAgDCAMIAxABQgF3SuAGAAAA"
    "v83MTD7NzEy+AAAAP83MzD2amZm+zczMPgAAAADNzMy+mpmZPs3MzL0AAAC/zcxMPs3MTL4AAAA/zczMPZqZmb7NzMw+AAAAAM3M"
    "zL6amZk+zczMvQAAAL/NzEw+zcxMvgAAAD/NzMw9mpmZvs3MzD4AAAAAzczMvpqZmT7NzMy9AAAAv83MTD7NzEy+AAAAP83MzD2a"
    "mZm+zczMPgAAAADNzMy+mpmZPs3MzL0AAAC/zcxMPs3MTL4AAAA/zczMPZqZmb7NzMw+AAAAAM3MzL6amZk+zczMvQAAAL/NzEw+"
    "zcxMvgAAAD/NzMw9mpmZvs3MzD4AAAAAzczMvpqZmT7NzMy9AAAAv83MTD7NzEy+AAAAP83MzD2amZm+zczMPgAAAADNzMy+mpmZ"
    "Ps3MzL0AAAC/zcxMPs3MTL4AAAA/zczMPZqZmb7NzMw+AAAAAM3MzL6amZk+zczMvQAAAL/NzEw+zcxMvgAAAD/NzMw9mpmZvs3M"
    "zD4AAAAAzczMvpqZmT7NzMy9AAAAv83MTD7NzEy+AAAAP83MzD2amZm+zczMPgAAAADNzMy+mpmZPs3MzL0AAAC/zcxMPs3MTL4A"
    "AAA/zczMPZqZmb7NzMw+AAAAAM3MzL6amZk+zczMvQAAAL/NzEw+zcxMvgAAAD/NzMw9mpmZvs3MzD4AAAAAzczMvpqZmT7NzMy9"
    "AAAAv83MTD7NzEy+AAAAP83MzD2amZm+zczMPgAAAADNzMy+mpmZPs3MzL0AAAC/zcxMPs3MTL4AAAA/zczMPZqZmb7NzMw+AAAA"
    "AM3MzL6amZk+zczMvQAAAL/NzEw+zcxMvgAAAD/NzMw9mpmZvs3MzD4AAAAAzczMvpqZmT7NzMy9AAAAv83MTD7NzEy+AAAAP83M"
    "zD2amZm+zczMPgAAAADNzMy+mpmZPs3MzL0AAAC/zcxMPs3MTL4AAAA/zczMPZqZmb7NzMw+AAAAAM3MzL6amZk+zczMvQAAAL/N"
    "zEw+zcxMvgAAAD/NzMw9mpmZvs3MzD4AAAAAzczMvpqZmT7NzMy9AAAAv83MTD7NzEy+AAAAP83MzD2amZm+zczMPgAAAADNzMy+"
    "mpmZPs3MzL0AAAC/zcxMPs3MTL4AAAA/zczMPZqZmb7NzMw+KikICBABQgFiSiDNzEy+mpkZvs3MzL3NzEy9AAAAAM3MTD3NzMw9"
    "mpkZPlobCgF4EhYKFAgBEhAKAggBCgIIAwoCCBAKAggQYhMKAXkSDgoMCAESCAoCCAEKAggIQgQKABAR"
)
PROBE_INPUT_SHAPE = (1, 3, 16, 16)


def probe_input() -> np.ndarray:
    return (np.linspace(-1.0, 1.0, int(np.prod(PROBE_INPUT_SHAPE)), dtype=np.float32)).reshape(PROBE_INPUT_SHAPE)


def probe_reference(x: np.ndarray) -> np.ndarray:
    """What the probe model computes, in numpy (the probe's answer must match it on every device)."""
    w = ((np.arange(8 * 3 * 3 * 3) * 7 % 11) - 5).astype(np.float32).reshape(8, 3, 3, 3) / 10
    b = (np.arange(8) - 4).astype(np.float32) / 20
    padded = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # 3, 16, 16, 3, 3
    conv = np.einsum("chwij,ocij->ohw", windows, w) + b[:, None, None]
    return np.maximum(conv, 0).mean(axis=(1, 2))[None].astype(np.float32)


ChatProbe = Callable[[Path, DeviceChoice, int], Step]
Progress = Callable[[str], None]


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


# Distributions that each install a whole ONNX Runtime as the `onnxruntime` package.
ORT_DISTRIBUTIONS = (
    "onnxruntime", "onnxruntime-windowsml", "onnxruntime-directml", "onnxruntime-gpu", "onnxruntime-openvino",
)


def ort_distributions() -> list[str]:
    """The installed distributions that write `onnxruntime/` (exactly one in a sound install)."""
    return [f"{name} {version}" for name in ORT_DISTRIBUTIONS if (version := _package_version(name))]


def collect_versions(report: DiscoveryReport) -> dict[str, Any]:
    ort = runtime.ort()
    build = ""
    getter = getattr(ort, "get_build_info", None)
    if callable(getter):
        try:
            build = str(getter())
        except Exception as exc:  # informative only
            build = f"unavailable ({exc})"
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "onnxruntime": runtime.version(),
        "onnxruntime_build": build,
        "packages": {name: _package_version(name) for name in PACKAGES},
        "onnxruntime_distributions": ort_distributions(),
        "windows_ml": report.catalog.as_dict(),
        "qnn_sdk": qnn_sdk_version(runtime.qnn_plugin()),
        "drivers": {
            f"{d.type.value} {d.ep}": d.driver_version for d in report.devices if d.driver_version
        },
        "ep_versions": {d.ep: d.ep_version for d in report.devices if d.ep_version},
    }


def _failed(check: str, ep: str, exc: BaseException, started: float) -> Step:
    found = diagnose(exc, ep)
    details: dict[str, Any] = {"error": found.error.message, "hint": found.error.hint, "code": found.code}
    if found.native:
        details["native"] = found.native[:2000]
    log.warning("doctor: %s on %s failed: %s", check, ep, found.native or found.error.message)
    return Step(check, ep, "failed", found.error.user_text(), time.perf_counter() - started, details)


def strict_probe(ep: str, cache: CompiledModelCache | None, workdir: Path) -> Step:
    """A strict session on `ep` with the probe model, its output compared with numpy."""
    from engines.runtime.sessions import create_session

    started = time.perf_counter()
    model = workdir / "probe.onnx"
    if not model.exists():
        model.write_bytes(PROBE_MODEL)
    choice = DeviceChoice(policy=Policy.CPU_ONLY) if ep == CPU_EP else DeviceChoice(ep=ep, strict=True)
    try:
        verified = create_session(model, choice, cache=cache)
        x = probe_input()
        run_started = time.perf_counter()
        y = np.asarray(verified.session.run(None, {"x": x})[0])
        run_ms = (time.perf_counter() - run_started) * 1000
    except Exception as exc:
        return _failed("strict session", ep, exc, started)
    expected = probe_reference(x)
    diff = float(np.max(np.abs(y - expected))) if y.shape == expected.shape else float("inf")
    tolerance = 1e-4 if ep == CPU_EP else 2e-2  # the NPU may run in fp16
    details: dict[str, Any] = {
        "placement": verified.placement.as_dict(),
        "create_ms": round(verified.create_seconds * 1000, 2),
        "run_ms": round(run_ms, 3),
        "max_abs_diff": diff,
    }
    if verified.cache is not None:
        details["compiled_cache"] = verified.cache.as_dict()
    if diff > tolerance:
        summary = f"ran on {verified.placement.badge()} but the output is wrong (max diff {diff:.3g})"
        return Step("strict session", ep, "failed", summary, time.perf_counter() - started, details)
    summary = (
        f"{verified.placement.badge()}; created in {verified.create_seconds * 1000:.0f} ms, ran in {run_ms:.2f} ms, "
        f"output matches (max diff {diff:.1e})"
    )
    return Step("strict session", ep, "ok", summary, time.perf_counter() - started, details)


def classifier_check(
    folder: Path, ep: str, samples: Sequence[Path], cache: CompiledModelCache | None, runs: int = 20
) -> Step:
    """The demo classifier on `ep` (its QDQ variant for the NPU when there is one), opened through the
    public API as every caller opens it (the safety check comes first): first and cached session
    creation, warm-up, median latency, and top-1 on the sample photos."""
    from engines.api import open_classifier

    started = time.perf_counter()
    choice = DeviceChoice(policy=Policy.CPU_ONLY) if ep == CPU_EP else DeviceChoice(ep=ep)
    try:
        first = open_classifier(folder, choice, cache=cache, library=[folder.parent])
        chosen = first.model_folder
        details: dict[str, Any] = {
            "model": chosen.name,
            "placement": first.placement.as_dict(),
            "first_create_s": round(first.create_seconds, 4),
        }
        if first.cache is not None:
            details["compiled_cache_first"] = first.cache.as_dict()
        if cache is not None and needs_cache(ep):
            again = open_classifier(folder, choice, cache=cache, library=[folder.parent], warmup=False)
            details["cached_create_s"] = round(again.create_seconds, 4)
            if again.cache is not None:
                details["compiled_cache_again"] = again.cache.as_dict()
        engine = first.engine
        details["warmup_ms"] = round(engine.warmup_ms, 2)
        top1 = {}
        for photo in samples:
            result = first.classify(photo, k=1)
            top1[photo.name] = {"label": result.top[0].label, "p": round(result.top[0].probability, 4)}
        latencies = []
        if samples:
            from engines.vision.images import preprocess

            tensor = preprocess(samples[0], engine.spec.preprocess)[None]
            for _ in range(max(1, runs)):
                t = time.perf_counter()
                engine.infer(tensor)
                latencies.append((time.perf_counter() - t) * 1000)
    except Exception as exc:
        return _failed("classifier", ep, exc, started)
    median = statistics.median(latencies) if latencies else 0.0
    details.update({"top1": top1, "median_ms": round(median, 3), "runs": len(latencies)})
    status = "fell back" if first.placement.fell_back else "ok"
    parts = [
        f"{chosen.name} on {first.placement.badge()}",
        f"session {first.create_seconds:.2f} s"
        + (f" (cached: {details['cached_create_s']:.2f} s)" if "cached_create_s" in details else ""),
        f"median {median:.1f} ms",
    ]
    if "coffee.png" in top1:
        parts.append(f"coffee.png -> {top1['coffee.png']['label']} ({top1['coffee.png']['p']:.0%})")
    return Step("classifier", ep, status, "; ".join(parts), time.perf_counter() - started, details)


def chat_probe(folder: Path, choice: DeviceChoice, tokens: int) -> Step:
    """A few chat tokens through the chat service on the chosen device (load time, first token, tokens/s)."""
    from engines.api import open_chat
    from engines.chat.requests import ChatRequest
    from engines.chat.types import ChatOptions

    ep = choice.ep or CPU_EP
    started = time.perf_counter()
    try:
        service = open_chat(folder, choice)
        load_s = time.perf_counter() - started
        try:
            request = ChatRequest.send([], CHAT_PROMPT, system_prompt="You are a helpful assistant.",
                                       options=ChatOptions(max_new_tokens=tokens))  # fmt: skip
            done = service.generate(request)
        finally:
            service.close()
    except Exception as exc:
        return _failed("chat", ep, exc, started)
    stats = done.stats
    answer = done.text.strip()
    details = {
        "model": folder.name,
        "load_s": round(load_s, 3),
        "prompt": CHAT_PROMPT,
        "answer": answer,
        "stats": stats.as_dict(),
    }
    status = "fell back" if stats.fell_back else "ok"
    where = service.info.description.split(" on ", 1)[-1]
    summary = f"{folder.name} on {where}: loaded in {load_s:.1f} s; {stats.summary()}"
    if answer:
        summary += f'; "{answer[:60]}"'
    return Step("chat", ep, status, summary, time.perf_counter() - started, details)


def _unavailable(device: Device) -> Step:
    return Step("device", device.ep, "unavailable", device.reason or "not available on this machine")


def run_doctor(
    *,
    classifier: Path | None,
    chat_model: Path | None,
    samples: Sequence[Path] = (),
    cache_dir: Path | None = None,
    chat: ChatProbe | None = chat_probe,
    chat_tokens: int = 8,
    runs: int = 20,
    on_progress: Progress | None = None,
) -> DoctorReport:
    """Run every check; never raises for a failing device (failures are steps)."""
    say = on_progress or (lambda text: None)
    started = time.perf_counter()
    created = time.strftime("%Y-%m-%d %H:%M:%S %z")
    say("Looking for devices…")
    report = discover()
    versions = collect_versions(report)
    steps: list[Step] = []
    cache = CompiledModelCache(cache_dir) if cache_dir is not None else None
    if cache is not None:
        versions["compiled_cache"] = {
            "folder": str(cache.root),
            "entries": [e.as_dict() for e in cache.entries()],
            "bytes": cache.total_bytes(),
        }
    seen: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="npu-studio-doctor-") as tmp:
        for device in report.devices:
            if device.ep in seen:
                continue
            seen.add(device.ep)
            if not device.usable:
                steps.append(_unavailable(device))
                continue
            name = short_ep_name(device.ep)
            say(f"{name}: strict session on a tiny model…")
            steps.append(strict_probe(device.ep, cache, Path(tmp)))
            if classifier is None:
                steps.append(Step("classifier", device.ep, "skipped", "the demo classifier is not installed"))
            else:
                say(f"{name}: demo classifier…")
                steps.append(classifier_check(classifier, device.ep, samples, cache, runs))
            if chat is None:
                steps.append(Step("chat", device.ep, "skipped", "chat check turned off"))
            elif chat_model is None:
                steps.append(Step("chat", device.ep, "skipped", "the demo chat model is not installed"))
            else:
                say(f"{name}: a few chat tokens…")
                choice = DeviceChoice(policy=Policy.CPU_ONLY) if device.ep == CPU_EP else DeviceChoice(ep=device.ep)
                try:
                    steps.append(chat(chat_model, choice, chat_tokens))
                except Exception as exc:  # a probe must not stop the doctor
                    steps.append(_failed("chat", device.ep, exc, time.perf_counter()))
    return DoctorReport(created, versions, report, steps, time.perf_counter() - started)
