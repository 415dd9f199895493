"""What a genai config may ask of the runtime: an allow-list, not a deny-list.

`genai_config.json` comes with the model folder, and onnxruntime-genai applies its session options,
provider options and search options as given. Some of those write files anywhere
(`enable_profiling: "/any/dir/prefix"` writes ~200 KB per token, `ep_context_file_path`, OpenVINO's
`cache_dir`), load code (`custom_ops_library`), or spend without bound (`num_beams: 100000`,
`intra_op_num_threads: 1000`). A model folder may set only the options listed here, each with a value of
the listed kind; anything else is refused with its key named. `chat` and `models import` both go
through `check_config`. Pure Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from engines.errors import ModelError
from engines.types import cpu_count

GENAI_CONFIG = "genai_config.json"
Check = Callable[[Any], bool]


def _bool(value: Any) -> bool:
    return isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 200 and "\x00" not in value


def _int(low: int, high: int) -> Check:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _number(low: float, high: float) -> Check:
    return lambda v: isinstance(v, int | float) and not isinstance(v, bool) and low <= v <= high


def _one_of(*choices: str) -> Check:
    allowed = {c.lower() for c in choices}
    return lambda v: isinstance(v, str | int) and not isinstance(v, bool) and str(v).lower() in allowed


def _threads(value: Any) -> bool:
    return _int(0, cpu_count())(value)


def _ov_load_config(value: Any) -> bool:
    """OpenVINO's `load_config`: a JSON text of per-device properties; only the NPU prompt bounds the
    OpenVINO NPU chat models set (`{"NPU": {"MAX_PROMPT_LEN": "4096", "MIN_RESPONSE_LEN": "128"}}`), never a
    property that names a file or a cache folder."""
    from engines import jsonfile

    if not isinstance(value, str) or len(value) > 1000:
        return False
    try:
        data = jsonfile.loads(value, max_depth=3)
    except jsonfile.JsonFileError:
        return False
    if not isinstance(data, dict):
        return False
    for device, properties in data.items():
        if device not in ("NPU", "GPU", "CPU") or not isinstance(properties, dict):
            return False
        for key, item in properties.items():
            if key not in _OV_PROPERTIES or not _int(1, 1 << 20)(int(item) if str(item).isdigit() else -1):
                return False
    return True


_OV_PROPERTIES = frozenset({"MAX_PROMPT_LEN", "MIN_RESPONSE_LEN"})


def _bare_qnn_backend(value: Any) -> bool:  # a name NPU Studio maps to its own copy, never a path
    return isinstance(value, str) and value.lower() in {
        "qnnhtp.dll", "qnncpu.dll", "qnngpu.dll", "libqnnhtp.so", "libqnncpu.so", "libqnngpu.so",
    }  # fmt: skip


SESSION_OPTIONS: Mapping[str, Check] = {
    "log_id": _text,
    "log_severity_level": _int(0, 4),
    "intra_op_num_threads": _threads,
    "inter_op_num_threads": _threads,
    "enable_cpu_mem_arena": _bool,
    "enable_mem_pattern": _bool,
    "disable_cpu_ep_fallback": _bool,
    "disable_quant_qdq": _bool,
    "enable_quant_qdq_cleanup": _bool,
    "use_env_allocators": _bool,
    "graph_optimization_level": _one_of(
        "ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL", "0", "1", "2", "99"
    ),
    "provider_options": lambda v: isinstance(v, list) and len(v) <= 8,  # each entry is checked below
}

# Per provider (as genai names them, lower case): options that tune the device, none that names a file.
PROVIDER_OPTIONS: Mapping[str, Mapping[str, Check]] = {
    "cpu": {},
    "qnn": {
        "backend_path": _bare_qnn_backend,
        "htp_performance_mode": _one_of(
            "burst", "balanced", "default", "high_performance", "high_power_saver", "low_balanced",
            "low_power_saver", "power_saver", "extreme_power_saver", "sustained_high_performance",
        ),
        "htp_graph_finalization_optimization_mode": _one_of("0", "1", "2", "3"),
        "enable_htp_fp16_precision": _one_of("0", "1"),
        "soc_model": lambda v: _text(v) and str(v).isdigit(),
        "htp_arch": lambda v: _text(v) and str(v).isdigit(),
        "vtcm_mb": lambda v: _text(v) and str(v).isdigit() and int(str(v)) <= 64,
        "offload_graph_io_quantization": _one_of("0", "1"),
        # Keys NPU chat folders written by Microsoft's tools carry (see docs/MODEL_FOLDERS.md for each source).
        "enable_htp_shared_memory_allocator": _one_of("0", "1"),
        "enable_dx12_shared_memory_allocator": _one_of("0", "1"),
        "backend_type": _one_of("htp", "gpu"),
        "genie_model": _one_of("true", "false", "1", "0"),
        "genie_log_level": _one_of("error", "warn", "info", "verbose"),
    },
    "dml": {"device_id": lambda v: _text(v) and str(v).isdigit(), "performance_preference": _text},
    "cuda": {"device_id": lambda v: _text(v) and str(v).isdigit(), "enable_cuda_graph": _one_of("0", "1")},
    "webgpu": {"enableGraphCapture": _one_of("0", "1")},
    "openvino": {
        "device_type": _one_of("CPU", "GPU", "NPU", "AUTO"),
        "precision": _one_of("FP16", "FP32", "ACCURACY"),
        "enable_causallm": _one_of("true", "false"),
        "load_config": _ov_load_config,
    },
    "vitisai": {},
    "nvtensorrtrtx": {},
}

SEARCH_OPTIONS: Mapping[str, Check] = {
    "max_length": _int(2, 1 << 24),
    "min_length": _int(0, 1 << 24),
    "do_sample": _bool,
    "num_beams": _int(1, 4),
    "num_return_sequences": _int(1, 4),
    "temperature": _number(1e-6, 100.0),
    "top_k": _int(0, 1 << 20),
    "top_p": _number(0.0, 1.0),
    "repetition_penalty": _number(1e-6, 100.0),
    "length_penalty": _number(-100.0, 100.0),
    "diversity_penalty": _number(0.0, 100.0),
    "no_repeat_ngram_size": _int(0, 64),
    "early_stopping": _bool,
    "past_present_share_buffer": _bool,
    "random_seed": _int(-1, 2**31 - 1),
    "chunk_size": _int(0, 1 << 24),  # a first prompt read that many tokens at a time (0: at once)
}

_HINT = (
    "Remove it from genai_config.json (NPU Studio sets the device, threads and sampling itself), or "
    "rebuild the folder with the onnxruntime-genai model builder."
)


def _refuse(where: str, value: Any, why: str) -> ModelError:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return ModelError(f"{GENAI_CONFIG} sets {where} = {shown}, which {why}.", _HINT)


def _walk_sessions(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every `session_options` object in the config (decoder, vision, embedding, ... sections)."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if key == "session_options":
                yield here, value
            else:
                yield from _walk_sessions(value, here)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk_sessions(value, f"{path}[{index}]")


def _check_options(where: str, options: Any, allowed: Mapping[str, Check], kind: str) -> None:
    if not isinstance(options, dict):
        raise _refuse(where, options, f"is not an object of {kind}")
    for key, value in options.items():
        check = allowed.get(key)
        if check is None:
            raise _refuse(f"{where}.{key}", value, f"is not one of the {kind} a model folder may set")
        if not check(value):
            raise _refuse(f"{where}.{key}", value, "is outside what NPU Studio allows for it")


def check_config(config: Mapping[str, Any]) -> None:
    """Refuse any session, provider or search option outside the allow-lists, naming its key."""
    for where, options in _walk_sessions(config):
        _check_options(where, options, SESSION_OPTIONS, "session options")
        for index, entry in enumerate(options.get("provider_options") or []):
            here = f"{where}.provider_options[{index}]"
            if not isinstance(entry, dict) or len(entry) != 1:
                raise _refuse(here, entry, "is not one provider with its options")
            (name, provider_options), = entry.items()
            allowed = PROVIDER_OPTIONS.get(str(name).lower().removesuffix("executionprovider"))
            if allowed is None:
                raise _refuse(f"{here}.{name}", provider_options, "is not an execution provider NPU Studio knows")
            _check_options(f"{here}.{name}", provider_options, allowed, f"{name} provider options")
    search = config.get("search")
    if isinstance(search, dict):  # a search section of the wrong type is the damaged-state check's to report
        _check_options("search", search, SEARCH_OPTIONS, "search options")
        beams, returned = search.get("num_beams", 1), search.get("num_return_sequences", 1)
        if isinstance(beams, int) and isinstance(returned, int) and returned > beams:
            raise _refuse("search.num_return_sequences", returned, f"is more than num_beams ({beams})")
