"""A failure's code, device_lost and native message are fields of the error, set where the native error
is explained, kept through the fallback, and intact after the trip across the chat process pipe."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path

import pytest

from engines.chat.conversation import GenerationFailedError
from engines.chat.loaded import ChatModel
from engines.chat.model import genai, use_fake_genai
from engines.chat.requests import Failed
from engines.chat.types import ChatOptions
from engines.errors import DeviceUnavailableError, GenerationError, ModelError, StudioError, error_from_dict
from engines.runtime.failures import diagnose
from engines.runtime.fallback import HEALTH, note_failure
from engines.types import DeviceChoice

REMOVED = "DirectML: DXGI_ERROR_DEVICE_REMOVED (0x887A0005) at dml_execution_provider.cc:118"
DML = "DmlExecutionProvider"


def test_diagnose_sets_real_fields() -> None:
    error = diagnose(RuntimeError(REMOVED), DML).error
    assert isinstance(error, DeviceUnavailableError)
    assert (error.failure_code, error.device_lost, error.device_failure) == ("0x887A0005", True, True)
    assert error.native == REMOVED
    model = diagnose(RuntimeError("[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Protobuf parsing failed."), DML).error
    assert isinstance(model, ModelError) and not model.device_failure and model.failure_code == "invalid-model"


def test_the_fields_survive_the_pipe_with_their_class() -> None:
    sent = diagnose(RuntimeError("QNN error 1002: QNN_COMMON_ERROR_MEM_ALLOC"), "QNNExecutionProvider").error
    parent, child = multiprocessing.Pipe()
    child.send(Failed(sent, "the answer so far"))  # pickled, as the chat engine child sends it
    event = parent.recv()
    got = event.error
    assert isinstance(event, Failed) and event.partial == "the answer so far" and type(got) is DeviceUnavailableError
    assert got.as_dict() == sent.as_dict()
    assert (got.failure_code, got.device_failure, got.device_lost) == ("QNN 1002", True, False)


def test_an_error_class_outside_engines_errors_arrives_as_its_nearest_base() -> None:
    error = GenerationFailedError("Generation failed: x", "hint", "partial", stats=None)  # type: ignore[arg-type]
    error.with_diagnosis(diagnose(RuntimeError(REMOVED), DML).error)
    got = pickle.loads(pickle.dumps(Failed(error))).error
    assert type(got) is GenerationError and got.device_lost and got.failure_code == "0x887A0005"
    assert type(error_from_dict({"type": "os.system", "message": "m"})) is StudioError


def test_note_failure_marks_only_device_failures() -> None:
    note_failure(ModelError("The model file is damaged."), DML)
    assert not HEALTH.is_failed(DML)
    note_failure(RuntimeError(REMOVED), "CPUExecutionProvider")
    assert not HEALTH.is_failed("CPUExecutionProvider")
    found = note_failure(RuntimeError(REMOVED), DML)
    assert HEALTH.is_failed(DML) and found.error.device_lost


class _FailingGenerator:
    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.steps = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def generate_next_token(self) -> None:
        self.steps += 1
        if self.steps > 2:
            raise RuntimeError(REMOVED)
        self._inner.generate_next_token()  # type: ignore[attr-defined]


def test_a_device_lost_mid_answer_is_a_generation_error_with_the_fields_and_marks_the_device(tiny_llm: Path) -> None:
    og = genai()

    class Genai:
        def __getattr__(self, name: str) -> object:
            return getattr(og, name)

        def Generator(self, *args: object) -> object:
            return _FailingGenerator(og.Generator(*args))

    use_fake_genai(Genai())
    try:
        model = ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"))
        object.__setattr__(model.plan, "ep", DML)  # as if the model ran on the GPU
        conversation = model.new_conversation(options=ChatOptions(max_new_tokens=8))
        with pytest.raises(GenerationFailedError) as caught:
            conversation.send("Hello")
    finally:
        use_fake_genai(None)
    failed = caught.value
    assert (failed.failure_code, failed.device_lost, failed.native) == ("0x887A0005", True, REMOVED)
    assert HEALTH.is_failed(DML), "the chat path goes through the one fallback mechanism"
