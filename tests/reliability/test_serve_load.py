"""`npu-studio serve` under load and faults, with the real demo model in its engine child: 200 mixed
requests from 8 clients, a quarter of them leaving mid-stream, with resources flat and nothing left
generating; and the engine child killed during a request."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.fixtures.serve import ServeProcess

MODEL = "smollm2-135m-instruct"
CLIENTS = 8
PER_CLIENT = 25
PROMPTS = ["What is the capital of France?", "Name a colour.", "Say hello.", "What is 2 + 2?",
           "Write one word about the sea."]


@pytest.fixture(scope="module")
def server(demo_chat_model: Path) -> Iterator[ServeProcess]:
    with ServeProcess(["--model", MODEL, "--device", "cpu"]) as process:
        yield process


def _ask(rng: random.Random) -> dict[str, object]:
    return {"model": MODEL, "max_tokens": rng.randint(2, 6), "temperature": 0,
            "messages": [{"role": "user", "content": rng.choice(PROMPTS)}]}


def _whole(http: httpx.Client, rng: random.Random) -> str:
    response = http.post("/chat/completions", json=_ask(rng))
    assert response.status_code == 200, response.text
    data = response.json()
    usage = data["usage"]
    assert data["choices"][0]["finish_reason"] in ("stop", "length")
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert response.headers["X-NPU-Studio-Device"] == "CPU"
    return "whole"


def _stream(http: httpx.Client, rng: random.Random, leave: bool) -> str:
    body = _ask(rng) | {"stream": True, "stream_options": {"include_usage": True}}
    if leave:
        body["max_tokens"] = 200
    with http.stream("POST", "/chat/completions", json=body) as response:
        assert response.status_code == 200
        events = []
        for line in response.iter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            events.append(line[6:])
            if leave and len(events) >= 2:
                return "left"  # the client goes away mid-answer
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert not any("error" in c for c in chunks), chunks
    assert chunks[-1]["usage"]["completion_tokens"] >= 1
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    return "stream"


def _resources(pid: int) -> tuple[float, int, int]:
    """(RSS MB, threads, open files) of the server and its engine child together."""
    processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    rss = sum(p.memory_info().rss for p in processes) / 1e6
    return rss, sum(p.num_threads() for p in processes), sum(p.num_fds() for p in processes)


def _busy(server: ServeProcess) -> int:
    return int(httpx.get(f"{server.url}/health", timeout=10).json()["busy"])


def test_200_mixed_requests_from_8_clients_a_quarter_leaving_mid_stream(server: ServeProcess) -> None:
    outcomes: list[str] = []
    failures: list[BaseException] = []
    warm = threading.Event()

    def client(index: int) -> None:
        rng = random.Random(index)
        with httpx.Client(base_url=server.base_url, timeout=120) as http:
            for n in range(PER_CLIENT):
                kind = (index * PER_CLIENT + n) % 4  # 0: leaves mid-stream, 1: streams, 2-3: whole answers
                try:
                    outcomes.append(_stream(http, rng, leave=True) if kind == 0 else
                                    _stream(http, rng, leave=False) if kind == 1 else _whole(http, rng))
                except BaseException as exc:
                    failures.append(exc)
                if index == 0 and n == 4:
                    warm.set()

    for _ in range(3):  # warm: the engine child's first answers allocate what later ones reuse
        _whole(httpx.Client(base_url=server.base_url, timeout=120), random.Random(0))
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    warm.wait(120)
    before = _resources(server.process.pid)
    for thread in threads:
        thread.join(600)
    elapsed = time.monotonic() - started
    assert not failures, failures[:3]
    assert len(outcomes) == CLIENTS * PER_CLIENT
    assert outcomes.count("left") == CLIENTS * PER_CLIENT // 4
    deadline = time.monotonic() + 10
    while _busy(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _busy(server) == 0, "a generation is still running after every client finished or left"
    after = _resources(server.process.pid)
    assert after[0] - before[0] < 60, (before, after)  # RSS, MB
    assert after[1] <= before[1] + 2, (before, after)  # threads
    assert after[2] <= before[2] + 4, (before, after)  # open files
    print(f"200 requests in {elapsed:.1f} s; RSS {before[0]:.0f} -> {after[0]:.0f} MB, threads {before[1]} -> "
          f"{after[1]}, files {before[2]} -> {after[2]}")


def test_an_engine_child_killed_during_a_request_ends_it_with_an_error_and_the_next_one_works(
    server: ServeProcess,
) -> None:
    body = {"model": MODEL, "max_tokens": 300, "stream": True,
            "messages": [{"role": "user", "content": "Write a long story about a dragon."}]}
    events: list[str] = []
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        with http.stream("POST", "/chat/completions", json=body) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if not line:
                    continue
                events.append(line[6:])
                if len(events) == 3:
                    children = psutil.Process(server.process.pid).children(recursive=True)
                    engine = max(children, key=lambda p: p.memory_info().rss)
                    engine.kill()
        assert events[-1] == "[DONE]"
        error = json.loads(events[-2])["error"]
        assert error["type"] == "server_error" and "engine" in error["message"].lower(), error
        again = http.post("/chat/completions", json={"model": MODEL, "max_tokens": 8, "messages": [
            {"role": "user", "content": "What is the capital of France?"}]})
        assert again.status_code == 200, again.text
        assert again.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize("kind", ["crash", "loop"])
def test_a_user_models_template_that_misbehaves_on_one_message_fails_that_request_and_the_server_goes_on(
    kind: str, demo_chat_model: Path, tmp_path: Path
) -> None:
    from tests.reliability.test_model_code import chat_folder
    from tests.reliability.test_template_bounds import RENDER_SECONDS, TRIGGER, WORDS, trigger_template

    folder = chat_folder(demo_chat_model, tmp_path / f"{kind}-llm", trigger_template(demo_chat_model, kind))
    env = {"NPU_STUDIO_RENDER_SECONDS": str(RENDER_SECONDS), "NPU_STUDIO_TRIAL_SECONDS": "60",
           "NPU_STUDIO_HOME": str(tmp_path / "home")}
    with ServeProcess(["--model", str(folder), "--device", "cpu"], env=env) as served, httpx.Client(
        base_url=served.base_url, timeout=120
    ) as http:
        def ask(text: str) -> httpx.Response:
            return http.post("/chat/completions", json={"model": folder.name, "max_tokens": 4,
                                                        "messages": [{"role": "user", "content": text}]})

        started = time.monotonic()
        bad = ask(TRIGGER)
        assert bad.status_code >= 500 and set(bad.json()) == {"error"}, bad.text
        assert WORDS[kind] in bad.json()["error"]["message"]
        assert time.monotonic() - started < RENDER_SECONDS + 30
        after = ask("Hi")  # the engine dropped the unsafe model: every later request says so
        assert after.status_code == 503 and after.json()["error"]["code"] == "model_unloaded", after.text
        card = httpx.get(f"{served.base_url}/models/{folder.name}", timeout=10).json()
        assert card["loaded"] is False
        assert httpx.get(f"{served.url}/health", timeout=10).status_code == 200
