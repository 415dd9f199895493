"""Every door to chat (the CLI's `chat`, the app's chat host, the OpenAI-compatible server) opens its model
through the one chat service (engines/chat/opening.py `open_service`) and answers through
`ChatService.generate`: the same class for the same model, decided by the same rule. (In the app, the
server answers with the chat host's own service: tests/ui/test_server_host.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import engines
from engines.chat import opening
from engines.chat.bounded import BoundedChat
from engines.chat.service import ChatService
from engines.types import DeviceChoice

TIMEOUT = 120_000


def _cli(tiny_llm: Path, qtbot: Any) -> None:
    from app.cli import run

    assert run(["chat", "--model", str(tiny_llm), "--device", "cpu", "--prompt", "Hi", "--max-new-tokens", "2"]) == 0


def _app_host(tiny_llm: Path, qtbot: Any) -> None:
    from app.hosts.chat import ChatHost

    host = ChatHost()
    try:
        with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
            host.load(tiny_llm, DeviceChoice.parse("cpu"))
        with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT):
            host.generate("send", 1, "Hi", [], "", {"max_new_tokens": 2})
    finally:
        assert host.shutdown()


def _server(tiny_llm: Path, qtbot: Any) -> None:
    import httpx

    from app.hosts.server import ServerHost

    host = ServerHost(tiny_llm, DeviceChoice.parse("cpu"))  # no chat host: it opens the model as `serve` does
    try:
        with qtbot.waitSignal(host.started, timeout=TIMEOUT) as started:
            host.serve(0, "")
        answer = httpx.post(f"{started.args[0]}/v1/chat/completions", timeout=120, json={
            "model": tiny_llm.name, "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]})
        assert answer.status_code == 200, answer.text
    finally:
        assert host.shutdown()


DOORS: dict[str, Callable[[Path, Any], None]] = {"cli": _cli, "app": _app_host, "server": _server}


def test_every_door_uses_the_one_chat_service(tiny_llm: Path, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: dict[str, list[ChatService]] = {}
    answered: dict[str, int] = {}
    door = [""]
    real_open, real_generate = opening.open_service, ChatService.generate

    def open_service(*args: Any, **kwargs: Any) -> ChatService:
        service = real_open(*args, **kwargs)
        opened.setdefault(door[0], []).append(service)
        return service

    def generate(self: ChatService, *args: Any, **kwargs: Any) -> Any:
        answered[door[0]] = answered.get(door[0], 0) + 1
        return real_generate(self, *args, **kwargs)

    # The app's doors call it through the facade (engines.open_service), the engines' own through their module:
    # the facade first, so that what it restores afterwards is the real function.
    monkeypatch.setattr(engines, "open_service", open_service)
    monkeypatch.setattr(opening, "open_service", open_service)
    monkeypatch.setattr(ChatService, "generate", generate)
    for name, use in DOORS.items():
        door[0] = name
        use(tiny_llm, qtbot)
    assert set(opened) == set(DOORS) and all(answered.get(name) == 1 for name in DOORS), (opened, answered)
    classes = {type(services[0]) for services in opened.values()}
    assert classes == {BoundedChat}, classes  # a model that is not ours: the bounded engine child, for every door
