"""The OpenAI-compatible routes (Starlette): `/v1/models`, `/v1/models/{id}`, `/v1/chat/completions`,
`/health`. Every answer says where it ran (app/server/answers.py); every refusal is OpenAI's error shape;
nothing a client sends ends in a 500 with a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.server import answers
from app.server.bridge import EventStream
from app.server.errors import ApiError, from_studio_error
from app.server.guard import Access, Guard, read_body
from app.server.protocol import (
    Admission,
    ChatBackend,
    CompletionRequest,
    Failed,
    Finished,
    ModelCard,
    Started,
    Text,
    Waiting,
)
from app.server.requests import Limits, parse_body
from engines import CancelledError, StudioError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timeouts:
    header_s: float = 10.0  # from connecting to the end of the request's headers
    body_idle_s: float = 15.0  # between two pieces of a request body
    send_s: float = 30.0  # for one piece of an answer to leave (a client that stops reading)
    keep_alive_s: int = 5  # an idle kept-alive connection


@dataclass(frozen=True)
class RequestRecord:
    """One line of the request log (the app's Server place shows them)."""

    time: float
    client: str
    model: str
    device: str
    prompt_tokens: int
    completion_tokens: int
    tokens_per_s: float
    status: str  # "200", "429", "disconnected", ...
    queued_s: float = 0.0


@dataclass
class ServerContext:
    backend: ChatBackend
    limits: Limits = field(default_factory=Limits)
    timeouts: Timeouts = field(default_factory=Timeouts)
    on_record: list[Callable[[RequestRecord], None]] = field(default_factory=list)
    closing: bool = False
    streams: set[EventStream] = field(default_factory=set)

    def record(self, record: RequestRecord) -> None:
        for listener in list(self.on_record):
            try:
                listener(record)
            except Exception:
                log.exception("request log listener failed")

    def begin_shutdown(self) -> None:
        """In-flight answers end now with an error event (streams) or a 503 (the others)."""
        self.closing = True
        for stream in list(self.streams):
            stream.stop()


def build_app(context: ServerContext, access: Access) -> Guard:
    async def health(request: Request) -> Response:
        return await _health(context)

    async def models(request: Request) -> Response:
        return await _models(context)

    async def model(request: Request) -> Response:
        return await _model(context, request.path_params["model_id"])

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", _Completions(context), methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, ApiError: _api_error, Exception: _unexpected},
    )
    return Guard(app, access)


# -- errors ----------------------------------------------------------------------------------


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        error = ApiError(404, f"There is no {request.url.path[:100]!r} here; the API is under /v1.", code="not_found")
    elif exc.status_code == 405:
        error = ApiError(405, f"{request.method} is not allowed on {request.url.path[:100]!r}.",
                         code="method_not_allowed")
    else:
        error = ApiError(exc.status_code, str(exc.detail), code="http_error")
    return error_response(error)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("request to %s failed", request.url.path)
    return error_response(ApiError(500, f"The server failed on this request: {type(exc).__name__}.",
                                   code="internal_error", kind="server_error"))


# -- models ----------------------------------------------------------------------------------


def model_object(card: ModelCard) -> dict[str, Any]:
    where: dict[str, Any] = {"device": card.device, "loaded": card.loaded, "problem": card.problem,
                             "source": card.source}
    if card.placement is not None:
        where |= answers.npu_studio(card.placement, card.source)
    where["loaded"] = card.loaded
    return {
        "id": card.id,
        "object": "model",
        "created": 0,
        "owned_by": "npu-studio",
        "context_length": card.context_length,
        "device": card.device,
        "loaded": card.loaded,
        "npu_studio": where,
    }


async def _cards(context: ServerContext) -> list[ModelCard]:
    return await anyio.to_thread.run_sync(context.backend.models)


async def _health(context: ServerContext) -> Response:
    return JSONResponse({"status": "closing" if context.closing else "ok", "busy": context.backend.busy()})


async def _models(context: ServerContext) -> Response:
    return JSONResponse({"object": "list", "data": [model_object(c) for c in await _cards(context)]})


async def _model(context: ServerContext, model_id: str) -> Response:
    for card in await _cards(context):
        if card.id == model_id:
            return JSONResponse(model_object(card))
    raise ApiError(404, f"The model {model_id[:100]!r} does not exist.", param="model", code="model_not_found")


# -- completions ------------------------------------------------------------------------------


class _Completions:
    """POST /v1/chat/completions as a raw ASGI endpoint: the body is read with its bounds, and the
    client's disconnect is watched while the answer is written."""

    def __init__(self, context: ServerContext) -> None:
        self.context = context

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self.respond(request, receive)
        await response(scope, receive, send)

    async def respond(self, request: Request, receive: Receive) -> Response:
        context = self.context
        started = time.perf_counter()
        client = f"{request.client.host}:{request.client.port}" if request.client else ""
        try:
            if context.closing:
                raise ApiError(503, "The server is shutting down.", code="shutting_down", kind="server_error")
            body = await read_body(receive, dict(request.headers), context.limits.max_body_bytes,
                                   context.timeouts.body_idle_s)
            parsed = parse_body(body, context.limits, client)
            admission = await anyio.to_thread.run_sync(context.backend.admit, parsed)
            stream = EventStream(context.backend, parsed, admission)
        except StudioError as exc:
            return self._refused(from_studio_error(exc), client, started)
        except ApiError as exc:
            return self._refused(exc, client, started)
        context.streams.add(stream)
        call = _Call(context, parsed, admission, stream, started)
        try:
            first = await call.first_event(receive)
        except BaseException:
            context.streams.discard(stream)
            stream.stop()
            raise
        if isinstance(first, Failed):
            context.streams.discard(stream)
            return self._refused(call.error_of(first), client, started, call.queued_s)
        if parsed.stream:
            return _Stream(call.sse(), headers=call.headers, send_timeout=context.timeouts.send_s,
                           media_type="text/event-stream")
        try:
            return await call.whole(receive)
        finally:
            context.streams.discard(stream)

    def _refused(self, error: ApiError, client: str, started: float, queued_s: float = 0.0) -> Response:
        self.context.record(RequestRecord(time.time(), client, "", "", 0, 0, 0.0, str(error.status), queued_s))
        return error_response(error)


class _Call:
    """One admitted completion: its events, turned into a JSON answer or SSE chunks."""

    def __init__(self, context: ServerContext, request: CompletionRequest, admission: Admission,
                 stream: EventStream, started: float) -> None:
        self.context = context
        self.request = request
        self.admission = admission
        self.stream = stream
        self.started = started
        self.events = stream.events()
        self.prompt_tokens = admission.prompt_tokens
        self.queued_s = 0.0
        self.headers = answers.placement_headers(admission.placement) | {"Cache-Control": "no-cache"}
        self.cid = answers.completion_id()

    async def first_event(self, receive: Receive) -> Started | Failed:
        """Wait in the queue (watching for the client leaving) until the request starts or fails."""
        async with _watch_disconnect(receive, self.stream):
            async for event in self.events:
                if isinstance(event, Waiting):
                    continue
                self.queued_s = time.perf_counter() - self.started
                if isinstance(event, Started):
                    self.prompt_tokens = event.prompt_tokens
                    return event
                if isinstance(event, Failed):
                    return event
        return Failed(CancelledError("The client went away while the request waited."))

    def error_of(self, failed: Failed) -> ApiError:
        if self.context.closing:
            return ApiError(503, "The server is shutting down; the answer was stopped.", code="shutting_down",
                            kind="server_error")
        return from_studio_error(failed.error)

    def log(self, status: str, finished: Finished | None, completion_tokens: int = 0) -> None:
        placement = finished.placement if finished is not None else self.admission.placement
        self.context.record(RequestRecord(
            time.time(), self.request.client, self.request.model, answers.device_of(placement),
            finished.prompt_tokens if finished is not None else self.prompt_tokens,
            finished.completion_tokens if finished is not None else completion_tokens,
            finished.decode_tokens_per_s if finished is not None else 0.0, status, self.queued_s,
        ))

    async def whole(self, receive: Receive) -> Response:
        pieces: list[str] = []
        async with _watch_disconnect(receive, self.stream):
            async for event in self.events:
                if isinstance(event, Text):
                    pieces.append(event.text)
                elif isinstance(event, Finished):
                    self.log("200", event)
                    body = answers.completion(
                        self.cid, self.request.model, "".join(pieces), event.finish_reason, event.prompt_tokens,
                        event.completion_tokens, event.placement, str(self.admission.extra.get("source", "")),
                        {"queued_s": round(self.queued_s, 4)},
                    )
                    return JSONResponse(body, headers=answers.placement_headers(event.placement))
                elif isinstance(event, Failed):
                    error = self.error_of(event)
                    self.log(str(error.status), None, len(pieces))
                    return error_response(error)
        self.log("disconnected", None, len(pieces))
        return Response(status_code=499)

    async def sse(self) -> AsyncIterator[bytes]:
        writer = answers.ChunkWriter(self.cid, self.request.model, self.admission.placement,
                                     str(self.admission.extra.get("source", "")))
        usage = self.request.include_usage
        status, finished, count = "disconnected", None, 0
        try:
            yield writer.role(usage)
            async for event in self.events:
                if isinstance(event, Text):
                    count += 1
                    yield writer.text(event.text, usage)
                elif isinstance(event, Finished):
                    finished, status = event, "200"
                    yield writer.finish(event.finish_reason, event.placement, usage)
                    if usage:
                        yield writer.usage(event.prompt_tokens, event.completion_tokens)
                    yield writer.done()
                elif isinstance(event, Failed):
                    error = self.error_of(event)
                    status = f"{error.status} (after {count} chunks)"
                    yield writer.error(error.body())
                    yield writer.done()
        finally:
            self.context.streams.discard(self.stream)
            self.stream.stop()
            self.log(status, finished, count)


@contextlib.asynccontextmanager
async def _watch_disconnect(receive: Receive, stream: EventStream) -> AsyncIterator[None]:
    """While the body of the `async with` runs, a client that disconnects cancels the generation."""

    async def watch() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                stream.stop()
                return

    task = asyncio.ensure_future(watch())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


class _Stream(StreamingResponse):
    """A streaming response whose every piece must leave within `send_timeout` seconds: a client that
    stops reading is dropped instead of holding a generation slot forever."""

    def __init__(self, content: AsyncIterator[bytes], *, send_timeout: float, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.send_timeout = send_timeout

    async def stream_response(self, send: Send) -> None:
        with anyio.fail_after(self.send_timeout):
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for chunk in self.body_iterator:
                with anyio.fail_after(self.send_timeout):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            with anyio.fail_after(self.send_timeout):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            log.info("a client stopped reading its answer for %.0f s; dropped", self.send_timeout)
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()
