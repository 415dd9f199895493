"""The app's chat host with a user model whose chat template misbehaves only on one word: the render runs
in the chat engine's child process, so a crash or a render past its bound is the host's `failed` with a
readable reason, the app lives, and the user can load another model and go on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from app.hosts.chat import ChatHost
from engines.types import DeviceChoice
from tests.reliability.conftest import Recorder
from tests.reliability.test_model_code import chat_folder
from tests.reliability.test_template_bounds import NAMES, RENDER_SECONDS, TRIGGER, WORDS, trigger_template

CATEGORY = "Model code"
TIMEOUT = 60_000
CPU = DeviceChoice.parse("cpu")


@pytest.mark.parametrize("kind", ["crash", "loop"])
def test_the_chat_view_gets_an_error_and_goes_on_with_another_model(
    kind: str, qtbot: Any, demo_chat_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    reliability: Recorder,
) -> None:  # fmt: skip
    monkeypatch.setenv("NPU_STUDIO_RENDER_SECONDS", str(RENDER_SECONDS))
    folder = chat_folder(demo_chat_model, tmp_path / f"{kind}-llm", trigger_template(demo_chat_model, kind))
    host = ChatHost()
    try:
        with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
            host.load(folder, CPU)
        with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT):
            host.generate("send", 1, "hi", [], "", {"max_new_tokens": 2})
        started = time.monotonic()
        with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
            host.generate("send", 1, TRIGGER, [("user", "hi"), ("assistant", "Hello")], "", {"max_new_tokens": 2})
        elapsed = time.monotonic() - started
        message = failed.args[0].user_text()
        reliability.record(CATEGORY, f"the app's chat view: a template that {NAMES[kind]} on the word '{TRIGGER}'",
                           "an error in the view; the app lives; another model loads", message)  # fmt: skip
        assert WORDS[kind] in message and "unsafe" in message
        assert elapsed < RENDER_SECONDS + 15
        good = chat_folder(demo_chat_model, tmp_path / "good-llm")
        with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
            host.load(good, CPU)
        with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT) as finished:
            host.generate("send", 2, TRIGGER, [], "", {"max_new_tokens": 2})
        assert finished.args[0]["generated_tokens"] >= 1
    finally:
        assert host.shutdown(), "the chat host did not stop"
