"""A network guard for tests: any connection (or name lookup) that leaves this machine fails the test.

Loopback (127.0.0.0/8, ::1, localhost) and local sockets stay allowed, so a test can run its own HTTP
server on 127.0.0.1. Every blocked attempt is recorded as well as raised, so a test also fails when the
code under test swallows the error.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


class NetworkAccessError(AssertionError):
    """Raised for a connection to anything but this machine."""


def is_local(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host in ("localhost", "localhost.localdomain", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@contextmanager
def loopback_only() -> Iterator[list[str]]:
    """Patch the socket layer; yields the list of blocked attempts (empty when all was well)."""
    blocked: list[str] = []

    def check(family: int, address: Any) -> None:
        if family == getattr(socket, "AF_UNIX", None):
            return
        host = address[0] if isinstance(address, tuple) and address else address
        if not is_local(host):
            blocked.append(f"connect {address!r}")
            raise NetworkAccessError(f"network access during a test: connect to {address!r}")

    def connect(self: socket.socket, address: Any) -> None:
        check(self.family, address)
        _real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(self.family, address)
        return _real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and not is_local(name):
            blocked.append(f"lookup {name!r}")
            raise NetworkAccessError(f"network access during a test: name lookup of {name!r}")
        return _real_getaddrinfo(host, *args, **kwargs)

    previous = (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)
    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo
    try:
        yield blocked
    finally:  # restore what was there (guards nest)
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = previous  # type: ignore[method-assign]


def install() -> list[str]:
    """Install the guard for the rest of the process (subprocess checks)."""
    guard = loopback_only()
    blocked = guard.__enter__()
    return blocked
