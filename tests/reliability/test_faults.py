"""Faults while work runs, below the window: a device lost mid-run (classify CLI on a fake ONNX Runtime),
a generator error mid-answer and cancel storms (the tiny genai chat model, real onnxruntime-genai)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from app.cli import run
from engines import runtime
from engines.chat.conversation import Conversation, GenerationFailedError
from engines.chat.loaded import ChatModel
from engines.chat.model import genai, use_fake_genai
from engines.chat.types import ChatOptions, StopReason
from engines.errors import GenerationError
from engines.runtime import registration
from engines.runtime.fallback import HEALTH
from engines.types import CancelToken, DeviceChoice
from tests.reliability.conftest import Recorder
from tests.reliability.genai_faults import ScriptedGenai
from tests.unit.fake_ort import directml_laptop, snapdragon
from tests.unit.tiny_models import colour_classifier

CATEGORY = "Faults"
OPS = ("GlobalAveragePool", "Flatten", "Gemm")


# --- a device lost mid-run ------------------------------------------------------------------------------


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(20):
        Image.new("RGB", (32, 32), (240, 10, 10)).save(folder / f"p{i:02d}.png")
    return folder


@pytest.fixture
def fake_runtime() -> Iterator[None]:
    yield
    runtime.use_fake(None)
    registration.reset_registrations()
    HEALTH.reset()


def _contract(session: object, spec: object) -> object:
    from engines.vision.classifier import _Contract

    return _Contract("pixels", "scores", np.float32, None)


DEVICE_FAULTS: list[tuple[str, str, str, str, str]] = [
    # (case, --device, failing EP, native error text, words the user must see)
    ("GPU removed on the 3rd batch (DirectML 0x887A0005)", "gpu", "DmlExecutionProvider",
     "DirectML: DXGI_ERROR_DEVICE_REMOVED (0x887A0005)", "0x887A0005"),
    ("GPU hangs mid-run (DirectML 0x887A0006)", "gpu", "DmlExecutionProvider",
     "D3D12 device hung: DXGI_ERROR_DEVICE_HUNG 887A0006", "0x887A0006"),
    ("NPU device error mid-run (QNN transport error)", "npu", "QNNExecutionProvider",
     "QNN_DEVICE_ERROR: fastrpc transport error", "NPU driver reported a device error"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "device", "ep", "native", "words"), DEVICE_FAULTS, ids=[d[0] for d in DEVICE_FAULTS])
@pytest.mark.parametrize("strict", [False, True], ids=["fallback", "strict"])
def test_a_device_lost_mid_run_moves_the_work_or_stops_clearly(
    name: str,
    device: str,
    ep: str,
    native: str,
    words: str,
    strict: bool,
    photos: Path,
    tmp_path: Path,
    fake_runtime: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:
    calls: list[str] = []

    def infer(self: Any, batch: np.ndarray) -> np.ndarray:
        calls.append(self.placement.primary_ep)
        if self.placement.primary_ep == ep and len(calls) >= 3:
            raise RuntimeError(native)
        return np.tile([[5.0, 0.0, 0.0, 0.0]], (batch.shape[0], 1))

    monkeypatch.setattr("engines.vision.classifier.ImageClassifier.infer", infer)
    monkeypatch.setattr("engines.vision.classifier.check_contract", _contract)
    monkeypatch.setattr("engines.vision.classifier.ImageClassifier._warmup", lambda self: 0.0)
    monkeypatch.setattr("engines.vision.classifier.IOBINDING_EPS", set())
    supported = {"CPUExecutionProvider": None, ep: set(OPS)}
    laptop = directml_laptop if ep == "DmlExecutionProvider" else snapdragon
    fake = laptop(graph_ops=OPS, supported_ops=supported)
    runtime.use_fake(fake)
    registration.reset_registrations()
    model = colour_classifier(tmp_path / "colours")
    args = ["classify", str(photos), "--model", str(model), "--device", device, "--json"]
    code = run([*args, "--strict"] if strict else args)
    captured = capsys.readouterr()
    if strict:
        outcome = "\n".join(line for line in captured.err.splitlines() if line.startswith("npu-studio:"))
        reliability.record(CATEGORY, f"{name}, strict mode", "stops with a clear error; no silent move", outcome)
        assert code == 2 and words in outcome and len(outcome.splitlines()) == 1
        return
    out = json.loads(captured.out)
    labels = [r["top"][0]["label"] for r in out["results"] if not r["error"]]
    notice = next(line for line in captured.err.splitlines() if line.startswith("npu-studio:") and words in line)
    first = calls[0]
    now = out["placement"]["active_eps"][0]
    outcome = f"started on {first}; {len(labels)}/20 photos classified, ending on {now}; notice: {notice}"
    reliability.record(CATEGORY, name, "the device is marked failed; the work goes on on the CPU; a notice", outcome)
    assert code == 0 and labels == ["red"] * 20 and first == ep
    assert out["placement"]["active_eps"] == ["CPUExecutionProvider"]
    assert HEALTH.is_failed(ep)


# --- a generator error mid-answer ------------------------------------------------------------------------


@pytest.fixture
def real_genai_after() -> Iterator[None]:
    yield
    use_fake_genai(None)


GENERATOR_FAULTS: list[tuple[str, BaseException, str]] = [
    ("generator error mid-answer (a native runtime error)",
     RuntimeError("Non-zero status code returned while running GroupQueryAttention node. Status: FAIL"),
     "Generation failed"),
    ("out of memory mid-answer", RuntimeError("std::bad_alloc: Failed to allocate memory for the KV cache"),
     "ran out of memory"),
    ("GPU removed mid-answer", RuntimeError("DML: DXGI_ERROR_DEVICE_REMOVED 887A0005"), "0x887A0005"),
]  # fmt: skip


def _consistent(conversation: Conversation) -> None:
    """The transcript alternates user/assistant and the generator holds exactly what the engine thinks
    (checked holding the conversation's lock: no turn runs meanwhile)."""
    with conversation._lock:
        roles = [m.role for m in conversation.messages]
        assert roles == ["user", "assistant"] * (len(roles) // 2), roles
        generator = conversation._generator
        if generator is not None:
            assert [int(t) for t in generator.get_sequence(0)] == conversation._held.tokens
        assert conversation.context_used <= conversation.context_length


@pytest.mark.parametrize(("name", "error", "words"), GENERATOR_FAULTS, ids=[g[0] for g in GENERATOR_FAULTS])
def test_a_generator_error_mid_answer_keeps_the_partial_answer_and_the_next_turn_works(
    name: str,
    error: BaseException,
    words: str,
    tiny_llm: Path,
    real_genai_after: None,
    reliability: Recorder,
) -> None:
    og = ScriptedGenai(genai(), error=error, fail_at=6)
    use_fake_genai(og)
    model = ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"))
    conversation = model.new_conversation(options=ChatOptions(max_new_tokens=16))
    streamed: list[str] = []
    with pytest.raises(GenerationFailedError) as caught:
        conversation.send("Tell me about the sea.", on_text=streamed.append)
    failed = caught.value
    last = conversation.messages[-1]
    og.armed = False
    after = conversation.send("And the mountains?")
    outcome = (
        f"{failed.user_text()} Partial answer kept ({failed.stats.generated_tokens} tokens, stop reason "
        f"{last.stop_reason}); next turn: stop reason {after.stop_reason}"
    )
    reliability.record(
        CATEGORY, name, "a clear error; the partial answer kept, stats say error; the next turn works", outcome
    )
    assert words in failed.message and failed.hint
    assert isinstance(failed, GenerationError)
    assert last.role == "assistant" and last.stop_reason == StopReason.ERROR
    assert last.content == failed.partial_text == "".join(streamed)
    assert failed.stats.stop_reason == StopReason.ERROR and failed.stats.generated_tokens == 5
    assert after.stop_reason in (StopReason.LENGTH, StopReason.EOS) and after.generated_tokens > 0
    assert [m.role for m in conversation.messages] == ["user", "assistant", "user", "assistant"]
    assert conversation.messages[1].content == failed.partial_text  # the model saw what the user saw
    _consistent(conversation)


# --- cancel storms -----------------------------------------------------------------------------------------


def test_a_cancel_storm_from_another_thread_leaves_the_conversation_consistent(
    tiny_llm: Path, reliability: Recorder
) -> None:
    """300 turns (send, regenerate, edit); another thread cancels each at a random moment (before it
    starts, during the prefill, mid-answer, or never) and sends into the conversation while it answers."""
    model = ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"))
    conversation = model.new_conversation(options=ChatOptions(max_new_tokens=12))
    rng = random.Random(9)
    turns = 300
    current: list[CancelToken] = []
    stop = threading.Event()
    started = threading.Event()  # a turn was asked for
    streaming = threading.Event()  # its answer is being written
    refused: list[str] = []
    unexpected: list[BaseException] = []

    def storm() -> None:
        while not stop.is_set():
            if not started.wait(0.05):
                continue
            started.clear()
            token = current[-1]
            time.sleep(rng.choice([0, 0, 0.0005, 0.002, 0.005, 0.02, 0.05]))
            if rng.random() < 0.8:
                token.cancel()
            if not streaming.is_set():
                continue
            try:
                conversation.send("a message from another thread")
            except GenerationError as exc:
                refused.append(exc.message)
            except BaseException as exc:  # anything else is a bug
                unexpected.append(exc)

    def on_text(piece: str) -> None:
        streaming.set()

    other = threading.Thread(target=storm, name="cancel-storm")
    other.start()
    reasons: dict[str, int] = {}
    busy_retries = 0
    try:
        for i in range(turns):
            token = CancelToken()
            current.append(token)
            if rng.random() < 0.1:
                token.cancel()  # cancelled before it even starts
            action = rng.random()
            started.set()
            while True:
                try:
                    if action < 0.8 or not conversation.messages:
                        stats = conversation.send(f"message {i}", on_text, token)
                    elif action < 0.9:
                        stats = conversation.regenerate(on_text, token)
                    else:
                        stats = conversation.edit_last(f"edited {i}", on_text, token)
                    break
                except GenerationError as exc:  # the other thread's message got in first: wait for it
                    assert "busy" in exc.message, exc.message
                    busy_retries += 1
                    time.sleep(0.002)
                finally:
                    streaming.clear()
            reasons[stats.stop_reason.value] = reasons.get(stats.stop_reason.value, 0) + 1
            assert stats.stop_reason in (StopReason.CANCELLED, StopReason.LENGTH, StopReason.EOS, StopReason.CONTEXT)
            _consistent(conversation)
            if i % 60 == 59:
                conversation.reset()
    finally:
        stop.set()
        other.join(10)
    final = conversation.send("Are you still there?")
    _consistent(conversation)
    reliability.measure(
        "cancel storm (engine)",
        f"{turns} turns: {reasons}; {len(refused)} sends from the other thread refused as busy, "
        f"{busy_retries} of this thread's turns waited for one of its sends",
    )
    reliability.record(
        CATEGORY,
        f"cancel storm: {turns} turns, each cancelled at a random moment from another thread, which also sends",
        "every turn ends (cancelled, length, eos or context); transcript and generator stay in step; "
        "a send into a conversation that is answering is refused",
        f"all {turns} turns ended cleanly; a send while answering is refused with: "
        f"'{refused[0] if refused else '-'}'; the next turn after the storm: stop reason {final.stop_reason}",
    )
    assert not unexpected and not other.is_alive()
    assert refused and all("busy" in message for message in refused)
    assert sum(reasons.values()) == turns
    assert reasons.get("cancelled", 0) > 50 and reasons.get("length", 0) + reasons.get("eos", 0) > 10
    assert final.stop_reason in (StopReason.LENGTH, StopReason.EOS)
