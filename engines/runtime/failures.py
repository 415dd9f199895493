"""Native failures in plain language: what happened and what to do.

ONNX Runtime, its EPs and onnxruntime-genai report failures as long native strings (file names,
line numbers, HRESULTs, QNN status codes). `explain` turns them into a StudioError a user can act on;
`diagnose` also says whether the device itself failed (a device that is gone for the rest of the run,
see engines/runtime/fallback.py) and gives the code users search for (QNN 1002, 0x887A0005, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engines.errors import DeviceUnavailableError, ModelError, SessionCreationError, StudioError
from engines.types import short_ep_name

# QNN status codes appear as "Error code: 5000", "error 1002", "status 5005" or QNN's own enum names.
_QNN_CODE = r"(?:error|code|status|err)\D{0,12}"


@dataclass(frozen=True)
class Rule:
    pattern: str
    cls: type[StudioError]
    message: str
    hint: str
    code: str = ""  # what users search for; "{code}" takes the number found in the message
    device_lost: bool = False  # the device cannot be used again in this run


# First match wins: specific codes before generic words.
RULES: tuple[Rule, ...] = (
    Rule(
        r"fallback to CPU EP has been explicitly disabled",
        SessionCreationError,
        "Strict mode: {device} cannot run every part of this model, and running the rest on the CPU is turned off.",
        "Turn strict mode off to let unsupported parts run on the CPU, or pick a model variant made "
        "for {device} (for the NPU: a quantized QDQ model, `npu-studio quantize`).",
        code="strict",
    ),
    Rule(
        r"Unable to compile any nodes",
        SessionCreationError,
        "{Device} cannot run any part of this model.",
        "For the NPU use a quantized (QDQ) variant made with `npu-studio quantize`; otherwise use the CPU.",
        code="no-nodes-compiled",
    ),
    Rule(
        rf"QNN_COMMON_ERROR_MEM_ALLOC|QNN_CONTEXT_ERROR_MEM_ALLOC|{_QNN_CODE}1002\b|rpcmem_alloc failed",
        DeviceUnavailableError,
        "QNN error 1002: the NPU could not allocate memory for this model.",
        "Close other apps that use the NPU (camera effects, Copilot+ features), try a smaller or quantized "
        "model, or use the GPU or CPU.",
        code="QNN 1002",
    ),
    Rule(
        rf"{_QNN_CODE}500[05]\b|QNN_CONTEXT_ERROR_(?:BINARY_VERSION|CREATE_FROM_BINARY|INVALID_CONFIG)"
        r"|context binary.*(?:version|incompatible|mismatch)|incompatible.*context|"
        r"EPContext.*(?:invalid|incompatible)|create context from binary",
        SessionCreationError,
        "QNN error {code}: the compiled NPU model does not match this driver or QNN SDK (it was compiled "
        "for another version).",
        "NPU Studio rebuilds compiled models automatically; if this persists, clear the compiled-model "
        "cache (`npu-studio cache clear`) and update the NPU driver.",
        code="QNN {code}",
    ),
    Rule(
        r"887A0005|DXGI_ERROR_DEVICE_REMOVED|device instance has been suspended|device (?:was |has been )?removed",
        DeviceUnavailableError,
        "DirectML error 0x887A0005: the GPU was removed or reset (driver update, driver crash or sleep).",
        "Retry on another device now; restart NPU Studio to use the GPU again.",
        code="0x887A0005",
        device_lost=True,
    ),
    Rule(
        r"887A0006|DXGI_ERROR_DEVICE_HUNG",
        DeviceUnavailableError,
        "DirectML error 0x887A0006: the GPU stopped responding.",
        "Retry on another device; update the GPU driver if it happens again.",
        code="0x887A0006",
        device_lost=True,
    ),
    Rule(
        r"887A0007|DXGI_ERROR_DEVICE_RESET",
        DeviceUnavailableError,
        "DirectML error 0x887A0007: the GPU was reset by the driver.",
        "Retry on another device now; restart NPU Studio to use the GPU again.",
        code="0x887A0007",
        device_lost=True,
    ),
    Rule(
        r"QNN_DEVICE_ERROR|Failed to create (?:QNN )?device|QnnDevice_create|transport (?:error|failure)|"
        r"Failed to get (?:QNN )?device|fastrpc|remote_handle.*open",
        DeviceUnavailableError,
        "{Device} stopped working (the NPU driver reported a device error).",
        "Retry on another device; restart the laptop if the NPU keeps failing, and update the NPU driver.",
        code="npu-device",
        device_lost=True,
    ),
    Rule(
        r"not supported in this build|not been built with \w+ support|is not in available provider",
        DeviceUnavailableError,
        "{Device} is not supported by the ONNX Runtime build installed here.",
        "Use the CPU, or install the NPU Studio build for this laptop (ARM64 MSI for Snapdragon NPUs, "
        "x64 MSI for DirectML GPUs).",
        code="not-in-build",
    ),
    Rule(
        r"887A0004|DXGI_ERROR_UNSUPPORTED|D3D12CreateDevice|no (?:compatible|suitable) (?:DirectX 12 )?adapter",
        DeviceUnavailableError,
        "{Device} has no working DirectX 12 driver.",
        "Install or update the GPU driver (from the laptop or GPU maker), then restart NPU Studio.",
        code="missing-driver",
    ),
    Rule(
        r"Failed to load library|LoadLibrary|cannot open shared object|error code 126|error 126|"
        r"Unable to load backend|QnnHtp\.dll|libQnnHtp\.so|Could not find .*\.dll",
        DeviceUnavailableError,
        "The runtime library for {device} could not be loaded (a missing driver or a damaged install).",
        "Install or update the device driver, or reinstall NPU Studio.",
        code="missing-driver",
    ),
    Rule(
        r"bad_alloc|bad allocation|out of memory|OutOfMemory|E_OUTOFMEMORY|8007000E|Failed to allocate memory|"
        r"Not enough memory",
        DeviceUnavailableError,
        "{Device} ran out of memory for this model.",
        "Close other apps, try a smaller model or a smaller batch, or use another device.",
        code="out-of-memory",
    ),
    Rule(
        r"INVALID_PROTOBUF|Protobuf parsing failed|No graph was found|ModelProto does not have a graph",
        ModelError,
        "The model file is not a valid ONNX model (corrupt or truncated).",
        "Rebuild or re-import the model; check the file is complete.",
        code="invalid-model",
    ),
    Rule(
        r"Opset \d+ is under development|opset \d+ (?:is )?not supported|Unsupported model IR version"
        r"|is till opset|ai\.onnx is till",
        ModelError,
        "The model needs a newer ONNX Runtime ({newer}); this one reads up to {supported}.",
        "Update NPU Studio, or export the model again for an older opset (e.g. `opset_version=17`).",
        code="newer-runtime",
    ),
    Rule(
        r"NO_SUCHFILE|No such file|does not exist|Load model from .* failed",
        ModelError,
        "The model file (or one of its external data files) could not be read.",
        "Check the model folder is complete; re-import it from its source.",
        code="missing-file",
    ),
)


# Failures of the device itself (not of the input or the model): retrying on another device may help.
_DEVICE_CLASSES = (DeviceUnavailableError, SessionCreationError)


@dataclass(frozen=True)
class Diagnosis:
    error: StudioError
    code: str  # "QNN 5000", "0x887A0005", "out-of-memory", ... ("" when no rule matched)
    device_lost: bool
    native: str


def diagnose(exc: BaseException, ep: str = "") -> Diagnosis:
    """The plain-language error, the code, and whether the device is gone for this run."""
    if isinstance(exc, StudioError):
        return Diagnosis(exc, exc.failure_code, exc.device_lost, exc.native)
    text = str(exc)
    device = _device_words(ep, text)
    for rule in RULES:
        if re.search(rule.pattern, text, flags=re.IGNORECASE):
            number = re.search(r"\b(100\d|500\d)\b", text)
            code = number.group(1) if number else ""
            fields = {"device": device, "Device": _capital(device), "code": code, **_versions(text)}
            message = rule.message.format(**fields).replace("QNN error :", "QNN error:")
            tag = rule.code.format(code=code).strip()
            err = rule.cls(
                _capital(message),
                rule.hint.format(**fields),
                failure_code=tag,
                device_lost=rule.device_lost,
                device_failure=rule.device_lost or rule.cls in _DEVICE_CLASSES,
                native=text,
            )
            return Diagnosis(err, tag, rule.device_lost, text)
    first_line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    err = SessionCreationError(
        f"{_capital(device)} failed: {first_line[:300]}",
        "Try another device; if it keeps failing, export diagnostics (`npu-studio doctor`) and report it.",
        device_failure=True,  # unknown words from the device's runtime: another device may work
        native=text,
    )
    return Diagnosis(err, "", False, text)


def explain(exc: BaseException, ep: str = "") -> StudioError:
    """Turn a native exception into a StudioError with a message a user can act on."""
    return diagnose(exc, ep).error


def _device_words(ep: str, text: str = "") -> str:
    known = {
        "QNNExecutionProvider": "the NPU (QNN)",
        "DmlExecutionProvider": "the GPU (DirectML)",
        "CPUExecutionProvider": "the CPU",
    }
    if ep in known:
        return known[ep]
    if ep:
        return short_ep_name(ep)
    # No EP given (e.g. onnxruntime-genai): guess it from the message.
    if re.search(r"\bQNN|Qnn|HTP|Hexagon", text):
        return known["QNNExecutionProvider"]
    if re.search(r"\bDML\b|DirectML|Dml|887A00|DXGI|D3D12", text):
        return known["DmlExecutionProvider"]
    return "the device"


def _versions(text: str) -> dict[str, str]:
    """What a model asks for and what this runtime reads, from a version-mismatch message."""
    asked = re.search(r"[Oo]pset (\d+)", text)
    ir = re.search(r"IR version:? (\d+)", text)
    limit = re.search(r"till opset (\d+)", text) or re.search(r"max supported IR version:? (\d+)", text)
    newer = f"opset {asked.group(1)}" if asked else f"IR version {ir.group(1)}" if ir else "a newer model format"
    kind = "opset" if asked or not ir else "IR version"
    supported = f"{kind} {limit.group(1)}" if limit else "an older version"
    return {"newer": newer, "supported": supported}


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
