"""A chat model on a device: which providers to ask onnxruntime-genai for (one planner, shared with the
classifier), and loading a validated folder (engines/chat/folder.py) with them."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Any

from engines.chat import threads
from engines.chat.folder import (
    DML_EP,
    GENAI_CONFIG,
    GENAI_PROVIDER_NAMES,
    QNN_EP,
    ModelFolder,
)
from engines.errors import DeviceUnavailableError, ModelError, StudioError
from engines.runtime import failures
from engines.runtime.planning import DeviceSet, plan_device
from engines.runtime.registration import plugin_library, qnn_backend_path
from engines.types import (
    CPU_EP,
    EP_DEVICE_TYPE,
    DeviceChoice,
    DeviceType,
    Placement,
    Policy,
    physical_cores,
    short_ep_name,
)

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Providers: what to ask onnxruntime-genai for
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderPlan:
    """How the model will be configured: one EP (or the folder's own list), or a CPU fallback."""

    requested: str  # DeviceChoice.describe()
    ep: str  # the EP configured; CPU_EP for the CPU
    from_config: bool = False  # keep the providers written in genai_config.json
    options: tuple[tuple[str, str], ...] = ()
    fell_back: bool = False
    reason: str = ""
    wanted_type: DeviceType | None = None
    asked_eps: tuple[str, ...] = ()  # what was asked for, before any fallback

    def placement(self) -> Placement:
        return Placement(
            requested=self.requested,
            requested_eps=self.asked_eps or (self.ep,),
            active_eps=(self.ep,),
            fell_back=self.fell_back,
            reason=self.reason,
            wanted_type=self.wanted_type,
        )

    def to_cpu(self, reason: str) -> ProviderPlan:
        return ProviderPlan(
            self.requested,
            CPU_EP,
            fell_back=True,
            reason=reason,
            wanted_type=self.wanted_type,
            asked_eps=self.asked_eps or (self.ep,),
        )


def missing_reason(ep: str) -> str:
    """Why this build cannot serve `ep`, in plain words."""
    short = short_ep_name(ep)
    if ep == QNN_EP:
        return (
            "The Qualcomm NPU (QNN) needs Windows on ARM64 (Snapdragon X) with Windows ML's QNN EP or the "
            "bundled onnxruntime-qnn; this build does not have it."
        )
    if ep == DML_EP:
        return "DirectML (GPU) needs the Windows build of NPU Studio (ARM64 or x64); this build does not have it."
    if ep not in GENAI_PROVIDER_NAMES and ep != CPU_EP:
        return f"onnxruntime-genai cannot run chat models on {short}."
    return f"{short} is not part of this build."


def chat_devices(available: frozenset[str] | None = None, choice: DeviceChoice | None = None) -> DeviceSet:
    """The devices onnxruntime-genai can use here: the discovered ones (minus those that failed in this
    run) that genai can drive, or, with `available`, exactly those EPs (tests, tools). The CPU asked for by
    name needs no discovery (genai always has it): ONNX Runtime's Python module is not even imported."""
    if available is None and choice is not None and choice.wanted_type == DeviceType.CPU and not choice.ep_options:
        available = frozenset({CPU_EP})
    if available is None:
        from engines.runtime.devices import discover
        from engines.runtime.fallback import HEALTH

        return DeviceSet.from_devices(HEALTH.apply(discover()).devices, only=GENAI_PROVIDER_NAMES)
    eps = [ep for ep in available if ep in GENAI_PROVIDER_NAMES or ep == CPU_EP]
    reasons: dict[str, str] = {}
    for ep in GENAI_PROVIDER_NAMES:
        if ep not in eps:
            reasons.setdefault(ep, missing_reason(ep))
            kind = EP_DEVICE_TYPE.get(ep)
            if kind is not None:
                reasons.setdefault(kind.value, missing_reason(ep))
    return DeviceSet.of(eps, reasons)  # in the planner's order


def plan_providers(
    folder: ModelFolder, choice: DeviceChoice, devices: DeviceSet | frozenset[str]
) -> ProviderPlan:
    """Turn a DeviceChoice into a ProviderPlan through the one planner (engines/runtime/planning.py).
    Strict: a DeviceUnavailableError when the device is not there; otherwise a plan that falls back to
    the CPU and says why. When the folder's config names the planned EP, its provider options are kept."""
    if choice.ep is not None and choice.ep != CPU_EP and choice.ep not in GENAI_PROVIDER_NAMES:
        reason = missing_reason(choice.ep)
        if choice.strict:
            raise DeviceUnavailableError(
                f"{short_ep_name(choice.ep)} is not available for chat: {reason}",
                "Turn strict mode off to run on the CPU instead, or pick another device.",
            )
        return ProviderPlan(
            choice.describe(),
            CPU_EP,
            fell_back=True,
            reason=reason,
            wanted_type=choice.wanted_type,
            asked_eps=(choice.ep,),
        )
    if not isinstance(devices, DeviceSet):
        devices = chat_devices(frozenset(devices))
    device = plan_device(choice, devices, runtime="chat")
    asked = (device.asked_ep,) if device.asked_ep else ()
    wanted_by_model = [ep for ep in folder.config_providers if ep != CPU_EP]
    if wanted_by_model and device.ep == CPU_EP and not device.fell_back and choice.policy != Policy.CPU_ONLY:
        # The folder was built for a device this machine lacks: say so, as a fallback would.
        first = wanted_by_model[0]
        reason = f"the model asks for {short_ep_name(first)}. {devices.reason(first) or missing_reason(first)}"
        if choice.strict:
            raise DeviceUnavailableError(
                f"{short_ep_name(first)} is not available for chat: {reason}",
                "Turn strict mode off to run on the CPU instead, or pick another device.",
            )
        device = replace(device, fell_back=True, reason=reason, asked_ep=first)
        asked = (first,)
    from_config = device.ep != CPU_EP and device.ep in folder.config_providers and not choice.ep_options
    return ProviderPlan(
        device.requested,
        device.ep,
        from_config=from_config,
        options=choice.ep_options if device.ep != CPU_EP else (),
        fell_back=device.fell_back,
        reason=device.reason,
        wanted_type=choice.wanted_type,
        asked_eps=asked,
    )


# --------------------------------------------------------------------------------------------
# The onnxruntime-genai boundary
# --------------------------------------------------------------------------------------------

_og_override: Any = None
_registered_plugins: dict[str, str] = {}
_plugin_lock = threading.Lock()


def genai(runtime_first: bool = True) -> Any:
    """The onnxruntime_genai module (a test fake when one is installed with `use_fake_genai`).
    `runtime_first=False`: a CPU-only process may leave ONNX Runtime's Python module out (see
    engines.runtime.import_genai)."""
    if _og_override is not None:
        return _og_override
    from engines import runtime

    return runtime.import_genai(runtime_first=runtime_first)


def discover() -> Any:
    """Device discovery in this process (it registers the plugin EPs with ONNX Runtime)."""
    from engines.runtime.devices import discover as run_discovery

    return run_discovery()


def use_fake_genai(module: Any) -> None:
    """Install a fake onnxruntime_genai (tests); `None` restores the real one."""
    global _og_override
    _og_override = module
    with _plugin_lock:
        _registered_plugins.clear()


def genai_is_fake() -> bool:
    """Whether a test fake stands in for onnxruntime_genai (`use_fake_genai`)."""
    return _og_override is not None


def register_plugin_ep(og: Any, ep: str) -> None:
    """Register with onnxruntime-genai the same plugin library ONNX Runtime uses for `ep` (the Windows ML
    catalog's or the bundled one), once per process. Built-in EPs need nothing."""
    library = plugin_library(ep)
    register = getattr(og, "register_execution_provider_library", None)
    if not library or register is None:
        return
    with _plugin_lock:
        if ep in _registered_plugins:
            return
        try:
            register(ep, library)
        except Exception as exc:
            # genai-winml shares the ONNX Runtime of the process, where discovery registered it already
            if "already registered" not in str(exc):
                raise
        _registered_plugins[ep] = library
        log.info("registered %s with onnxruntime-genai from %s", ep, library)


def register_qnn_plugin(og: Any) -> str:
    """Register the QNN plugin EP with onnxruntime-genai; returns the `backend_path` to pass ("" when no
    QNN plugin is installed or registered)."""
    if not plugin_library(QNN_EP):
        return ""
    register_plugin_ep(og, QNN_EP)
    return qnn_backend_path()


def configure(og: Any, folder: ModelFolder, plan: ProviderPlan) -> Any:
    """An og.Config for `folder` with the plan's providers applied."""
    try:
        config = og.Config(str(folder.path))
    except Exception as exc:
        raise ModelError(
            f"onnxruntime-genai cannot read {GENAI_CONFIG}: {_first_line(exc)}",
            "The config does not match this onnxruntime-genai version; rebuild the model folder.",
        ) from exc
    if plan.ep == CPU_EP and not folder.sets_threads:
        overlay = getattr(config, "overlay", None)  # onnxruntime-genai >= 0.6
        if overlay is not None:
            overlay(threads.threads_overlay(physical_cores()))
    uses_qnn = plan.ep == QNN_EP or (plan.from_config and QNN_EP in folder.config_providers)
    backend_path = register_qnn_plugin(og) if uses_qnn else ""
    if plan.ep not in (QNN_EP, CPU_EP):
        register_plugin_ep(og, plan.ep)  # OpenVINO / VitisAI / TensorRT RTX come as plugin libraries
    if plan.from_config:
        if backend_path:
            config.set_provider_option(GENAI_PROVIDER_NAMES[QNN_EP], "backend_path", backend_path)
        return config
    config.clear_providers()
    if plan.ep != CPU_EP:
        name = GENAI_PROVIDER_NAMES[plan.ep]
        config.append_provider(name)
        options = dict(plan.options)
        if backend_path:
            options.setdefault("backend_path", backend_path)
        for key, value in options.items():
            config.set_provider_option(name, key, value)
    return config


def load_native_model(og: Any, folder: ModelFolder, plan: ProviderPlan, strict: bool) -> tuple[Any, ProviderPlan]:
    """og.Model for the plan; on a device failure, a CPU fallback (not strict) or a typed error."""
    try:
        return og.Model(configure(og, folder, plan)), plan
    except ModelError:
        raise
    except Exception as exc:
        error = failures.explain(exc, plan.ep)
        if plan.ep == CPU_EP:
            raise _as_model_error(error, exc) from exc
        log.warning("chat model on %s failed: %s", plan.ep, exc)
        if strict:
            raise DeviceUnavailableError(error.message, error.hint) from exc
        fallback = plan.to_cpu(f"{short_ep_name(plan.ep)} could not load the model: {error.message}")
    try:
        return og.Model(configure(og, folder, fallback)), fallback
    except ModelError:
        raise
    except Exception as exc:
        raise _as_model_error(failures.explain(exc, CPU_EP), exc) from exc


def _as_model_error(error: StudioError, exc: BaseException) -> StudioError:
    if isinstance(error, ModelError):
        return error
    return ModelError(
        f"onnxruntime-genai could not load the model: {_first_line(exc)}",
        "Check that the folder is complete and built for this onnxruntime-genai version.",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
