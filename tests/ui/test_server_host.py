"""The app's server answers with the chat host's loaded model, one model for the window and the clients
outside, in every order: the server started first (it has the chat host load the window's model, once, and
requests wait for it), the chat model loaded first, "Start with the app", and the window's model switched
while serving (the server follows). Closing the app stops the server first: an in-flight stream ends with
an error event, the port closes, no thread of it is left."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import engines
from app.hosts.server import ServerHost
from engines.chat.requests import ChatRequest
from engines.types import DeviceChoice
from tests.fixtures.scripted_chat import ScriptedChatModel

TIMEOUT = 60_000
MODEL = "smollm2-135m-instruct"  # the settings' chat model: the window loads it, the server serves it


class CountingLoader:
    """The chat host's model loads, counted: one model for the window and the server means one load."""

    def __init__(self, delay: float = 0.0) -> None:
        self.loads: list[str] = []
        self.delay = delay

    def __call__(self, folder: Path, choice: DeviceChoice) -> ScriptedChatModel:
        self.loads.append(folder.name)
        return ScriptedChatModel(delay=self.delay)


def ask(url: str, model: str = MODEL, **fields: Any) -> httpx.Response:
    body = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hello:3"}]} | fields
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)


def serve(qtbot: Any, host: ServerHost) -> str:
    with qtbot.waitSignal(host.started, timeout=TIMEOUT) as started:
        host.serve(0, "")
    return str(started.args[0])


def served_service(host: ServerHost) -> Any:
    backend = host.worker.backend
    return backend.service if backend is not None else None


def server_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("npu-studio-serve")]


def test_started_first_the_server_has_the_window_load_its_model_once_and_requests_wait_for_it(
    make_studio: Callable[..., Any], qtbot: Any
) -> None:
    loader = CountingLoader()
    studio = make_studio(chat_loader=loader)
    url = serve(qtbot, studio.server)
    answer = ask(url)  # sent at once: it waits for the model the chat host loads
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "hello0 hello1 hello2 "
    assert loader.loads == [MODEL]
    assert served_service(studio.server) is studio.chat.service is not None
    qtbot.waitUntil(lambda: bool(studio.chat_view.status.info), timeout=TIMEOUT)  # the window has it too


def test_loaded_first_the_window_model_is_served_and_not_loaded_again(
    make_studio: Callable[..., Any], qtbot: Any
) -> None:
    loader = CountingLoader()
    studio = make_studio(chat_loader=loader)
    with qtbot.waitSignal(studio.chat.model_loaded, timeout=TIMEOUT):
        studio.load_chat_model()
    url = serve(qtbot, studio.server)
    assert ask(url).status_code == 200
    assert loader.loads == [MODEL] and served_service(studio.server) is studio.chat.service


def test_started_with_the_app_there_is_still_one_model(make_studio: Callable[..., Any], qtbot: Any) -> None:
    from app.storage.settings import load_settings, save_settings

    settings, _ = load_settings()
    settings.serve_on_start, settings.serve_port = True, 0
    save_settings(settings)
    loader = CountingLoader()
    studio = make_studio(chat_loader=loader, preload=True)
    studio.window.show()
    qtbot.waitUntil(lambda: studio.server.running and studio.chat.service is not None, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: served_service(studio.server) is studio.chat.service, timeout=TIMEOUT)
    assert ask(studio.server.url).status_code == 200
    assert loader.loads == [MODEL], "the server and the window each loaded the model"


def test_the_server_follows_the_model_the_window_switches_to(
    make_studio: Callable[..., Any], qtbot: Any, tmp_path: Path
) -> None:
    loader = CountingLoader()
    studio = make_studio(chat_loader=loader)
    url = serve(qtbot, studio.server)
    assert ask(url).status_code == 200
    other = tmp_path / "other-llm"
    other.mkdir()
    with qtbot.waitSignal(studio.server.model_ready, timeout=TIMEOUT, check_params_cb=lambda name, _: bool(name)):
        studio.chat.load(other, DeviceChoice.parse("cpu"))
    assert loader.loads == [MODEL, "other-llm"]
    assert served_service(studio.server) is studio.chat.service
    cards = {card["id"]: card for card in httpx.get(f"{url}/v1/models", timeout=30).json()["data"]}
    assert cards["other-llm"]["loaded"] is True and cards[MODEL]["loaded"] is False
    assert ask(url, "other-llm").status_code == 200
    refused = ask(url, MODEL)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "model"


def test_closing_the_app_ends_a_stream_with_an_error_and_stops_the_server_first(
    make_studio: Callable[..., Any], qtbot: Any
) -> None:
    loader = CountingLoader(delay=0.02)
    studio = make_studio(chat_loader=loader)
    url = serve(qtbot, studio.server)
    port = int(url.rsplit(":", 1)[1])
    lines: list[str] = []
    streaming = threading.Event()

    def read() -> None:
        body = {"model": MODEL, "max_tokens": 400, "stream": True,
                "messages": [{"role": "user", "content": "story:400"}]}
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as response:
            for line in response.iter_lines():
                if line:
                    lines.append(line.removeprefix("data: "))
                    streaming.set()

    reader = threading.Thread(target=read)
    reader.start()
    qtbot.waitUntil(streaming.is_set, timeout=TIMEOUT)  # the event loop runs: the window may still load the model
    assert studio.busy(), "an answer streaming to a client keeps the app busy"
    assert studio.shutdown()
    reader.join(30)
    assert lines[-1] == "[DONE]" and json.loads(lines[-2])["error"]["code"] == "shutting_down"
    assert len(lines) < 400, "the answer was not stopped"
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    assert not server_threads(), server_threads()
    assert not studio.server.qthread.isRunning()


class ChatHostLike:
    """The chat host's side the server sees: the loaded service, and followers told when it changes."""

    loading = False

    def __init__(self, service: object) -> None:
        self.service = service
        self.followers: list[Callable[[Any], None]] = []

    def follow(self, follower: Callable[[Any], None]) -> None:
        self.followers.append(follower)

    def change(self, service: object) -> None:
        """Another model loaded (None: none), told from a thread of the chat host's own, not the GUI's."""
        self.service = service
        worker = threading.Thread(target=lambda: [follow(service) for follow in self.followers])
        worker.start()
        worker.join()


def test_the_app_server_shares_a_real_model_and_leaves_it_loaded(qtbot, demo_chat_model: Path) -> None:  # type: ignore[no-untyped-def]
    service = engines.open_chat(demo_chat_model, "cpu")
    chat = ChatHostLike(service)
    host = ServerHost(demo_chat_model, DeviceChoice.parse("cpu"), chat)  # type: ignore[arg-type]
    try:
        url = serve(qtbot, host)
        assert served_service(host) is service and not host.worker.backend.owns_service
        answer = ask(url, service.info.name)
        assert answer.status_code == 200 and answer.headers["X-NPU-Studio-Device"] == "CPU"
        with qtbot.waitSignal(host.model_ready, timeout=5000):
            chat.change(None)  # the chat host has no model for now, and loads none: requests hear so
        none = ask(url, service.info.name)
        assert none.status_code == 503 and none.json()["error"]["code"] == "model_unloaded"
        with qtbot.waitSignal(host.model_ready, timeout=5000) as ready:
            chat.change(service)  # the chat host loaded a model: the server follows it
        assert ready.args[0] == service.info.name
        with qtbot.waitSignal(host.stopped, timeout=30000):
            host.stop()
        assert service.generate(ChatRequest.send([], "Hi")).text  # the window's chat still has its model
    finally:
        assert host.shutdown()
        service.close()
