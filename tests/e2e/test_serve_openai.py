"""`npu-studio serve` as a user runs it, with the real demo chat model, through the official `openai` client
on a loopback port: answers, streams, usage from the model's own tokenizer, stop strings, where it ran,
and every refusal as the client's own exception type."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.fixtures.serve import ServeProcess

pytestmark = pytest.mark.e2e

MODEL = "smollm2-135m-instruct"
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


@pytest.fixture(scope="module")
def server(demo_chat_model: Path) -> Iterator[ServeProcess]:
    with ServeProcess(["--model", MODEL, "--device", "cpu"]) as process:
        yield process


@pytest.fixture
def client(server: ServeProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120) as c:
        yield c


def test_models_lists_the_chat_model_with_its_context_device_and_state(client: openai.OpenAI) -> None:
    models = {m.id: m for m in client.models.list()}
    model = models[MODEL]
    extra = model.model_extra or {}
    # the window the loaded model really holds (its genai_config's max_length), not the model's 8192 maximum
    assert extra["context_length"] == 2048 and extra["device"] == "CPU" and extra["loaded"] is True
    assert extra["npu_studio"]["ep"] == "CPUExecutionProvider"
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_an_answer_says_where_it_ran_and_counts_tokens_exactly(client: openai.OpenAI, demo_chat_model: Path) -> None:
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=QUESTION, max_tokens=40)
    completion = raw.parse()
    answer = completion.choices[0].message.content or ""
    assert "Paris" in answer and completion.choices[0].finish_reason == "stop"
    assert raw.headers["X-NPU-Studio-Device"] == "CPU"
    assert raw.headers["X-NPU-Studio-Placement"] == "CPU"
    assert completion.system_fingerprint and completion.system_fingerprint.endswith("CPU: CPU")
    where = (completion.model_extra or {})["npu_studio"]
    assert where["device"] == "CPU" and where["ep"] == "CPUExecutionProvider" and where["fell_back"] is False
    assert where["source"] == "built in"
    # usage from the model's own tokenizer: the rendered prompt, and the answer's tokens without the end token
    import onnxruntime_genai as og

    tokenizer = og.Tokenizer(og.Model(str(demo_chat_model)))
    prompt = tokenizer.apply_chat_template(json.dumps(QUESTION), add_generation_prompt=True)
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == len(tokenizer.encode(prompt))
    assert completion.usage.completion_tokens == len(tokenizer.encode(answer))
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens


def test_a_stream_gives_the_same_greedy_answer_in_chunks_with_usage(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=40, temperature=0)
    stream = client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=40, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage == whole.usage
    assert all(c.system_fingerprint == whole.system_fingerprint for c in chunks)


def test_max_tokens_ends_with_length_and_a_stop_string_cuts_the_answer(client: openai.OpenAI) -> None:
    short = client.chat.completions.create(model=MODEL, messages=QUESTION, max_completion_tokens=3)
    assert short.choices[0].finish_reason == "length" and short.usage and short.usage.completion_tokens == 3
    cut = client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=40, stop=["Paris"])
    assert cut.choices[0].finish_reason == "stop"
    assert "Paris" not in (cut.choices[0].message.content or "")


def test_a_json_schema_answer_parses_and_follows_the_schema(client: openai.OpenAI) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    completion = client.chat.completions.create(
        model=MODEL, max_tokens=80, messages=[{"role": "user", "content": "Describe Paris as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}},
    )
    answer = json.loads(completion.choices[0].message.content or "")
    assert set(answer) == {"city", "population"}
    assert isinstance(answer["city"], str) and isinstance(answer["population"], int)
    anything = client.chat.completions.create(model=MODEL, max_tokens=60, messages=QUESTION,
                                              response_format={"type": "json_object"})
    assert isinstance(json.loads(anything.choices[0].message.content or ""), dict)


def test_refusals_are_the_clients_own_exception_types(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as tools:
        client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[
            {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}])
    assert tools.value.param == "tools"
    with pytest.raises(openai.BadRequestError) as unknown:
        client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert unknown.value.param == "model"
    with pytest.raises(openai.BadRequestError) as many:
        client.chat.completions.create(model=MODEL, messages=QUESTION, n=2)
    assert many.value.param == "n"
    with pytest.raises(openai.BadRequestError) as image:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
    assert image.value.param == "messages[0].content[0]"
    with pytest.raises(openai.BadRequestError) as long:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "word " * 20000}])
    assert long.value.code == "context_length_exceeded" and "tokens" in long.value.message


def test_a_conversation_longer_than_the_window_is_refused_with_both_counts_never_cut(client: openai.OpenAI) -> None:
    """Each message fits the window alone, together they do not: the answer would have been conditioned on the
    last turns only, silently. It is a 400 naming the prompt's tokens and the window instead."""
    story = " ".join(f"Line {i} of the tale goes on." for i in range(250))  # ~1500 words
    follow = " ".join(f"And then step {i} came." for i in range(200))  # ~1000 words
    messages = [{"role": "user", "content": story}, {"role": "assistant", "content": "Go on."},
                {"role": "user", "content": follow}]  # fmt: skip
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=20)  # type: ignore[arg-type]
    error = caught.value
    assert error.status_code == 400 and error.code == "context_length_exceeded" and error.param == "messages"
    counts = [int(n) for n in re.findall(r"\b(\d+) tokens", error.message)]
    assert len(counts) == 2 and counts[1] == 2048 and counts[0] > 2048, error.message
    # the last message alone fits, and is answered from all of it
    alone = client.chat.completions.create(model=MODEL, messages=messages[2:], max_tokens=5)  # type: ignore[arg-type]
    assert alone.usage is not None and 1000 < alone.usage.prompt_tokens < 2048


def test_strict_on_a_missing_npu_answers_503_device_unavailable_with_the_reason(demo_chat_model: Path) -> None:
    with ServeProcess(["--model", MODEL, "--device", "npu", "--strict", "--api-key", "k3y"]) as strict, openai.OpenAI(
        base_url=strict.base_url, api_key="k3y", max_retries=0
    ) as client:
        with openai.OpenAI(base_url=strict.base_url, api_key="wrong", max_retries=0) as stranger, pytest.raises(
            openai.AuthenticationError
        ):
            stranger.models.list()
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=5)
        assert caught.value.status_code == 503 and caught.value.code == "device_unavailable"
        assert "NPU" in caught.value.message
        card = client.models.retrieve(MODEL).model_extra or {}
        assert card["loaded"] is False and "NPU" in card["npu_studio"]["problem"]


def test_without_strict_a_missing_npu_runs_on_the_cpu_and_every_answer_says_why(demo_chat_model: Path) -> None:
    with ServeProcess(["--model", MODEL, "--device", "npu"]) as served:
        response = httpx.post(f"{served.base_url}/chat/completions", timeout=120,
                              json={"model": MODEL, "messages": QUESTION, "max_tokens": 5})
        assert response.status_code == 200
        assert response.headers["X-NPU-Studio-Device"] == "CPU"
        assert response.headers["X-NPU-Studio-Placement"].startswith("CPU (asked NPU: ")
        where = response.json()["npu_studio"]
        assert where["fell_back"] is True and where["reason"]


def test_serve_refuses_a_network_address_without_a_key_and_a_port_in_use_in_one_line() -> None:
    import socket
    import subprocess
    import sys

    from tests.fixtures.serve import REPO

    exposed = subprocess.run([sys.executable, "-m", "app", "serve", "--host", "0.0.0.0"], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert exposed.returncode == 2
    assert "Refusing to listen on 0.0.0.0 without an API key" in exposed.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run([sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
    assert busy.returncode == 2 and "Loading" not in busy.stderr  # said before any model loads
    errors = [line for line in busy.stderr.splitlines() if line.startswith("npu-studio: error:")]
    assert errors == [f"npu-studio: error: Port {port} on 127.0.0.1 is already in use. Stop the program using "
                      "it, or pick another port with --port N (0 picks a free one)."]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_ctrl_c_and_sigterm_end_an_in_flight_stream_with_an_error_event_and_exit_cleanly(
    demo_chat_model: Path, sig: str
) -> None:
    import signal

    served = ServeProcess(["--model", MODEL, "--device", "cpu"])
    events: list[str] = []
    try:
        body = {"model": MODEL, "max_tokens": 400, "stream": True,
                "messages": [{"role": "user", "content": "Write a long story about a dragon."}]}
        with httpx.stream("POST", f"{served.base_url}/chat/completions", json=body, timeout=120) as response:
            for line in response.iter_lines():
                if line:
                    events.append(line[6:])
                if len(events) == 3:
                    served.process.send_signal(getattr(signal, sig))
        code = served.process.wait(60)  # one signal is enough: the server ends by itself (stop() would send another)
    finally:
        served.stop()
    said = "".join(served.stderr)
    assert events[-1] == "[DONE]", said
    assert json.loads(events[-2])["error"]["code"] == "shutting_down", said
    assert code == 0, said
    assert f"npu-studio serve: stopped ({sig})." in said


def test_past_its_queue_the_server_answers_429_with_retry_after_as_the_clients_rate_limit_error(
    demo_chat_model: Path,
) -> None:
    import threading
    import time

    # Two streamed answers that cannot end early (a schema asks for a long string) hold the line: one runs, the
    # other waits. They are let go by leaving (closing the stream), which stops their generation.
    story = {"type": "object", "properties": {"story": {"type": "string", "minLength": 4000}},
             "required": ["story"], "additionalProperties": False}  # fmt: skip
    long = {"model": MODEL, "max_tokens": 1800, "stream": True, "messages": [{"role": "user", "content": "A story."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "story", "schema": story}}}
    leave = threading.Event()

    def hold(base_url: str) -> None:
        with httpx.stream("POST", f"{base_url}/chat/completions", json=long, timeout=300) as response:
            for _ in response.iter_bytes():
                if leave.is_set():
                    return

    one_at_a_time = {"NPU_STUDIO_CHAT_SLOTS": "1"}  # the engine answers one, so the second waits in line
    args = ["--model", MODEL, "--device", "cpu", "--queue", "1"]
    with ServeProcess(args, env=one_at_a_time) as served, openai.OpenAI(
        base_url=served.base_url, api_key="unused", max_retries=0, timeout=300
    ) as client:
        health = served.base_url.removesuffix("/v1") + "/health"
        busy = [threading.Thread(target=hold, args=(served.base_url,)) for _ in range(2)]
        for thread in busy:
            thread.start()
        deadline = time.monotonic() + 60
        while httpx.get(health).json()["busy"] < 2:  # the first runs, the second waits: the line is full
            assert time.monotonic() < deadline, "the two long answers never filled the line"
            time.sleep(0.05)
        try:
            with pytest.raises(openai.RateLimitError) as caught:
                client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=5)
        finally:
            leave.set()
        assert int(caught.value.response.headers["Retry-After"]) >= 1
        assert caught.value.code == "queue_full"
        for thread in busy:
            thread.join(300)
        assert client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=5).choices
