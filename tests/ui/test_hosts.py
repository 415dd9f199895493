"""Engine hosts: real engines (devices, the demo classifier, the tiny genai model) and fakes at the
host boundary; signals in strict order, cancel, errors as `failed`, coalesced text, clean shutdown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.hosts.chat import ChatHost
from app.hosts.devices import DevicesHost
from app.hosts.jobs import Host
from app.hosts.vision import VisionHost
from engines.chat.bounded import BoundedChat
from engines.chat.local import LocalChat
from engines.chat.session import TextCoalescer
from engines.errors import ImageError, StudioError
from engines.types import DeviceChoice, DeviceType
from tests.ui.conftest import SAMPLES
from tests.ui.fakes import FakeChatModel, FakeClassifier, loader_for, opener_for

TIMEOUT = 120_000


def named(host: Host, *names: str) -> list[tuple[Any, str]]:
    """Signals with their names, so that pytest-qt records every emission in order."""
    return [(getattr(host, name), name) for name in names]


@pytest.fixture
def hosts() -> Iterator[list[Host]]:
    made: list[Host] = []
    yield made
    for host in made:
        assert host.shutdown(), f"{host.qthread.objectName()} did not stop"


def test_coalescer_limits_updates_and_keeps_every_character() -> None:
    now = [0.0]
    out: list[str] = []
    coalescer = TextCoalescer(out.append, rate=60, clock=lambda: now[0])
    for i in range(1000):  # 1000 tokens in one second
        now[0] = i / 1000
        coalescer.push(str(i % 10))
    coalescer.flush()
    assert "".join(out) == "".join(str(i % 10) for i in range(1000))
    assert len(out) <= 62  # at most 60 a second, plus the first and the final flush


def test_devices_host_reports_the_cpu(qtbot: Any, hosts: list[Host]) -> None:
    host = DevicesHost()
    hosts.append(host)
    with qtbot.waitSignals(
        named(host, "status", "devices_found", "status"), order="strict", timeout=TIMEOUT
    ) as blocker:
        host.discover()
    report = blocker.all_signals_and_args[1].args[0]
    assert any(d.usable and d.type == DeviceType.CPU for d in report.devices)
    assert blocker.all_signals_and_args[2].args[0] == ""  # idle again


def test_vision_host_classifies_a_real_photo(qtbot: Any, hosts: list[Host], demo_classifier: Path) -> None:
    host = VisionHost()
    hosts.append(host)
    signals = named(host, "model_loaded", "started", "classified", "progress", "finished")
    with qtbot.waitSignals(signals, order="strict", timeout=TIMEOUT) as blocker:
        host.classify([str(SAMPLES / "chelsea.png")], demo_classifier, DeviceChoice(), k=5)
    result = blocker.all_signals_and_args[2].args[0]
    assert not result.error
    assert len(result.top) == 5
    assert "cat" in result.top[0].label or result.top[0].label == "tabby"
    assert result.placement is not None and "CPU" in result.placement.badge()
    # the session is made once per model x device choice and reused
    with qtbot.waitSignals(named(host, "started", "classified", "finished"), order="strict", timeout=TIMEOUT):
        host.classify([str(SAMPLES / "coffee.png")], demo_classifier, DeviceChoice())
    assert host.worker.session_count == 1


def test_vision_host_reports_a_bad_photo_and_bad_bytes(
    qtbot: Any, hosts: list[Host], demo_classifier: Path, tmp_path: Path
) -> None:
    host = VisionHost()
    hosts.append(host)
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with qtbot.waitSignals(named(host, "classified", "finished"), order="strict", timeout=TIMEOUT) as blocker:
        host.classify([str(bad)], demo_classifier, DeviceChoice())
    result = blocker.all_signals_and_args[0].args[0]
    assert result.error and result.top == ()
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
        host.classify_bytes(b"definitely not an image", "clip", demo_classifier, DeviceChoice())
    assert isinstance(failed.args[0], ImageError)


def test_vision_host_missing_model_is_a_readable_failure(qtbot: Any, hosts: list[Host], tmp_path: Path) -> None:
    host = VisionHost()
    hosts.append(host)
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
        host.classify([str(SAMPLES / "chelsea.png")], tmp_path / "nope", DeviceChoice())
    error = failed.args[0]
    assert isinstance(error, StudioError) and "manifest" in error.message


def test_vision_host_cancels_a_batch(qtbot: Any, hosts: list[Host]) -> None:
    classifier = FakeClassifier(delay=0.02)
    host = VisionHost(opener_for(lambda folder, choice: classifier))
    hosts.append(host)
    paths = [str(SAMPLES / "chelsea.png")] * 50
    with qtbot.waitSignals(named(host, "started", "classified"), order="strict", timeout=TIMEOUT):
        host.classify(paths, "fake", DeviceChoice())
    with qtbot.waitSignal(host.cancelled, timeout=TIMEOUT) as cancelled:
        host.cancel()
    assert 1 <= cancelled.args[0] < 50
    assert classifier.calls < 50


@pytest.mark.allow_warnings("a chat turn failed")
def test_unexpected_exception_becomes_failed(qtbot: Any, hosts: list[Host]) -> None:
    model = FakeChatModel(error=RuntimeError("boom"))
    host = ChatHost(loader=loader_for(model))
    hosts.append(host)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load("fake-model", DeviceChoice())
    with qtbot.waitSignals(named(host, "generation_started", "failed"), order="strict", timeout=TIMEOUT) as blocker:
        host.generate("send", 1, "hi", [], "", {})
    error = blocker.all_signals_and_args[1].args[0]
    assert isinstance(error, StudioError)
    assert "RuntimeError: boom" in error.message and "log file" in error.hint


def test_chat_host_streams_in_strict_order(qtbot: Any, hosts: list[Host]) -> None:
    fake_chat = FakeChatModel(pieces=["Hello, **world**!"])  # one piece: one text_generated
    host = ChatHost(loader=loader_for(fake_chat))
    hosts.append(host)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT) as loaded:
        host.load("fake-model", DeviceChoice())
    assert loaded.args[0]["name"] == "fake-model" and loaded.args[0]["context_length"] == 2048
    signals = named(host, "generation_started", "text_generated", "generation_finished")
    with qtbot.waitSignals(signals, order="strict", timeout=TIMEOUT) as blocker:
        host.generate("send", 7, "Hi", [], "Be brief.", {"max_new_tokens": 16})
    stats = blocker.all_signals_and_args[-1].args[0]
    assert stats["text"] == "Hello, **world**!"
    assert stats["stop_reason"] == "eos" and stats["model"] == "fake-model" and stats["ep"] == "CPUExecutionProvider"
    service = host.service
    assert isinstance(service, LocalChat)
    conversation = dict(service._session._kept)[7]  # type: ignore[union-attr]
    assert conversation.system_prompt == "Be brief." and conversation.options.max_new_tokens == 16


def test_chat_host_coalesces_a_fast_stream(qtbot: Any, hosts: list[Host]) -> None:
    model = FakeChatModel(pieces=[f"t{i} " for i in range(3000)])
    host = ChatHost(loader=loader_for(model))
    hosts.append(host)
    texts: list[str] = []
    host.text_generated.connect(texts.append)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load("fake-model", DeviceChoice())
    with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT) as finished:
        host.generate("send", 1, "count", [], "", {})
    qtbot.wait(50)  # the last queued pieces
    assert "".join(texts) == finished.args[0]["text"] == "".join(model.pieces)
    seconds = max(finished.args[0]["total_s"], 0.001)
    assert len(texts) < 3000  # coalesced: far fewer updates than pieces, none lost (the text is whole)
    assert len(texts) <= 60 * (seconds + 1) + 2 or len(texts) < 100


def test_chat_host_cancel_mid_answer(qtbot: Any, hosts: list[Host]) -> None:
    model = FakeChatModel(pieces=["word "] * 500, delay=0.01)
    host = ChatHost(loader=loader_for(model))
    hosts.append(host)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load("fake-model", DeviceChoice())
    with qtbot.waitSignals(named(host, "generation_started", "text_generated"), order="strict", timeout=TIMEOUT):
        host.generate("send", 1, "talk", [], "", {})
    with qtbot.waitSignal(host.cancelled, timeout=TIMEOUT) as cancelled:
        host.cancel()
    stats = cancelled.args[0]
    assert stats["stop_reason"] == "cancelled"
    assert 0 < stats["generated_tokens"] < 500
    assert stats["text"] == "word " * stats["generated_tokens"]


def test_chat_host_resumes_a_stored_conversation(qtbot: Any, hosts: list[Host], fake_chat: FakeChatModel) -> None:
    host = ChatHost(loader=loader_for(fake_chat))
    hosts.append(host)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load("fake-model", DeviceChoice())
    history = [("user", "Earlier question"), ("assistant", "Earlier answer")]
    with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT):
        host.generate("send", 3, "Follow-up", history, "", {})
    assert fake_chat.conversations == 1
    assert fake_chat.requests[-1] == ("send", "Follow-up", history)
    # the same conversation goes on with the same generator: the engine is not given a new one
    history2 = [*history, ("user", "Follow-up"), ("assistant", "Hello, **world**!")]
    with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT):
        host.generate("regenerate", 3, "", history2, "", {})
    assert fake_chat.conversations == 1 and fake_chat.requests[-1][0] == "regenerate"


def test_chat_host_send_without_a_model_fails_clearly(qtbot: Any, hosts: list[Host]) -> None:
    host = ChatHost(loader=loader_for(FakeChatModel()))
    hosts.append(host)
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
        host.generate("send", 1, "hello?", [], "", {})
    assert "No chat model is loaded" in failed.args[0].message


def test_chat_host_rejects_bad_options(qtbot: Any, hosts: list[Host], fake_chat: FakeChatModel) -> None:
    host = ChatHost(loader=loader_for(fake_chat))
    hosts.append(host)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load("fake-model", DeviceChoice())
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
        host.generate("send", 1, "hi", [], "", {"temperature": -1.0})
    assert "temperature" in failed.args[0].message


def test_chat_host_on_the_tiny_genai_model(qtbot: Any, hosts: list[Host], tiny_llm: Path) -> None:
    host = ChatHost()
    hosts.append(host)
    statuses: list[str] = []
    host.status.connect(statuses.append)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT) as blocker:
        host.load(tiny_llm, DeviceChoice.parse("cpu"))
    info = blocker.args[0]
    # Not a bundled model: tried once in a bounded process first (unless an earlier test tried it).
    assert [s for s in statuses if s][-1].startswith("Loading ") and all(
        s.startswith(("Trying ", "Loading ")) for s in statuses if s
    )
    assert info["ep"] == "CPUExecutionProvider" and info["default_options"]["max_new_tokens"] > 0
    texts: list[str] = []
    host.text_generated.connect(texts.append)
    signals = named(host, "generation_started", "generation_finished")
    with qtbot.waitSignals(signals, order="strict", timeout=TIMEOUT) as blocker:
        host.generate("send", 1, "Hello there", [], "You are terse.", {"max_new_tokens": 12, "repetition_penalty": 1.0})
    stats = blocker.all_signals_and_args[-1].args[0]
    qtbot.wait(50)
    assert stats["generated_tokens"] >= 1
    assert "".join(texts) == stats["text"]
    assert stats["context_used"] > 0 and stats["context_length"] > 0
    history = [("user", "Hello there"), ("assistant", stats["text"])]
    with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT) as more:  # Continue, in the child process
        host.generate("continue", 1, "", history, "You are terse.", {"max_new_tokens": 4, "repetition_penalty": 1.0})
    assert more.args[0]["text"].startswith(stats["text"]) and more.args[0]["generated_tokens"] >= 1
    with qtbot.waitSignal(host.tokens_counted, timeout=TIMEOUT) as counted:
        host.count_tokens("Hello there, how are you today?")  # a draft, counted by the model's tokenizer
    assert counted.args[0] == "Hello there, how are you today?" and 3 <= counted.args[1] <= 20


def test_shutdown_mid_answer_stops_the_thread(qtbot: Any) -> None:
    model = FakeChatModel(pieces=["x"] * 10_000, delay=0.005)
    host = ChatHost(loader=loader_for(model))
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load("fake-model", DeviceChoice())
    with qtbot.waitSignal(host.text_generated, timeout=TIMEOUT):
        host.generate("send", 1, "go", [], "", {})
    host.generate("send", 1, "queued, must not run", [], "", {})
    assert host.shutdown(timeout_ms=5000)
    assert not host.qthread.isRunning()
    assert [r[1] for r in model.requests] == ["go"]


@pytest.mark.allow_warnings("chat engine process ended unexpectedly")
def test_chat_engine_runs_in_a_child_process_and_survives_its_crash(
    qtbot: Any, hosts: list[Host], tiny_llm: Path
) -> None:
    import os

    host = ChatHost()
    hosts.append(host)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load(tiny_llm, DeviceChoice.parse("cpu"))
    service = host.service
    assert isinstance(service, BoundedChat)
    process = service.engine
    assert process.alive and process.pid != os.getpid()
    options = {"max_new_tokens": 200, "repetition_penalty": 1.0}
    with qtbot.waitSignal(host.text_generated, timeout=TIMEOUT):
        host.generate("send", 1, "Tell me everything", [], "", options)
    with qtbot.waitSignal(host.cancelled, timeout=TIMEOUT) as cancelled:
        host.cancel()
    assert cancelled.args[0]["stop_reason"] == "cancelled"
    # a native crash in the engine ends the child, not the app; the next request restarts it
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
        history = [("user", "Tell me everything"), ("assistant", cancelled.args[0]["text"])]
        host.generate("send", 1, "Again", history, "", options)
        qtbot.waitUntil(lambda: process.alive, timeout=TIMEOUT)
        process._process.kill()
    assert "stopped unexpectedly" in failed.args[0].message
    with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT) as finished:
        host.generate("send", 1, "Hello after the crash", [], "", {"max_new_tokens": 4})
    assert finished.args[0]["generated_tokens"] >= 1
    assert process.alive


def test_closing_mid_answer_ends_the_child_process(qtbot: Any, tiny_llm: Path) -> None:
    host = ChatHost()
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load(tiny_llm, DeviceChoice.parse("cpu"))
    service = host.service
    assert isinstance(service, BoundedChat)
    child = service.engine._process
    with qtbot.waitSignal(host.text_generated, timeout=TIMEOUT):
        host.generate("send", 1, "Go on and on", [], "", {"max_new_tokens": 200, "repetition_penalty": 1.0})
    assert host.shutdown(timeout_ms=5000)
    assert not child.is_alive() and not host.qthread.isRunning()
