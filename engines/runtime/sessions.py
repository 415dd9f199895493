"""The verified session factory.

The model file is checked first (engines/models/safety.py: external data inside its folder, no custom
operator libraries, the declared size) so that no caller can hand native code an unchecked file. A
DeviceChoice becomes a device (the one planner, engines/runtime/planning.py), then a plan (explicit
devices or a provider list), then SessionOptions, then an InferenceSession, then a verification of
what really runs where: `get_providers()` and the per-node EP assignment. The result is a Placement
that says in plain words when the session degraded; strict mode turns any degradation into a PlacementError.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines import runtime
from engines.errors import ModelError, PlacementError
from engines.models.safety import inspect_onnx
from engines.runtime import cached_load, compiled_cache, failures
from engines.runtime.compiled_cache import CacheOutcome, CompiledModelCache, StatusCallback
from engines.runtime.devices import DiscoveryReport, discover_for
from engines.runtime.planning import DeviceSet, plan_device
from engines.runtime.registration import DML_EP, QNN_EP, qnn_backend_path
from engines.types import CPU_EP, DeviceChoice, DeviceType, Placement, check_thread_count, short_ep_name

log = logging.getLogger(__name__)

_OPT_LEVELS = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


@dataclass(frozen=True)
class SessionSettings:
    """Per-environment session settings."""

    intra_op_threads: int = 0  # 0: ONNX Runtime's default (one per physical core)
    graph_optimization: str = "all"
    quantized_model: bool = False  # QDQ models run as-is on the NPU; float ones ask QNN for fp16
    htp_performance_mode: str = "burst"
    config_entries: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_thread_count(self.intra_op_threads)


@dataclass
class Plan:
    """How the session will be asked for."""

    mode: str  # "devices" | "providers"
    target_eps: tuple[str, ...]  # EPs expected to run the graph (empty: ORT decides)
    providers: list[Any] = field(default_factory=list)  # providers mode: names or (name, options)
    ep_devices: list[Any] = field(default_factory=list)  # devices mode: OrtEpDevice objects
    ep_options: dict[str, str] = field(default_factory=dict)
    fallback_reason: str = ""  # already degraded before creation (requested device missing)
    disable_cpu_fallback: bool = False


@dataclass
class VerifiedSession:
    session: Any
    placement: Placement
    create_seconds: float
    model_path: Path
    plan: Plan
    cache: CacheOutcome | None = None  # set when create_session was given a compiled-model cache


def default_ep_options(ep: str, settings: SessionSettings) -> dict[str, str]:
    """Provider options that matter for each EP (the user's options override these)."""
    if ep == QNN_EP:
        options = {"htp_performance_mode": settings.htp_performance_mode}
        # the catalog EP's own QnnHtp.dll when QNN came from Windows ML, else the bundled plugin's
        options["backend_path"] = qnn_backend_path()
        if not settings.quantized_model:
            options["enable_htp_fp16_precision"] = "1"
        return options
    if ep == DML_EP:
        return {"device_id": "0"}
    return {}


def _raw_ep_devices(ep: str | None = None, device_type: DeviceType | None = None) -> list[Any]:
    ort = runtime.ort()
    get = getattr(ort, "get_ep_devices", None)
    if get is None:
        return []
    found = []
    for d in get():
        if ep is not None and d.ep_name != ep:
            continue
        if device_type is not None and str(d.device.type).rsplit(".", 1)[-1].upper() != device_type.value:
            continue
        found.append(d)
    return found


def _plan_for_ep(ep: str, choice: DeviceChoice, settings: SessionSettings, report: DiscoveryReport) -> Plan:
    """How ONNX Runtime is asked for one usable, non-CPU EP: its devices where the build lists them
    (plugin and Windows ML EPs), else the provider list (EPs compiled into the build)."""
    options = {**default_ep_options(ep, settings), **choice.options}
    devices = _raw_ep_devices(ep=ep)
    if devices:
        return Plan("devices", (ep,), ep_devices=devices, ep_options=options, disable_cpu_fallback=choice.strict)
    providers: list[Any] = [(ep, options)]
    if not choice.strict:
        providers.append(CPU_EP)
    return Plan("providers", (ep,), providers=providers, disable_cpu_fallback=choice.strict)


def plan_session(choice: DeviceChoice, settings: SessionSettings, report: DiscoveryReport) -> Plan:
    """Turn what the user asked for into how ONNX Runtime will be asked (the device from the one planner,
    engines/runtime/planning.py). Raises in strict mode when the device is not there at all."""
    device = plan_device(choice, DeviceSet.from_devices(report.devices))
    if device.ep == CPU_EP:
        return Plan("providers", (CPU_EP,), providers=[CPU_EP], fallback_reason=device.reason)
    return _plan_for_ep(device.ep, choice, settings, report)


def build_session_options(plan: Plan, settings: SessionSettings) -> Any:
    ort = runtime.ort()
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _OPT_LEVELS[settings.graph_optimization])
    if settings.intra_op_threads:
        so.intra_op_num_threads = settings.intra_op_threads
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if DML_EP in plan.target_eps:
        # DirectML does not support memory patterns or parallel execution.
        so.enable_mem_pattern = False
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if plan.disable_cpu_fallback:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    for key, value in settings.config_entries:
        so.add_session_config_entry(key, value)
    if plan.mode == "devices":
        so.add_provider_for_devices(plan.ep_devices, plan.ep_options)
    return so


def nodes_per_ep(session: Any) -> tuple[tuple[str, int], ...]:
    getter = getattr(session, "get_provider_graph_assignment_info", None)
    if getter is None:
        return ()
    try:
        counts: Counter[str] = Counter()
        for subgraph in getter():
            counts[str(subgraph.ep_name)] += len(subgraph.get_nodes())
        return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    except Exception as exc:  # older builds: placement from get_providers() only
        log.debug("no graph assignment info: %s", exc)
        return ()


def cpu_node_ops(session: Any, limit: int = 5) -> list[str]:
    """Operator types that ended up on the CPU (to explain a partial fallback)."""
    getter = getattr(session, "get_provider_graph_assignment_info", None)
    ops: Counter[str] = Counter()
    try:
        for subgraph in getter() if getter else ():
            if subgraph.ep_name == CPU_EP:
                ops.update(node.op_type for node in subgraph.get_nodes())
    except Exception:
        return []
    return [op for op, _ in ops.most_common(limit)]


def verify(session: Any, plan: Plan, choice: DeviceChoice) -> Placement:
    """What really runs where, and a plain-language reason whenever it is not what was asked."""
    active = tuple(str(p) for p in session.get_providers())
    counts = nodes_per_ep(session)
    by_ep = dict(counts)
    fell_back = bool(plan.fallback_reason)
    reason = plan.fallback_reason
    accelerated = [ep for ep in plan.target_eps if ep != CPU_EP]
    if not fell_back and accelerated:
        target = accelerated[0]
        name = short_ep_name(target)
        if target not in active or (counts and by_ep.get(target, 0) == 0):
            fell_back = True
            reason = f"{name} was requested, but ONNX Runtime ran every node on {_others(active, target)}."
        elif by_ep.get(CPU_EP, 0):
            fell_back = True
            total = sum(by_ep.values())
            ops = ", ".join(cpu_node_ops(session))
            reason = f"{name} ran {by_ep[target]} of {total} nodes; {by_ep[CPU_EP]} ran on the CPU" + (
                f" (operators {ops} are not supported there)." if ops else "."
            )
    return Placement(
        requested=choice.describe(),
        requested_eps=plan.target_eps,
        active_eps=active,
        nodes_per_ep=counts,
        fell_back=fell_back,
        reason=reason,
        wanted_type=choice.wanted_type,
        policy=choice.policy.value,
    )


def _others(active: tuple[str, ...], target: str) -> str:
    rest = [short_ep_name(ep) for ep in active if ep != target]
    return " and ".join(rest) if rest else "another device"


def check_model_file(model_path: Path) -> None:
    if not model_path.exists():
        raise ModelError(f"Model file not found: {model_path}", "Build the demo models or import the model again.")
    if not model_path.is_file():
        raise ModelError(f"Not a model file: {model_path}", "Point to the .onnx file inside the model folder.")
    if model_path.stat().st_size == 0:
        raise ModelError(f"The model file is empty: {model_path}", "Rebuild or re-import the model.")


def create_session(
    model_path: str | os.PathLike[str],
    choice: DeviceChoice,
    settings: SessionSettings | None = None,
    report: DiscoveryReport | None = None,
    *,
    cache: CompiledModelCache | None = None,
    on_progress: StatusCallback | None = None,
    declared_bytes: int | None = None,
) -> VerifiedSession:
    """Create an InferenceSession for `choice` and verify where it runs.

    With `cache`, EPs that compile (QNN) load a compiled context model from it, compiling and storing
    it on the first load (`on_progress` hears about that); `VerifiedSession.cache` says what happened.

    `declared_bytes` is the model file's size in its manifest (a larger file is refused).

    Raises DeviceUnavailableError (strict, device missing), PlacementError (strict, the device did not
    take the whole graph), ModelError or SessionCreationError (native failures, explained).
    """
    path = Path(model_path)
    settings = settings or SessionSettings()
    check_model_file(path)
    inspect_onnx(path, declared_bytes)  # before any native code sees the file (raises ModelError)
    from engines.runtime.fallback import HEALTH  # devices that failed earlier in this run are not planned again

    HEALTH.check(choice)
    report = HEALTH.apply(report or discover_for(choice))
    plan = plan_session(choice, settings, report)
    so = build_session_options(plan, settings)
    target = plan.target_eps[0] if plan.target_eps else ""
    outcome: CacheOutcome | None = None
    started = time.perf_counter()
    try:
        if cache is None:
            session = _open_session(path, plan, settings, so)
        else:
            session, outcome = _open_through_cache(cache, path, plan, settings, report, so, on_progress)
    except Exception as exc:
        err = failures.explain(exc, target)
        if plan.disable_cpu_fallback and "explicitly disabled" in str(exc):
            raise PlacementError(err.message, err.hint) from exc
        raise err from exc
    elapsed = time.perf_counter() - started
    placement = verify(session, plan, choice)
    log.info("session %s on %s in %.2fs: %s", path.name, choice.describe(), elapsed, placement.badge())
    if outcome is not None:
        log.info("compiled-model cache: %s", outcome.summary())
    if choice.strict and placement.fell_back:
        raise PlacementError(
            f"Strict mode: {placement.reason}",
            "Turn strict mode off to allow the fallback, or choose the device that ran it.",
        )
    return VerifiedSession(session, placement, elapsed, path, plan, cache=outcome)


def _open_session(path: Path, plan: Plan, settings: SessionSettings, so: Any = None) -> Any:
    ort = runtime.ort()
    so = so if so is not None else build_session_options(plan, settings)
    if plan.mode == "providers":
        return ort.InferenceSession(str(path), sess_options=so, providers=plan.providers)
    return ort.InferenceSession(str(path), sess_options=so)


def cache_target_ep(plan: Plan) -> str:
    """The EP whose compiled model the cache would hold ("" when ONNX Runtime picks the device)."""
    accelerated = [ep for ep in plan.target_eps if ep != CPU_EP]
    return accelerated[0] if accelerated else (CPU_EP if plan.target_eps else "")


def _plan_options(plan: Plan, ep: str) -> dict[str, str]:
    if plan.mode == "devices":
        return dict(plan.ep_options)
    for provider in plan.providers:
        if isinstance(provider, tuple) and provider[0] == ep:
            return {str(k): str(v) for k, v in dict(provider[1]).items()}
    return {}


def compile_context_model(source: Path, out: Path, plan: Plan, settings: SessionSettings) -> None:
    """Write an EPContext model for the plan's device to `out` (ModelCompiler where the build has it,
    else the `ep.context_*` session config entries)."""
    ort = runtime.ort()
    so = build_session_options(plan, settings)
    compiler = getattr(ort, "ModelCompiler", None)
    if compiler is not None:
        if plan.mode == "providers":
            for provider in plan.providers:
                if isinstance(provider, tuple) and provider[0] != CPU_EP:
                    so.add_provider(provider[0], dict(provider[1]))
        flags = getattr(getattr(ort, "OrtCompileApiFlags", None), "ERROR_IF_NO_NODES_COMPILED", 0)
        compiler(so, str(source), embed_compiled_data_into_model=False, flags=flags).compile_to_file(str(out))
        return
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_file_path", str(out))
    so.add_session_config_entry("ep.context_embed_mode", "0")
    _open_session(source, plan, settings, so)


def _open_through_cache(
    cache: CompiledModelCache,
    path: Path,
    plan: Plan,
    settings: SessionSettings,
    report: DiscoveryReport,
    so: Any,
    on_progress: StatusCallback | None,
) -> tuple[Any, CacheOutcome]:
    ep = cache_target_ep(plan)
    if not compiled_cache.needs_cache(ep):
        started = time.perf_counter()
        session = _open_session(path, plan, settings, so)
        note = f"{short_ep_name(ep)} runs the ONNX model directly; there is nothing to compile or cache."
        outcome = CacheOutcome("not-needed", ep=ep, notices=[note])
        outcome.load_seconds = time.perf_counter() - started
        return session, outcome
    ep_version, driver = compiled_cache.ep_version_for(ep, report)
    options = {**_plan_options(plan, ep), "session.graph_optimization": settings.graph_optimization}
    key = cache.key_for(
        path, ep, ep_version=ep_version, ort_version=runtime.version(), driver_version=driver, options=options
    )
    return cached_load.load_through_cache(
        cache,
        key,
        path,
        open_model=lambda model: _open_session(model, plan, settings),
        compile_into=lambda out: compile_context_model(path, out, plan, settings),
        explain=lambda exc: failures.explain(exc, ep).message,
        on_progress=on_progress,
    )
