"""Native failures in plain language: what happened and what to do."""

from __future__ import annotations

import re

from engines.errors import DeviceUnavailableError, ModelError, SessionCreationError, StudioError
from engines.types import short_ep_name

# (pattern in the native message, error class, message, hint). First match wins.
_RULES: tuple[tuple[str, type[StudioError], str, str], ...] = (
    (
        r"fallback to CPU EP has been explicitly disabled",
        SessionCreationError,
        "Strict mode: {device} cannot run every part of this model, and running the rest on the CPU is turned off.",
        "Turn strict mode off to let unsupported parts run on the CPU, or pick a model variant made "
        "for {device} (for the NPU: a quantized QDQ model).",
    ),
    (
        r"\b1002\b|QNN_COMMON_ERROR_MEM_ALLOC|Failed to allocate",
        DeviceUnavailableError,
        "QNN error 1002: the NPU could not allocate memory for this model.",
        "Close other apps using the NPU, try a smaller model, or use the GPU or CPU.",
    ),
    (
        r"\b500[05]\b|context binary|incompatible.*context|EPContext.*(invalid|incompatible)",
        SessionCreationError,
        "QNN error {code}: the compiled NPU model does not match this driver or QNN SDK (it was compiled "
        "for another version).",
        "NPU Studio rebuilds compiled models automatically; if this persists, clear the compiled-model "
        "cache (`npu-studio cache clear`) and update the NPU driver.",
    ),
    (
        r"887A0005|DXGI_ERROR_DEVICE_REMOVED|device (was )?removed",
        DeviceUnavailableError,
        "DirectML error 0x887A0005: the GPU was removed or reset (driver update, crash or sleep).",
        "Retry on another device now; restart NPU Studio to use the GPU again.",
    ),
    (
        r"887A0006|DXGI_ERROR_DEVICE_HUNG",
        DeviceUnavailableError,
        "DirectML error 0x887A0006: the GPU stopped responding.",
        "Retry on another device; update the GPU driver if it happens again.",
    ),
    (
        r"not supported in this build|not been built with .* support|is not in available provider",
        DeviceUnavailableError,
        "{device} is not supported by the ONNX Runtime build installed here.",
        "Use the CPU, or install the NPU Studio build for this laptop (ARM64 MSI for Snapdragon NPUs, "
        "x64 MSI for DirectML GPUs).",
    ),
    (
        r"Failed to load library|LoadLibrary|cannot open shared object|error code 126",
        DeviceUnavailableError,
        "The {device} runtime library could not be loaded (a missing driver or a damaged install).",
        "Install or update the device driver, or reinstall NPU Studio.",
    ),
    (
        r"bad_alloc|out of memory|OutOfMemory|E_OUTOFMEMORY|Failed to allocate memory",
        DeviceUnavailableError,
        "{device} ran out of memory for this model.",
        "Close other apps, try a smaller model, or use another device.",
    ),
    (
        r"INVALID_PROTOBUF|Protobuf parsing failed|No graph was found|ModelProto does not have a graph",
        ModelError,
        "The model file is not a valid ONNX model (corrupt or truncated).",
        "Rebuild or re-import the model; check the file is complete.",
    ),
    (
        r"NO_SUCHFILE|No such file|does not exist|Load model from .* failed",
        ModelError,
        "The model file (or one of its external data files) could not be read.",
        "Check the model folder is complete; re-import it from its source.",
    ),
)


def explain(exc: BaseException, ep: str = "") -> StudioError:
    """Turn a native exception into a StudioError with a message a user can act on."""
    if isinstance(exc, StudioError):
        return exc
    text = str(exc)
    device = _device_words(ep)
    for pattern, cls, message, hint in _RULES:
        match = re.search(pattern, text, flags=re.IGNORECASE)
        if match:
            code = re.search(r"\b(100\d|500\d)\b", text)
            err = cls(
                _capital(message.format(device=device, code=code.group(1) if code else "")),
                hint.format(device=device),
            )
            err.native = text  # type: ignore[attr-defined]
            return err
    first_line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    err = SessionCreationError(
        f"{_capital(device)} failed: {first_line[:300]}",
        "Try another device; if it keeps failing, export diagnostics (`npu-studio doctor`) and report it.",
    )
    err.native = text  # type: ignore[attr-defined]
    return err


def _device_words(ep: str) -> str:
    return {
        "QNNExecutionProvider": "the NPU (QNN)",
        "DmlExecutionProvider": "the GPU (DirectML)",
        "CPUExecutionProvider": "the CPU",
        "": "the device",
    }.get(ep, short_ep_name(ep))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
