"""The bounds on the chat engine's child process (engines/chat/bounds.py) and the render reports they rely on."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from engines.chat import bounds as chat_bounds
from engines.chat.generation import observe_renders, render_prompt
from engines.chat.types import ChatMessage
from engines.errors import GenerationError, ModelError


class _Tokenizer:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail

    def apply_chat_template(self, payload: str, add_generation_prompt: bool) -> str:
        if self.fail is not None:
            raise self.fail
        return "|".join(turn["content"] for turn in json.loads(payload))


@pytest.fixture
def reports() -> Any:
    seen: list[tuple[str, int]] = []
    observe_renders(lambda phase, characters: seen.append((phase, characters)))
    yield seen
    observe_renders(None)


def test_every_render_is_reported_before_and_after(reports: list[tuple[str, int]]) -> None:
    assert render_prompt(_Tokenizer(), "sys", [ChatMessage("user", "hello")]) == "sys|hello"
    assert [phase for phase, _ in reports] == ["rendering", "rendered"]
    assert reports[0][1] == len(
        json.dumps([{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}])
    )


def test_a_render_that_fails_is_reported_as_ended_too(reports: list[tuple[str, int]]) -> None:
    with pytest.raises(GenerationError):
        render_prompt(_Tokenizer(RuntimeError("undefined variable")), "", [ChatMessage("user", "hi")])
    assert [phase for phase, _ in reports] == ["rendering", "rendered"]


@pytest.mark.parametrize("fail", [RuntimeError("std::bad_alloc at row 1, column 7"), MemoryError()])
def test_a_render_out_of_memory_calls_the_folder_unsafe(fail: BaseException) -> None:
    with pytest.raises(ModelError, match="ran out of memory .* unsafe"):
        render_prompt(_Tokenizer(fail), "", [ChatMessage("user", "hi")])


def test_no_observer_no_report() -> None:
    observe_renders(None)
    assert render_prompt(_Tokenizer(), "", [ChatMessage("user", "x")]) == "x"


def test_the_render_bound_grows_with_the_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPU_STUDIO_RENDER_SECONDS", raising=False)
    assert chat_bounds.render_seconds(0) == chat_bounds.RENDER_BASE_S
    assert chat_bounds.render_seconds(200_000) == chat_bounds.RENDER_BASE_S + 10
    monkeypatch.setenv("NPU_STUDIO_RENDER_SECONDS", "2")
    assert chat_bounds.render_seconds(20_000) == 3
    monkeypatch.setenv("NPU_STUDIO_RENDER_SECONDS", "soon")
    assert chat_bounds.render_seconds(0) == chat_bounds.RENDER_BASE_S


def test_the_errors_name_what_happened() -> None:
    timeout = chat_bounds.render_timeout_error(12.4).user_text()
    assert "did not finish rendering in 12 s" in timeout and "unsafe" in timeout
    crashed = chat_bounds.died_error(-signal.SIGSEGV, rendering=True)
    assert isinstance(crashed, ModelError) and "crashed the chat engine (SIGSEGV)" in crashed.user_text()
    other = chat_bounds.died_error(1, rendering=False)
    assert not isinstance(other, ModelError) and "exit code 1" in other.user_text()


def _genai_folder(folder: Path, config: Any, weights: int) -> Path:
    folder.mkdir()
    (folder / "genai_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "model.onnx.data").write_bytes(b"\0" * weights)
    return folder


def test_the_memory_bound_counts_weights_and_the_full_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPU_STUDIO_CHAT_MEMORY", raising=False)
    monkeypatch.setattr(chat_bounds, "_mapped_bytes", lambda: 0)
    config = {"model": {"context_length": 1024, "decoder": {"num_hidden_layers": 2, "num_key_value_heads": 2,
                                                              "head_size": 64}}}  # fmt: skip
    folder = _genai_folder(tmp_path / "m", config, 1000)
    size = (folder / "genai_config.json").stat().st_size + 1000
    kv = 2 * 1024 * 2 * 2 * 64 * 4
    assert chat_bounds.memory_bound(folder) == 2 * size + 2 * kv + chat_bounds.MEMORY_MARGIN
    hostile = _genai_folder(tmp_path / "h", {"model": {"context_length": "a lot"}}, 10)
    assert chat_bounds.memory_bound(hostile) == 2 * (hostile / "genai_config.json").stat().st_size + 20 + (
        chat_bounds.MEMORY_MARGIN
    )
    monkeypatch.setenv("NPU_STUDIO_CHAT_MEMORY", "12345")
    assert chat_bounds.memory_bound(folder) == 12345
