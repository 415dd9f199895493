"""The checks in front of every route (a plain ASGI middleware, so streaming passes straight through):

- the `Host` header names this machine (a loopback name or address, or the bound host): a web page whose
  DNS name was rebound to 127.0.0.1 is refused;
- a browser's `Origin` is refused unless `--cors-origin` named it, and only then are CORS headers sent;
- the API key, when there is one, on every endpoint but `/health`, compared in constant time;
- request bodies are bounded in size and in the time between their pieces (`read_body`).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.errors import ApiError

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
OPEN_PATHS = frozenset({"/health"})


@dataclass(frozen=True)
class Access:
    api_key: str = ""
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)  # besides loopback names and addresses


def host_names(bound: str) -> frozenset[str]:
    """The names a `Host` header may carry besides loopback ones: the bound address, and for a wildcard
    bind (0.0.0.0, ::) this machine's own name and addresses."""
    names = {bound.strip("[]").lower()}
    if bound in ("0.0.0.0", "::", ""):
        names.add(socket.gethostname().lower())
        names.add(socket.getfqdn().lower())
        try:
            import psutil

            for addresses in psutil.net_if_addrs().values():
                names.update(a.address.split("%")[0].lower() for a in addresses if a.family in (socket.AF_INET,
                                                                                               socket.AF_INET6))
        except Exception:
            pass
    return frozenset(n for n in names if n)


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower().rstrip(".")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def split_host(header: str) -> str:
    """The host of a `Host` header, without its port ("[::1]:6780" -> "::1")."""
    value = header.strip()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def key_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


class Guard:
    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        try:
            self._check(scope, origin)
        except ApiError as error:
            await send_error(send, error, self._cors(origin))
            return
        if scope["method"] == "OPTIONS" and origin is not None:  # an allowed origin's preflight
            await _send(send, 204, b"", self._cors(origin) + _preflight())
            return
        cors = self._cors(origin)
        if not cors:
            await self.app(scope, receive, send)
            return

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *cors]
            await send(message)

        await self.app(scope, receive, with_cors)

    def _check(self, scope: Scope, origin: str | None) -> None:
        host = _header(scope, b"host")
        if host is None:
            raise ApiError(400, "The request has no Host header.", code="missing_host")
        name = split_host(host).lower()
        if not is_loopback(name) and name not in self.access.allowed_hosts:
            raise ApiError(
                403,
                f"The Host header {host[:100]!r} is not this server's address; requests must name it (a guard "
                "against DNS rebinding).",
                code="host_not_allowed",
                kind="permission_error",
            )
        if origin is not None and origin not in self.access.cors_origins:
            raise ApiError(
                403,
                f"Requests from the web origin {origin[:100]!r} are not allowed; start the server with "
                "--cors-origin to allow one.",
                code="origin_not_allowed",
                kind="permission_error",
            )
        if self.access.api_key and scope["path"] not in OPEN_PATHS and scope["method"] != "OPTIONS":
            given = _bearer(_header(scope, b"authorization"))
            if given is None or not key_matches(given, self.access.api_key):
                raise ApiError(
                    401,
                    "Missing or wrong API key: send it as 'Authorization: Bearer KEY'.",
                    code="invalid_api_key",
                    kind="authentication_error",
                    headers={"WWW-Authenticate": "Bearer"},
                )

    def _cors(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        if origin is None or origin not in self.access.cors_origins:
            return []
        return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin"),
                (b"access-control-expose-headers", b"X-NPU-Studio-Device, X-NPU-Studio-Placement, Retry-After")]


def _preflight() -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-methods", b"GET, POST, OPTIONS"),
            (b"access-control-allow-headers", b"Authorization, Content-Type"), (b"access-control-max-age", b"600")]


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


async def _send(send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_error(send: Send, error: ApiError, extra: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error.headers.items()]
    await _send(send, error.status, body, headers)


async def read_body(receive: Receive, headers: dict[str, str], max_bytes: int, idle_s: float) -> bytes:
    """The whole body, refused past `max_bytes` (413, from Content-Length at once or while reading) or when
    a piece takes longer than `idle_s` to come (408: a slow client does not hold its slot)."""
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "The Content-Length header is not a number.", code="invalid_header")
        if int(declared) > max_bytes:
            raise _too_large(int(declared), max_bytes)
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            message = await asyncio.wait_for(receive(), idle_s)
        except TimeoutError:
            raise ApiError(408, f"The request body did not arrive within {idle_s:g} s.",
                           code="request_timeout") from None
        if message["type"] == "http.disconnect":
            raise ApiError(400, "The client went away while sending the body.", code="client_disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(size, max_bytes)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(413, f"The request body is {size} bytes or more; at most {limit} bytes are accepted.",
                    code="body_too_large")
