"""NPU Studio engines: everything that touches ONNX Runtime, free of Qt. This is the public API, and the only
door: `app` and `ui` import `engines` and nothing under it (an import-linter contract says so).

    import engines
    clf = engines.open_classifier("efficientnet-lite0", "npu", strict=True, library=["models"])
    print(clf.placement.badge(), clf.classify("cat.jpg").top[0].label)

One call per capability (the names below, grouped the same way, are what each one needs around it):
- Scripts: `open_classifier`, `classify_folder`, `open_chat` and `load_chat_model` open a model by name or folder on
  a device policy and fall back as the policy allows.
- Devices: `discover()` lists what this PC can run on; the execution-provider catalog, the fallback between devices,
  the compiled-model cache and the one import of a runtime.
- Classify: `open_classifier(...)` then `.classify(photo)` for one photo, `classify_folder(...)` for a folder;
  `walk_photos` lists a folder's photos the way both do.
- Chat: `open_service(...)` starts the chat service (one model, one thread, requests in, events out);
  `open_chat(...)` is the one-call conversation for scripts.
- The model library: `scan_library` (list), `import_model` (import), `verify_model`, `remove_model`, `estimate_fit`
  (fit), `load_catalog` (catalog), `download_model` (download); `find_models` finds the models other tools keep on
  this PC.
- Quantize: `quantize_classifier(...)` makes an NPU-ready (QDQ) copy of a float classifier.
- Benchmark: `run_benchmark(config, ...)` measures a model on each device, side by side.
- Doctor: `run_doctor(...)` checks each device end to end; `write_doctor_report` saves what it found.
- Files and text the app shares with the engines: bounded JSON reads, atomic and locked writes, safe file names,
  text fit for a label or a terminal, secrets kept out of logs.

Importing `engines` loads no runtime: only the errors, the plain types and the planner's table are imported
with it; every other name is imported on first use (PEP 562 `__getattr__`), so a view can name the plain
types without paying for ONNX Runtime, numpy or onnx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engines.errors import (
    BusyError,
    CancelledError,
    ContextOverflowError,
    DeviceUnavailableError,
    GenerationError,
    ImageError,
    InputContractError,
    ModelError,
    PlacementError,
    SessionCreationError,
    StorageError,
    StudioError,
)
from engines.runtime.planning import MEANING, RANKING, DeviceForecast, best_first, predict_device
from engines.types import (
    CPU_EP,
    EP_ALIASES,
    EP_DEVICE_TYPE,
    IMAGE_SUFFIXES,
    CancelToken,
    Classification,
    ClassScore,
    Device,
    DeviceChoice,
    DeviceType,
    Placement,
    Policy,
    short_ep_name,
)

if TYPE_CHECKING:
    from engines.api import Classifier, classify_folder, load_chat_model, open_chat, open_classifier
    from engines.bench.data import (
        ALL_DEVICES,
        BenchConfig,
        BenchModel,
        BenchProgress,
        BenchRun,
        DeviceResult,
        parse_devices,
    )
    from engines.bench.data import CHAT as BENCH_CHAT
    from engines.bench.data import DEFAULT_PROMPT as BENCH_DEFAULT_PROMPT
    from engines.bench.data import FAILED as BENCH_FAILED
    from engines.bench.data import VISION as BENCH_VISION
    from engines.bench.export import csv_text as bench_csv_text
    from engines.bench.export import write_csv as write_bench_csv
    from engines.bench.runner import run_benchmark
    from engines.bench.stats import percentile
    from engines.chat.bounded import BoundedChat
    from engines.chat.client import ServiceConversation
    from engines.chat.conversation import Conversation
    from engines.chat.folder import context_window, validate_model_folder
    from engines.chat.generation import render_prompt
    from engines.chat.loaded import ChatModel
    from engines.chat.model import chat_devices, plan_providers
    from engines.chat.opening import open_service
    from engines.chat.requests import (
        ChatEvent,
        ChatRequest,
        Failed,
        Finished,
        Guidance,
        GuidanceKind,
        ModelInfo,
        Reloaded,
        Started,
        Status,
        Text,
        Turn,
        Usage,
        Waiting,
    )
    from engines.chat.service import ChatService
    from engines.chat.session import no_model_error
    from engines.chat.types import ChatMessage, ChatOptions, GenerationStats, StopReason
    from engines.csvfile import writer as csv_writer
    from engines.doctor import run_doctor
    from engines.doctor_report import write_outputs as write_doctor_report
    from engines.jsonfile import JsonFileError, read_json
    from engines.jsonfile import loads as parse_json
    from engines.jsonfile import read_bytes as read_json_bytes
    from engines.loading import loading_text
    from engines.memory import release_free_memory
    from engines.models.catalog import CatalogEntry, load_catalog, load_npu_availability
    from engines.models.catalog import find_entry as find_catalog_entry
    from engines.models.downloads import DownloadProgress, discard_partial, download_model, partial_bytes
    from engines.models.finding import find_models
    from engines.models.fit import FitHint, estimate_fit
    from engines.models.found import FoundModel
    from engines.models.found import name_for as found_model_name
    from engines.models.here import MachineDevices, machine_devices, mark_added, npu_models
    from engines.models.import_manifest import IMAGENET_MEAN, IMAGENET_STD, ClassifierOptions, ImportDetails
    from engines.models.importer import import_model
    from engines.models.library import (
        DEVICE_CLASSES,
        KIND_CLASSIFIER,
        KIND_LLM,
        ModelEntry,
        VerifyReport,
        find_model,
        format_bytes,
        remove_model,
        scan_library,
        verify_model,
    )
    from engines.models.library import clean_leftovers as clean_library_leftovers
    from engines.models.library import read_entry as read_library_entry
    from engines.models.lookup import LocatedModel, locate_model
    from engines.models.manifest import MANIFEST_NAME, has_manifest
    from engines.models.reference import add_found_folder
    from engines.models.reference_check import ReferenceChangedError
    from engines.models.scan import PlaceReport, ScanLimits, ScanReport
    from engines.models.trial import configure as configure_trials
    from engines.names import default_path
    from engines.photo_folders import (
        FOLDER_UNREADABLE,
        LINK_LOOP,
        LINK_TO_NOTHING,
        NOT_A_FILE,
        NOT_A_PHOTO,
        SUB_FOLDER,
        UNREADABLE,
        PhotoWalk,
        natural_key,
        walk_photos,
    )
    from engines.redaction import Redactor, environment_secrets, make_redactor
    from engines.runtime import load as load_runtime
    from engines.runtime import set_native_log_level
    from engines.runtime.catalog import CatalogReport, PrepareResult, download_eps
    from engines.runtime.catalog import ReadyState as EpReadyState
    from engines.runtime.catalog import read_catalog as read_ep_catalog
    from engines.runtime.compiled_cache import CacheEntry, CompiledModelCache
    from engines.runtime.devices import DiscoveryReport, discover
    from engines.runtime.fallback import DeviceFailedError, FallbackOffer, accept_first
    from engines.runtime.fallback import describe as device_label
    from engines.runtime.fallback import note_failure as note_device_failure
    from engines.runtime.plugin_probe import probe_plugins_first
    from engines.shared_files import STALE_TMP_SECONDS, set_aside, set_aside_name, write_atomically
    from engines.shared_files import locked as locked_file
    from engines.text import json_text, printable, rich_text
    from engines.vision.float_source import FloatSource
    from engines.vision.quantize import QuantizeOptions, QuantizeReport, quantize_classifier
    from engines.workdirs import sweep as sweep_work_folders

__all__ = [
    "ALL_DEVICES",
    "BENCH_CHAT",
    "BENCH_DEFAULT_PROMPT",
    "BENCH_FAILED",
    "BENCH_VISION",
    "CPU_EP",
    "DEVICE_CLASSES",
    "EP_ALIASES",
    "EP_DEVICE_TYPE",
    "FOLDER_UNREADABLE",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "IMAGE_SUFFIXES",
    "KIND_CLASSIFIER",
    "KIND_LLM",
    "LINK_LOOP",
    "LINK_TO_NOTHING",
    "MANIFEST_NAME",
    "MEANING",
    "NOT_A_FILE",
    "NOT_A_PHOTO",
    "RANKING",
    "STALE_TMP_SECONDS",
    "SUB_FOLDER",
    "UNREADABLE",
    "BenchConfig",
    "BenchModel",
    "BenchProgress",
    "BenchRun",
    "BoundedChat",
    "BusyError",
    "CacheEntry",
    "CancelToken",
    "CancelledError",
    "CatalogEntry",
    "CatalogReport",
    "ChatEvent",
    "ChatMessage",
    "ChatModel",
    "ChatOptions",
    "ChatRequest",
    "ChatService",
    "ClassScore",
    "Classification",
    "Classifier",
    "ClassifierOptions",
    "CompiledModelCache",
    "ContextOverflowError",
    "Conversation",
    "Device",
    "DeviceChoice",
    "DeviceFailedError",
    "DeviceForecast",
    "DeviceResult",
    "DeviceType",
    "DeviceUnavailableError",
    "DiscoveryReport",
    "DownloadProgress",
    "EpReadyState",
    "Failed",
    "FallbackOffer",
    "Finished",
    "FitHint",
    "FloatSource",
    "FoundModel",
    "GenerationError",
    "GenerationStats",
    "Guidance",
    "GuidanceKind",
    "ImageError",
    "ImportDetails",
    "InputContractError",
    "JsonFileError",
    "LocatedModel",
    "MachineDevices",
    "ModelEntry",
    "ModelError",
    "ModelInfo",
    "PhotoWalk",
    "PlaceReport",
    "Placement",
    "PlacementError",
    "Policy",
    "PrepareResult",
    "QuantizeOptions",
    "QuantizeReport",
    "Redactor",
    "ReferenceChangedError",
    "Reloaded",
    "ScanLimits",
    "ScanReport",
    "ServiceConversation",
    "SessionCreationError",
    "Started",
    "Status",
    "StopReason",
    "StorageError",
    "StudioError",
    "Text",
    "Turn",
    "Usage",
    "VerifyReport",
    "Waiting",
    "accept_first",
    "add_found_folder",
    "bench_csv_text",
    "best_first",
    "chat_devices",
    "classify_folder",
    "clean_library_leftovers",
    "configure_trials",
    "context_window",
    "csv_writer",
    "default_path",
    "device_label",
    "discard_partial",
    "discover",
    "download_eps",
    "download_model",
    "environment_secrets",
    "estimate_fit",
    "find_catalog_entry",
    "find_model",
    "find_models",
    "format_bytes",
    "found_model_name",
    "has_manifest",
    "import_model",
    "json_text",
    "load_catalog",
    "load_chat_model",
    "load_npu_availability",
    "load_runtime",
    "loading_text",
    "locate_model",
    "locked_file",
    "machine_devices",
    "make_redactor",
    "mark_added",
    "natural_key",
    "no_model_error",
    "note_device_failure",
    "npu_models",
    "open_chat",
    "open_classifier",
    "open_service",
    "parse_devices",
    "parse_json",
    "partial_bytes",
    "percentile",
    "plan_providers",
    "predict_device",
    "printable",
    "probe_plugins_first",
    "quantize_classifier",
    "read_ep_catalog",
    "read_json",
    "read_json_bytes",
    "read_library_entry",
    "release_free_memory",
    "remove_model",
    "render_prompt",
    "rich_text",
    "run_benchmark",
    "run_doctor",
    "scan_library",
    "set_aside",
    "set_aside_name",
    "set_native_log_level",
    "short_ep_name",
    "sweep_work_folders",
    "validate_model_folder",
    "verify_model",
    "walk_photos",
    "write_atomically",
    "write_bench_csv",
    "write_doctor_report",
]  # fmt: skip

# Module -> the names it offers here under its own names, imported on first access (they pull in onnxruntime,
# numpy, genai or just more code than a plain type needs).
_OFFER: dict[str, str] = {
    # one call
    "engines.api": "Classifier classify_folder load_chat_model open_chat open_classifier",
    # devices
    "engines.runtime.devices": "DiscoveryReport discover",
    "engines.runtime.plugin_probe": "probe_plugins_first",
    "engines.runtime.catalog": "CatalogReport PrepareResult download_eps",
    "engines.runtime.fallback": "DeviceFailedError FallbackOffer accept_first",
    "engines.runtime.compiled_cache": "CacheEntry CompiledModelCache",
    "engines.runtime": "set_native_log_level",
    "engines.loading": "loading_text",
    "engines.memory": "release_free_memory",
    # classify
    "engines.photo_folders": (
        "FOLDER_UNREADABLE LINK_LOOP LINK_TO_NOTHING NOT_A_FILE NOT_A_PHOTO SUB_FOLDER "
        "UNREADABLE PhotoWalk natural_key walk_photos"
    ),
    # chat
    "engines.chat.opening": "open_service",
    "engines.chat.service": "ChatService",
    "engines.chat.client": "ServiceConversation",
    "engines.chat.bounded": "BoundedChat",
    "engines.chat.loaded": "ChatModel",
    "engines.chat.conversation": "Conversation",
    "engines.chat.requests": (
        "ChatEvent ChatRequest Failed Finished Guidance GuidanceKind ModelInfo Reloaded Started "
        "Status Text Turn Usage Waiting"
    ),
    "engines.chat.types": "ChatMessage ChatOptions GenerationStats StopReason",
    "engines.chat.folder": "context_window validate_model_folder",
    "engines.chat.model": "chat_devices plan_providers",
    "engines.chat.generation": "render_prompt",
    "engines.chat.session": "no_model_error",
    # library
    "engines.models.library": (
        "DEVICE_CLASSES KIND_CLASSIFIER KIND_LLM ModelEntry VerifyReport find_model "
        "format_bytes remove_model scan_library verify_model"
    ),
    "engines.models.lookup": "LocatedModel locate_model",
    "engines.models.import_manifest": "IMAGENET_MEAN IMAGENET_STD ClassifierOptions ImportDetails",
    "engines.models.importer": "import_model",
    "engines.models.fit": "FitHint estimate_fit",
    "engines.models.catalog": "CatalogEntry load_catalog load_npu_availability",
    "engines.models.downloads": "DownloadProgress discard_partial download_model partial_bytes",
    "engines.models.finding": "find_models",
    "engines.models.scan": "PlaceReport ScanLimits ScanReport",
    "engines.models.found": "FoundModel",
    "engines.models.manifest": "MANIFEST_NAME has_manifest",
    "engines.models.here": "MachineDevices machine_devices mark_added npu_models",
    "engines.models.reference": "add_found_folder",
    "engines.models.reference_check": "ReferenceChangedError",
    # quantize
    "engines.vision.quantize": "QuantizeOptions QuantizeReport quantize_classifier",
    "engines.vision.float_source": "FloatSource",
    # benchmark
    "engines.bench.data": "ALL_DEVICES BenchConfig BenchModel BenchProgress BenchRun DeviceResult parse_devices",
    "engines.bench.runner": "run_benchmark",
    "engines.bench.stats": "percentile",
    # doctor
    "engines.doctor": "run_doctor",
    # files
    "engines.text": "json_text printable rich_text",
    "engines.names": "default_path",
    "engines.jsonfile": "JsonFileError read_json",
    "engines.shared_files": "STALE_TMP_SECONDS set_aside set_aside_name write_atomically",
    "engines.redaction": "Redactor environment_secrets make_redactor",
}
_LAZY = {name: module for module, names in _OFFER.items() for name in names.split()}
# Offered under a clearer name than the module's own (which reads well only next to its module's name).
_RENAMED: dict[str, tuple[str, str]] = {
    "EpReadyState": ("engines.runtime.catalog", "ReadyState"),
    "read_ep_catalog": ("engines.runtime.catalog", "read_catalog"),
    "device_label": ("engines.runtime.fallback", "describe"),
    "note_device_failure": ("engines.runtime.fallback", "note_failure"),
    "load_runtime": ("engines.runtime", "load"),
    "clean_library_leftovers": ("engines.models.library", "clean_leftovers"),
    "read_library_entry": ("engines.models.library", "read_entry"),
    "find_catalog_entry": ("engines.models.catalog", "find_entry"),
    "found_model_name": ("engines.models.found", "name_for"),
    "configure_trials": ("engines.models.trial", "configure"),
    "BENCH_CHAT": ("engines.bench.data", "CHAT"),
    "BENCH_VISION": ("engines.bench.data", "VISION"),
    "BENCH_DEFAULT_PROMPT": ("engines.bench.data", "DEFAULT_PROMPT"),
    "BENCH_FAILED": ("engines.bench.data", "FAILED"),
    "bench_csv_text": ("engines.bench.export", "csv_text"),
    "write_bench_csv": ("engines.bench.export", "write_csv"),
    "write_doctor_report": ("engines.doctor_report", "write_outputs"),
    "parse_json": ("engines.jsonfile", "loads"),
    "read_json_bytes": ("engines.jsonfile", "read_bytes"),
    "locked_file": ("engines.shared_files", "locked"),
    "sweep_work_folders": ("engines.workdirs", "sweep"),
    "csv_writer": ("engines.csvfile", "writer"),
}


def __getattr__(name: str) -> Any:
    module, attr = _RENAMED.get(name) or (_LAZY.get(name), name)
    if module is None:
        raise AttributeError(f"module 'engines' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
