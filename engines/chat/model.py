"""Chat model folders: validation before any native load, and the onnxruntime-genai provider setup.

A genai folder is data from somewhere else. Before `og.Config` / `og.Model` see it, every file its
`genai_config.json` names must exist *inside* the folder (no absolute paths, no `..`, no symlink
out), the tokenizer and a chat template must be there, and the config may not ask to load native
libraries (custom ops, EP plugins): a model folder never decides which code runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engines import jsonfile
from engines.chat import config_policy
from engines.errors import DeviceUnavailableError, ModelError, StudioError
from engines.models.native import refuse_library_keys, walk
from engines.models.paths import resolve_inside
from engines.models.safety import inspect_onnx
from engines.runtime import failures
from engines.runtime.planning import DeviceSet, plan_device
from engines.runtime.registration import plugin_library, qnn_backend_path
from engines.types import CPU_EP, EP_DEVICE_TYPE, DeviceChoice, DeviceType, Placement, Policy, short_ep_name

log = logging.getLogger(__name__)

GENAI_CONFIG = "genai_config.json"
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
TOKENIZER_MODULE = "tokenizer_module.json"  # onnxruntime-extensions: names e.g. a tiktoken file

QNN_EP = "QNNExecutionProvider"
DML_EP = "DmlExecutionProvider"

# EP name -> the provider name onnxruntime-genai's `append_provider` takes (older builds, such as
# the 0.13 DirectML one, know only the short names).
GENAI_PROVIDER_NAMES: Mapping[str, str] = {
    QNN_EP: "qnn",
    DML_EP: "dml",
    "CUDAExecutionProvider": "cuda",
    "WebGpuExecutionProvider": "webgpu",
    "OpenVINOExecutionProvider": "OpenVINO",
    "VitisAIExecutionProvider": "VitisAI",
    "NvTensorRTRTXExecutionProvider": "NvTensorRtRtx",
}
_EP_BY_LOWER_SHORT = {ep.removesuffix("ExecutionProvider").lower(): ep for ep in GENAI_PROVIDER_NAMES} | {
    "cpu": CPU_EP,
    "directml": DML_EP,
}

# Which EPs can serve a device type for chat, best first.
_CANDIDATES: Mapping[DeviceType, tuple[str, ...]] = {
    DeviceType.NPU: (QNN_EP, "OpenVINOExecutionProvider", "VitisAIExecutionProvider"),
    DeviceType.GPU: (DML_EP, "CUDAExecutionProvider", "WebGpuExecutionProvider"),
}


@dataclass(frozen=True)
class ModelFolder:
    """A genai model folder that passed validation."""

    path: Path
    model_type: str
    context_length: int
    default_max_length: int  # search.max_length from the config, capped by context_length
    files: tuple[str, ...]  # files the config (and its ONNX models) reference, relative to path
    config_providers: tuple[str, ...]  # EP names the config asks for, in order

    @property
    def name(self) -> str:
        return self.path.name


# --------------------------------------------------------------------------------------------
# Folder validation
# --------------------------------------------------------------------------------------------


def validate_model_folder(folder: str | Path) -> ModelFolder:
    """Check a genai folder without loading anything native. Each problem is its own ModelError."""
    path = Path(folder).expanduser()
    if not path.exists():
        raise ModelError(f"Model folder not found: {path}.", "Check the path, or pick a model folder that exists.")
    if not path.is_dir():
        raise ModelError(
            f"{path} is a file, not a model folder.",
            "Pass the folder that contains genai_config.json, not a file inside it.",
        )
    root = path.resolve()
    config_path = root / GENAI_CONFIG
    if not config_path.exists():
        raise ModelError(
            f"{path} is not an onnxruntime-genai model folder: {GENAI_CONFIG} is missing.",
            "Pick a folder made by the onnxruntime-genai model builder (it holds genai_config.json, "
            "model.onnx and the tokenizer files).",
        )
    _inside(root, GENAI_CONFIG, f"the genai config ({GENAI_CONFIG})")
    config = _read_json(config_path, GENAI_CONFIG)
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise ModelError(
            f'{GENAI_CONFIG} in {path} has no "model" section.',
            "The file is not an onnxruntime-genai config; rebuild the folder with the model builder.",
        )
    refuse_library_keys(config, GENAI_CONFIG)
    config_policy.check_config(config)  # only the session, provider and search options a folder may set
    model = config["model"]
    decoder = model.get("decoder")
    if not isinstance(decoder, dict) or not isinstance(decoder.get("filename"), str):
        raise ModelError(
            f"{GENAI_CONFIG} in {path} does not name the decoder model (model.decoder.filename).",
            "Rebuild the folder with the onnxruntime-genai model builder.",
        )
    context_length = model.get("context_length")
    if not isinstance(context_length, int) or isinstance(context_length, bool) or context_length < 2:
        raise ModelError(
            f"{GENAI_CONFIG} in {path} has no valid model.context_length (found {context_length!r}).",
            "Rebuild the folder with the onnxruntime-genai model builder.",
        )
    search = config.get("search") if isinstance(config.get("search"), dict) else {}
    max_length = search.get("max_length") if isinstance(search, dict) else None
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 2:
        max_length = context_length

    files: list[str] = []
    for key_path, name in _referenced_files(config):
        _inside(root, name, f"the file named by {key_path} in {GENAI_CONFIG}")
        files.append(name)
        if name.lower().endswith(".onnx"):
            for external in inspect_onnx(root / name).external_files:
                files.append(external.relative_to(root).as_posix())

    for required in (TOKENIZER_JSON, TOKENIZER_CONFIG):
        if not (root / required).exists():
            raise ModelError(
                f"The model folder {path} has no {required}.",
                "Copy the tokenizer files next to genai_config.json (the model builder writes them).",
            )
        _inside(root, required, f"the tokenizer file {required}")
    tokenizer_config = _read_json(root / TOKENIZER_CONFIG, TOKENIZER_CONFIG)
    if not _has_chat_template(root, tokenizer_config):
        raise ModelError(
            f"The model in {path} has no chat template ({CHAT_TEMPLATE_FILE}, or chat_template in {TOKENIZER_CONFIG}).",
            "Add the model's chat template as chat_template.jinja; NPU Studio does not guess templates.",
        )
    for name in (TOKENIZER_CONFIG, TOKENIZER_MODULE):
        files += _tokenizer_named_files(root, name, tokenizer_config if name == TOKENIZER_CONFIG else None)
    _links_stay_inside(root)
    return ModelFolder(
        path=root,
        model_type=str(model.get("type", "")),
        context_length=context_length,
        default_max_length=min(max_length, context_length),
        files=tuple(dict.fromkeys(files)),
        config_providers=tuple(_config_providers(config)),
    )


def _tokenizer_named_files(root: Path, name: str, data: Any = None) -> list[str]:
    """Files a tokenizer config names (`tiktoken_file`, `vocab_file`, ...): the tokenizer opens them
    itself, so each must be inside the folder like any file the genai config names."""
    if data is None:
        if not (root / name).exists():
            return []
        _inside(root, name, f"the tokenizer file {name}")
        data = _read_json(root / name, name)
    named: list[str] = []
    for key_path, key, value in walk(data):
        lowered = key.lower()
        if value is None or not (lowered.endswith("file") or lowered.endswith("_path") or lowered.endswith("files")):
            continue
        for index, item in enumerate(value if isinstance(value, list) else [value]):
            where = f"{key_path}[{index}]" if isinstance(value, list) else key_path
            _inside(root, item, f"the file named by {where} in {name}")
            named.append(str(item))
    return named


def _links_stay_inside(root: Path, limit: int = 10_000) -> None:
    """No symbolic link anywhere in the folder leads out of it: onnxruntime-genai and its tokenizer
    open files by name (vocabularies, merges, sentencepiece models) beyond the ones checked above."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for entry in [*dirnames, *filenames]:
            seen += 1
            if seen > limit:
                raise ModelError(
                    f"The model folder {root} holds more than {limit:,} files.",
                    "Pick the folder made by the model builder, not a folder that contains it.",
                )
            if (here / entry).is_symlink():
                rel = (here / entry).relative_to(root).as_posix()
                resolve_inside(root, rel, what=f"{rel} in the model folder",
                               hint="Copy the real file into the model folder instead of linking to it.")  # fmt: skip


def _read_json(file: Path, name: str) -> Any:
    try:
        return jsonfile.read_json(file)
    except jsonfile.JsonFileError as exc:
        if exc.kind == "unreadable":
            raise ModelError(f"{name} could not be read: {exc.detail}.", "Check the file's permissions.") from None
        problem = exc.problem.removeprefix("it ")
        raise ModelError(
            f"{name} {problem}.", "The file is damaged or was edited by hand; fix it or rebuild the model folder."
        ) from None


def _inside(root: Path, name: object, what: str) -> Path:
    """The file `name` (from a config) as a path inside `root`; a ModelError otherwise."""
    return resolve_inside(root, name, what=what[:1].upper() + what[1:], must_exist=True)


def _referenced_files(config: Any) -> Iterator[tuple[str, str]]:
    for key_path, key, value in walk(config):
        if key == "filename" or key.endswith("_filename"):
            yield key_path, value
        elif key == "filenames" and isinstance(value, list):
            for index, item in enumerate(value):
                yield f"{key_path}[{index}]", item


def _has_chat_template(root: Path, tokenizer_config: Any) -> bool:
    template_file = root / CHAT_TEMPLATE_FILE
    if template_file.exists():
        _inside(root, CHAT_TEMPLATE_FILE, f"the chat template {CHAT_TEMPLATE_FILE}")
        try:
            return bool(template_file.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"{CHAT_TEMPLATE_FILE} could not be read: {exc}.", "Rebuild the model folder.") from exc
    template = tokenizer_config.get("chat_template") if isinstance(tokenizer_config, dict) else None
    return isinstance(template, str) and bool(template.strip())


def ep_from_genai_name(name: str) -> str:
    """`qnn`, `QNN` or `QNNExecutionProvider` -> `QNNExecutionProvider`; unknown names pass through."""
    key = name.lower().removesuffix("executionprovider")
    return _EP_BY_LOWER_SHORT.get(key, name)


def _config_providers(config: Any) -> list[str]:
    found: list[str] = []
    for _, key, value in walk(config):
        if key == "provider_options" and isinstance(value, list):
            for entry in value:
                if isinstance(entry, dict):
                    found.extend(ep_from_genai_name(str(name)) for name in entry)
    return list(dict.fromkeys(found))


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


def chat_devices(available: frozenset[str] | None = None) -> DeviceSet:
    """The devices onnxruntime-genai can use here: the discovered ones (minus those that failed in this
    run) that genai can drive, or, with `available`, exactly those EPs (tests, tools)."""
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
    return DeviceSet.of(sorted(eps, key=_genai_rank), reasons)


def _genai_rank(ep: str) -> int:
    order = [*_CANDIDATES[DeviceType.NPU], *_CANDIDATES[DeviceType.GPU]]
    return order.index(ep) if ep in order else len(order)


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


def genai() -> Any:
    """The onnxruntime_genai module (a test fake when one is installed with `use_fake_genai`)."""
    if _og_override is not None:
        return _og_override
    from engines import runtime

    return runtime.import_genai()


def use_fake_genai(module: Any) -> None:
    """Install a fake onnxruntime_genai (tests); `None` restores the real one."""
    global _og_override
    _og_override = module
    with _plugin_lock:
        _registered_plugins.clear()


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
