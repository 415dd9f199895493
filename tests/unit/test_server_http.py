"""The HTTP layer of `npu-studio serve` on a real uvicorn server and real loopback sockets, over a scripted
backend (tests/fixtures/scripted_backend.py): the safety checks, the bounds, each hostile request of
the kind a web page or a broken client sends, the queue, disconnects and shutdown."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from app.server.api import RequestRecord, ServerContext, Timeouts
from app.server.requests import Limits
from app.server.runner import RunningServer, ServeOptions, ServerStartError, bind, check_exposure
from tests.fixtures.scripted_backend import ScriptedBackend

CHAT = "/v1/chat/completions"


def body(**fields: object) -> dict[str, object]:
    return {"model": "scripted", "messages": [{"role": "user", "content": "Where is Paris?"}]} | fields


class Served:
    def __init__(self, backend: ScriptedBackend, options: ServeOptions, timeouts: Timeouts, limits: Limits) -> None:
        self.backend = backend
        self.records: list[RequestRecord] = []
        self.context = ServerContext(backend, limits, timeouts, [self.records.append])
        self.server = RunningServer(self.context, options)
        self.server.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.server.started
        self.url = self.server.url
        headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def post(self, data: object, **kwargs: object) -> httpx.Response:
        return self.http.post(CHAT, json=data, **kwargs)  # type: ignore[arg-type]

    def raw(self, payload: bytes, timeout: float = 5.0) -> bytes:
        """Send bytes on a fresh connection, return everything the server sends until it closes."""
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=timeout) as sock:
            sock.sendall(payload)
            chunks = []
            while True:
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)

    def close(self) -> None:
        self.http.close()
        self.server.stop()


def serve(
    backend: ScriptedBackend | None = None,
    options: ServeOptions | None = None,
    timeouts: Timeouts | None = None,
    limits: Limits | None = None,
) -> Served:
    return Served(backend or ScriptedBackend(), options or ServeOptions(port=0), timeouts or Timeouts(),
                  limits or Limits())


@pytest.fixture(scope="module")
def shared() -> Iterator[Served]:
    s = serve(limits=Limits(max_body_bytes=64 * 1024, max_messages=8))
    yield s
    s.close()


@pytest.fixture
def served(shared: Served) -> Iterator[Served]:
    yield shared
    assert shared.http.get("/health").status_code == 200  # whatever the test sent, the server still serves


def error_of(response: httpx.Response) -> dict[str, object]:
    data = response.json()
    assert set(data) == {"error"} and set(data["error"]) == {"message", "type", "param", "code"}, data
    return dict(data["error"])


# -- answers ------------------------------------------------------------------------------------


def test_a_completion_says_where_it_ran_in_headers_fingerprint_and_npu_studio(served: Served) -> None:
    response = served.post(body())
    assert response.status_code == 200
    data = response.json()
    assert data["choices"][0]["message"]["content"] == "Paris is the capital of France."
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"] == {"prompt_tokens": 7, "completion_tokens": 7, "total_tokens": 14}
    assert response.headers["X-NPU-Studio-Device"] == "CPU"
    assert response.headers["X-NPU-Studio-Placement"] == "CPU"
    assert data["system_fingerprint"].endswith("CPU: CPU")
    assert data["npu_studio"]["ep"] == "CPUExecutionProvider" and data["npu_studio"]["fell_back"] is False
    assert served.records[-1].status == "200" and served.records[-1].completion_tokens == 7


def test_a_stream_is_sse_chunks_ending_with_usage_and_done(served: Served) -> None:
    with served.http.stream("POST", CHAT, json=body(stream=True, stream_options={"include_usage": True})) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["X-NPU-Studio-Device"] == "CPU"
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Paris is the capital of France."
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop" and "npu_studio" in chunks[-2]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 7


def test_max_tokens_is_clamped_to_what_the_context_leaves(served: Served) -> None:
    response = served.post(body(max_tokens=2**62, stop=["."]))
    assert response.status_code == 200
    assert served.backend.admitted[-1].max_tokens == 256 - 7


def test_max_completion_tokens_ends_the_answer_with_length(served: Served) -> None:
    data = served.post(body(max_completion_tokens=3)).json()
    assert data["choices"][0]["finish_reason"] == "length" and data["usage"]["completion_tokens"] == 3


# -- safe by default ----------------------------------------------------------------------------


def test_a_non_loopback_host_without_an_api_key_refuses_to_start() -> None:
    with pytest.raises(ServerStartError, match="without an API key"):
        check_exposure("0.0.0.0", "")
    with pytest.raises(ServerStartError):
        RunningServer(ServerContext(ScriptedBackend()), ServeOptions(host="0.0.0.0", port=0))
    check_exposure("127.0.0.1", "")
    check_exposure("::1", "")
    check_exposure("0.0.0.0", "a-key")


def test_a_port_in_use_is_one_clear_line_naming_it() -> None:
    taken = bind("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ServerStartError) as caught:
            bind("127.0.0.1", port)
        assert str(caught.value).startswith(f"Port {port} on 127.0.0.1 is already in use.")
    finally:
        taken.close()


def test_the_api_key_is_needed_on_every_endpoint_but_health() -> None:
    s = serve(options=ServeOptions(port=0, api_key="s3cret"))
    try:
        bare = httpx.Client(base_url=s.url, timeout=10)
        assert bare.get("/health").status_code == 200
        for method, path in (("GET", "/v1/models"), ("GET", "/v1/models/scripted"), ("POST", CHAT)):
            refused = bare.request(method, path, json=body())
            assert refused.status_code == 401, path
            assert error_of(refused)["code"] == "invalid_api_key"
        wrong = bare.get("/v1/models", headers={"Authorization": "Bearer s3cres"})
        assert wrong.status_code == 401
        assert s.http.get("/v1/models").status_code == 200
        assert s.post(body()).status_code == 200
        bare.close()
    finally:
        s.close()


def test_a_foreign_host_header_is_refused_against_dns_rebinding(served: Served) -> None:
    refused = served.http.get("/v1/models", headers={"Host": "attacker.example:6780"})
    assert refused.status_code == 403 and error_of(refused)["code"] == "host_not_allowed"
    refused = served.post(body(), headers={"Host": "rebound.attacker.example"})
    assert refused.status_code == 403
    for host in ("localhost", f"127.0.0.1:{served.server.port}", "[::1]:80", "LOCALHOST."):
        assert served.http.get("/v1/models", headers={"Host": host}).status_code == 200, host


def test_no_cors_headers_unless_an_origin_is_named(served: Served) -> None:
    plain = served.http.get("/v1/models")
    assert not any(k.lower().startswith("access-control") for k in plain.headers)
    refused = served.post(body(), headers={"Origin": "https://attacker.example"})
    assert refused.status_code == 403 and error_of(refused)["code"] == "origin_not_allowed"
    assert not any(k.lower().startswith("access-control") for k in refused.headers)


def test_a_named_cors_origin_gets_cors_headers_and_its_preflight() -> None:
    s = serve(options=ServeOptions(port=0, cors_origins=("http://localhost:3000",)))
    try:
        allowed = s.http.get("/v1/models", headers={"Origin": "http://localhost:3000"})
        assert allowed.headers["access-control-allow-origin"] == "http://localhost:3000"
        preflight = s.http.options(CHAT, headers={"Origin": "http://localhost:3000",
                                                  "Access-Control-Request-Method": "POST"})
        assert preflight.status_code == 204 and "POST" in preflight.headers["access-control-allow-methods"]
        assert s.http.get("/v1/models", headers={"Origin": "http://other:3000"}).status_code == 403
    finally:
        s.close()


# -- hostile requests: each a 400 (or 413) naming the field, never a 500 --------------------------


def _refused(response: httpx.Response, status: int = 400) -> dict[str, object]:
    assert response.status_code == status, response.text
    return error_of(response)


def test_malformed_json_is_a_400(served: Served) -> None:
    error = _refused(served.http.post(CHAT, content=b'{"model": "scripted", "messages": [', headers={
        "Content-Type": "application/json"}))
    assert error["code"] == "invalid_json" and "not valid JSON" in str(error["message"])


def test_a_body_that_is_not_utf8_is_a_400(served: Served) -> None:
    error = _refused(served.http.post(CHAT, content=b'{"model": "scripted\xff\xfe"}'))
    assert error["code"] == "invalid_encoding" and "0xff" in str(error["message"])


def test_a_nul_character_in_a_message_is_a_400_naming_it(served: Served) -> None:
    error = _refused(served.post(body(messages=[{"role": "user", "content": "Hi\u0000there"}])))
    assert error["param"] == "messages[0].content" and "NUL" in str(error["message"])


def test_a_lone_surrogate_in_a_message_is_a_400_naming_it(served: Served) -> None:
    raw = b'{"model": "scripted", "messages": [{"role": "user", "content": "a\\ud800b"}]}'
    error = _refused(served.http.post(CHAT, content=raw))
    assert error["param"] == "messages[0].content" and "surrogate" in str(error["message"])


def test_a_nan_literal_is_a_400(served: Served) -> None:
    raw = b'{"model": "scripted", "temperature": NaN, "messages": [{"role": "user", "content": "Hi"}]}'
    error = _refused(served.http.post(CHAT, content=raw))
    assert "NaN" in str(error["message"])


def test_an_infinite_temperature_is_a_400_naming_it(served: Served) -> None:
    raw = b'{"model": "scripted", "temperature": 1e999, "messages": [{"role": "user", "content": "Hi"}]}'
    assert _refused(served.http.post(CHAT, content=raw))["param"] == "temperature"


def test_a_huge_integer_is_a_400_naming_it(served: Served) -> None:
    assert _refused(served.post(body(max_tokens=10**40)))["param"] == "max_tokens"
    assert _refused(served.post(body(seed=-(10**30))))["param"] == "seed"
    assert _refused(served.post(body(temperature=10**30)))["param"] == "temperature"


def test_an_integer_too_long_for_json_is_a_400(served: Served) -> None:
    raw = b'{"model": "scripted", "max_tokens": ' + b"9" * 5000 + b', "messages": []}'
    assert _refused(served.http.post(CHAT, content=raw))["code"] == "invalid_json"


def test_wrong_types_are_a_400_naming_the_field(served: Served) -> None:
    cases = {
        "messages": body(messages="hello"),
        "messages[0].content": body(messages=[{"role": "user", "content": 5}]),
        "messages[0].role": body(messages=[{"role": "wizard", "content": "hi"}]),
        "stream": body(stream="yes"),
        "max_tokens": body(max_tokens="10"),
        "temperature": body(temperature=True),
        "stop[1]": body(stop=["a", 3]),
        "model": body(model=["scripted"]),
        "response_format.type": body(response_format={"type": "yaml"}),
    }
    for param, data in cases.items():
        assert _refused(served.post(data))["param"] == param, param
    assert _refused(served.post([1, 2]))["code"] == "invalid_type"


def test_deeply_nested_json_is_a_400(served: Served) -> None:
    raw = b'{"model": "scripted", "metadata": ' + b"[" * 50000 + b"]" * 50000 + b"}"
    assert _refused(served.http.post(CHAT, content=raw), 413)["code"] == "body_too_large"
    deep = b'{"model": "scripted", "metadata": ' + b"[" * 20000 + b"]" * 20000 + b"}"
    assert _refused(served.http.post(CHAT, content=deep))["code"] == "invalid_json"


def test_an_unknown_field_is_a_400_naming_it(served: Served) -> None:
    error = _refused(served.post(body(max_token=5)))
    assert error["param"] == "max_token" and error["code"] == "unknown_parameter"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"n": 2}, "n"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
         "messages[0].content[0]"),
        ({"messages": [{"role": "tool", "content": "42", "tool_call_id": "a"}]}, "messages[0].role"),
        ({"model": "no-such-model"}, "model"),
    ],
)
def test_what_the_server_cannot_do_is_a_400_naming_the_field(served: Served, fields: dict[str, object],
                                                              param: str) -> None:
    assert _refused(served.post(body(**fields)))["param"] == param


def test_a_body_over_the_limit_is_a_413(served: Served) -> None:
    big = body(messages=[{"role": "user", "content": "x" * 70_000}])
    assert _refused(served.post(big), 413)["code"] == "body_too_large"


def test_a_chunked_body_over_the_limit_is_a_413(served: Served) -> None:
    def pieces() -> Iterator[bytes]:
        yield b'{"model": "scripted", "messages": [{"role": "user", "content": "'
        for _ in range(80):
            yield b"x" * 1024
        yield b'"}]}'

    assert _refused(served.http.post(CHAT, content=pieces()), 413)["code"] == "body_too_large"


def test_too_many_messages_are_a_400(served: Served) -> None:
    many = [{"role": "user", "content": "hi"}] * 9
    error = _refused(served.post(body(messages=many)))
    assert error["param"] == "messages" and "at most 8" in str(error["message"])


def test_a_prompt_longer_than_the_context_is_a_400_with_its_count_and_the_limit(served: Served) -> None:
    long = body(messages=[{"role": "user", "content": "word " * 300}])
    error = _refused(served.post(long))
    assert error["code"] == "context_length_exceeded"
    assert "304 tokens" in str(error["message"]) and "holds 256 tokens" in str(error["message"])


def test_an_unknown_path_and_a_wrong_method_are_errors_in_the_api_shape(served: Served) -> None:
    assert _refused(served.http.get("/v1/embeddings"), 404)["code"] == "not_found"
    assert _refused(served.http.get(CHAT), 405)["code"] == "method_not_allowed"
    assert _refused(served.http.get("/v1/models/nothing"), 404)["code"] == "model_not_found"


# -- slow and greedy clients ----------------------------------------------------------------------


def test_a_client_that_sends_its_headers_slowly_is_dropped() -> None:
    s = serve(timeouts=Timeouts(header_s=0.5))
    try:
        with socket.create_connection(("127.0.0.1", s.server.port), timeout=5) as sock:
            started = time.monotonic()
            sock.sendall(b"GET /health HTTP/1.1\r\n")
            closed_after = None
            for _ in range(30):  # one header line every 0.1 s: never a whole request
                if select.select([sock], [], [], 0.1)[0] and sock.recv(1024) == b"":
                    closed_after = time.monotonic() - started
                    break
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    closed_after = time.monotonic() - started
                    break
            assert closed_after is not None and 0.4 < closed_after < 1.5, closed_after
        assert s.http.get("/health").status_code == 200
    finally:
        s.close()


def test_a_client_that_sends_its_body_slowly_gets_a_408() -> None:
    s = serve(timeouts=Timeouts(body_idle_s=0.3))
    try:
        head = (f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n{\"model\"").encode()
        answer = s.raw(head, timeout=1.0)
        assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer
    finally:
        s.close()


def test_past_the_connection_limit_a_connection_is_refused() -> None:
    s = serve(options=ServeOptions(port=0, max_connections=3))
    held = [socket.create_connection(("127.0.0.1", s.server.port)) for _ in range(3)]
    try:
        time.sleep(0.2)
        answer = s.raw(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503")
    finally:
        for sock in held:
            sock.close()
        time.sleep(0.2)
        assert s.http.get("/health").status_code == 200
        s.close()


# -- the queue, disconnects, shutdown -------------------------------------------------------------


def test_past_the_queue_a_request_gets_429_with_retry_after() -> None:
    s = serve(ScriptedBackend(token_s=0.05, queue_size=2))
    try:
        results: list[httpx.Response] = []
        threads = [threading.Thread(target=lambda: results.append(s.post(body(max_tokens=5)))) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.1)
        refused = s.post(body())
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "4"
        assert error_of(refused)["type"] == "rate_limit_error"
        for t in threads:
            t.join()
        assert [r.status_code for r in results] == [200, 200]
    finally:
        s.close()


def test_a_client_that_disconnects_mid_stream_stops_its_generation_within_a_token() -> None:
    backend = ScriptedBackend(token_s=0.05, words=("word ",) * 500)
    s = serve(backend)
    try:
        with s.http.stream("POST", CHAT, json=body(stream=True, max_tokens=200)) as response:
            lines = response.iter_lines()
            for _ in range(4):
                next(lines)
        deadline = time.monotonic() + 5
        while not backend.generated and time.monotonic() < deadline:
            time.sleep(0.01)
        assert backend.generated and backend.generated[0] <= 8, backend.generated
        assert backend.busy() == 0
        assert s.records[-1].status == "disconnected"
    finally:
        s.close()


def test_stopping_the_server_ends_an_in_flight_stream_with_an_error_event() -> None:
    backend = ScriptedBackend(token_s=0.05, words=("word ",) * 500)
    s = serve(backend)
    lines: list[str] = []
    with s.http.stream("POST", CHAT, json=body(stream=True, max_tokens=400)) as response:
        iterator = response.iter_lines()
        for _ in range(3):
            lines.append(next(iterator))
        stopper = threading.Thread(target=s.server.stop)
        stopper.start()
        lines += [line for line in iterator if line]
    stopper.join(15)
    events = [line[6:] for line in lines if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    last = json.loads(events[-2])
    assert last["error"]["code"] == "shutting_down"
    assert backend.generated and backend.generated[0] < 400
    s.http.close()


def test_a_client_that_stops_reading_its_stream_is_dropped_and_its_generation_stops() -> None:
    backend = ScriptedBackend(token_s=0.005, words=("x" * 65536,) * 4000)
    s = serve(backend, timeouts=Timeouts(send_s=0.5))
    try:
        with socket.create_connection(("127.0.0.1", s.server.port), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            payload = json.dumps(body(stream=True, max_tokens=4000)).encode()
            sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
            deadline = time.monotonic() + 20  # never read: the server's sends fill the buffers, then time out
            while not backend.generated and time.monotonic() < deadline:
                time.sleep(0.05)
        assert backend.generated and backend.generated[0] < 4000, backend.generated
        assert s.records[-1].status == "disconnected"
        assert s.http.get("/health").status_code == 200
    finally:
        s.close()
