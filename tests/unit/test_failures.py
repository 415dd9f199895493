"""Native failures (as ONNX Runtime, the QNN and DirectML EPs and onnxruntime-genai print them) become
plain-language errors with a hint, a code users can search for, and whether the device is gone."""

from __future__ import annotations

import pytest

from engines.errors import DeviceUnavailableError, ModelError, SessionCreationError, StudioError
from engines.runtime.failures import diagnose, explain

QNN = "QNNExecutionProvider"
DML = "DmlExecutionProvider"
CPU = "CPUExecutionProvider"

DML_REMOVED = (
    "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running Conv node. "
    "Name:'/features/features.0/Conv' Status Message: D:\\a\\_work\\1\\s\\onnxruntime\\core\\providers\\dml\\"
    "DmlExecutionProvider\\src\\MLOperatorAuthorImpl.cpp(2557)\\onnxruntime_pybind11_state.pyd!00007FFD1C2B8F4A: "
    "(caller: 00007FFD1C2A1B2E) Exception(3) tid(3a1c) 887A0005 The GPU device instance has been suspended. "
    "Use GetDeviceRemovedReason to determine the appropriate action."
)

CASES = [
    # (native message, ep, error class, words in the message, code, device lost)
    (
        "[ONNXRuntimeError] : 1 : FAIL : QNN SetupBackend failed qnn_backend_manager.cc:1203 "
        "Failed to finalize QNN graph. Error code: 1002",
        QNN,
        DeviceUnavailableError,
        "QNN error 1002: the NPU could not allocate memory",
        "QNN 1002",
        False,
    ),
    (
        "QnnDsp <E> rpcmem_alloc failed for 104857600 bytes; QNN_COMMON_ERROR_MEM_ALLOC",
        QNN,
        DeviceUnavailableError,
        "could not allocate memory",
        "QNN 1002",
        False,
    ),
    (
        "[ONNXRuntimeError] : 1 : FAIL : QNN EP: qnn_backend_manager.cc:812 LoadCachedQnnContextFromBuffer "
        "Failed to create context from binary. Error code: 5000",
        QNN,
        SessionCreationError,
        "QNN error 5000: the compiled NPU model does not match this driver or QNN SDK",
        "QNN 5000",
        False,
    ),
    (
        "[ONNXRuntimeError] : 1 : FAIL : QNN EP: Failed to create context from binary. Error code: 5005",
        QNN,
        SessionCreationError,
        "QNN error 5005",
        "QNN 5005",
        False,
    ),
    (
        "QNN execution provider is not supported in this build. ",
        "",  # onnxruntime-genai says it without an EP name
        DeviceUnavailableError,
        "The NPU (QNN) is not supported by the ONNX Runtime build installed here",
        "not-in-build",
        False,
    ),
    (
        "DML provider requested, but the installed GenAI has not been built with DML support",
        "",
        DeviceUnavailableError,
        "The GPU (DirectML) is not supported by the ONNX Runtime build",
        "not-in-build",
        False,
    ),
    (
        DML_REMOVED,
        DML,
        DeviceUnavailableError,
        "DirectML error 0x887A0005: the GPU was removed or reset",
        "0x887A0005",
        True,
    ),
    (
        "Exception(1) tid(2c0) 887A0006 The GPU will not respond to more commands, most likely because of an "
        "invalid command passed by the calling application.",
        DML,
        DeviceUnavailableError,
        "0x887A0006: the GPU stopped responding",
        "0x887A0006",
        True,
    ),
    (
        "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Exception during initialization: "
        "D:\\a\\_work\\1\\s\\onnxruntime\\core\\providers\\dml\\dml_provider_factory.cc(123)\\"
        "onnxruntime_pybind11_state.pyd!00007FFC: (caller: 00007FFC) Exception(1) tid(4f0) 887A0004 "
        "The specified device interface or feature level is not supported on this system.",
        DML,
        DeviceUnavailableError,
        "The GPU (DirectML) has no working DirectX 12 driver",
        "missing-driver",
        False,
    ),
    (
        "[ONNXRuntimeError] : 1 : FAIL : LoadLibrary failed with error 126 \"\" when trying to load "
        "\"C:\\Program Files\\NPU Studio\\onnxruntime_qnn\\onnxruntime_providers_qnn.dll\"",
        QNN,
        DeviceUnavailableError,
        "The runtime library for the NPU (QNN) could not be loaded",
        "missing-driver",
        False,
    ),
    (
        "QNN EP: Unable to load backend, error: load library failed: QnnHtp.dll",
        QNN,
        DeviceUnavailableError,
        "could not be loaded (a missing driver",
        "missing-driver",
        False,
    ),
    (
        "[ONNXRuntimeError] : 1 : FAIL : QNN EP: Failed to create device. Error: QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE",
        QNN,
        DeviceUnavailableError,
        "stopped working",
        "npu-device",
        True,
    ),
    (
        "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running MatMul node. "
        "Name:'/lm_head/MatMul' Status Message: bad allocation",
        CPU,
        DeviceUnavailableError,
        "The CPU ran out of memory",
        "out-of-memory",
        False,
    ),
    (
        "Exception(2) tid(1a4) 8007000E Not enough memory resources are available to complete this operation.",
        DML,
        DeviceUnavailableError,
        "The GPU (DirectML) ran out of memory",
        "out-of-memory",
        False,
    ),
    (
        "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Failed to allocate memory for requested buffer of size 1073741",
        CPU,
        DeviceUnavailableError,
        "ran out of memory",
        "out-of-memory",
        False,
    ),
    (
        "[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model from C:\\m\\model.onnx failed:Protobuf parsing failed.",
        CPU,
        ModelError,
        "not a valid ONNX model",
        "invalid-model",
        False,
    ),
    (
        "[ONNXRuntimeError] : 3 : NO_SUCHFILE : Load model from /m/model.onnx failed. File doesn't exist",
        CPU,
        ModelError,
        "could not be read",
        "missing-file",
        False,
    ),
    (
        "[ONNXRuntimeError] : 1 : FAIL : This session contains graph nodes that are assigned to the default CPU "
        "EP, but fallback to CPU EP has been explicitly disabled by the user.",
        QNN,
        SessionCreationError,
        "Strict mode: the NPU (QNN) cannot run every part",
        "strict",
        False,
    ),
    (
        "[ONNXRuntimeError] : 1 : FAIL : Unable to compile any nodes. Check that the session EPs support compilation.",
        QNN,
        SessionCreationError,
        "The NPU (QNN) cannot run any part of this model",
        "no-nodes-compiled",
        False,
    ),
]


@pytest.mark.parametrize(("native", "ep", "cls", "words", "code", "lost"), CASES)
def test_native_messages_become_plain_language(
    native: str, ep: str, cls: type[StudioError], words: str, code: str, lost: bool
) -> None:
    found = diagnose(RuntimeError(native), ep)
    assert type(found.error) is cls
    assert words in found.error.message
    assert "the the" not in found.error.message.lower()
    assert found.error.hint, "every failure says what to do"
    assert found.code == code
    assert found.device_lost is lost
    assert found.native == native
    assert getattr(found.error, "native", "") == native, "the native text is kept for diagnostics"
    assert "\\onnxruntime\\" not in found.error.message, "no native paths in what the user reads"


def test_message_never_shows_an_empty_qnn_code() -> None:
    err = explain(RuntimeError("QNN EP: failed to create context from binary"), QNN)
    assert err.message.startswith("QNN error: the compiled NPU model")


def test_numbers_that_merely_contain_a_code_are_not_mistaken_for_one() -> None:
    found = diagnose(RuntimeError("Non-zero status code returned while running node_10025 (Gather)"), QNN)
    assert found.code == "" and "memory" not in found.error.message
    assert isinstance(found.error, SessionCreationError)


def test_unknown_failures_keep_their_first_line_and_point_to_the_doctor() -> None:
    err = explain(RuntimeError("something odd happened\nsecond line with details"), DML)
    assert err.message == "The GPU (DirectML) failed: something odd happened"
    assert "npu-studio doctor" in err.hint


def test_an_already_readable_error_passes_through() -> None:
    original = DeviceUnavailableError("Already explained.", "Do this.")
    assert explain(original, QNN) is original
    assert diagnose(original).error is original


def test_a_diagnosed_error_remembers_that_its_device_was_lost() -> None:
    err = explain(RuntimeError(DML_REMOVED), DML)
    again = diagnose(err)
    assert again.device_lost and again.code == "0x887A0005"
