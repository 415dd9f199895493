"""What went wrong with a download, in the user's words: the Hub refused (401/403/404), answered with an
error, the server could not be reached at all (refused, no route, no such name: "nothing was downloaded"),
or a transfer was interrupted (it resumes where it stopped). Pure Python: the exceptions are read by their
attributes and types, whichever HTTP library raised them."""

from __future__ import annotations

import errno
import re
import socket
from urllib.parse import urlsplit

from engines.errors import StudioError
from engines.models.catalog import CatalogEntry
from engines.models.library import format_bytes


class DownloadError(StudioError):
    """A download could not be done (forbidden, network, the Hub refused)."""

    code = "download"


class NotReached(DownloadError):
    """The server could not be reached at all (refused, no route, no such name, timed out connecting). What
    the user is told depends on whether anything came before (`said`)."""

    def __init__(self, entry: CatalogEntry, reason: str) -> None:
        super().__init__(f"The server for {entry.id} could not be reached: {reason}.")
        self.entry = entry
        self.reason = reason

    def said(self, endpoint: str, *, fetched: int, kept: int) -> DownloadError:
        host = urlsplit(endpoint).netloc or endpoint
        if fetched == 0:
            earlier = f" The {format_bytes(kept)} from an earlier try are kept: it resumes from there." if kept else ""
            return DownloadError(
                f"Could not reach the server ({host}): {self.reason}; nothing was downloaded.",
                f"Check the network connection (and HF_ENDPOINT, if you set it), then run the same download again."
                f"{earlier}",
            )
        return DownloadError(
            f"The download of {self.entry.id} was interrupted: the server ({host}) could not be reached again "
            f"({self.reason}) after {format_bytes(fetched)}.",
            "Check the network connection and run the same download again: it resumes where it stopped.",
        )


_UNREACHABLE = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT, errno.ECONNABORTED}


def _not_reached(exc: BaseException) -> str | None:
    """Why a connection could not be made at all ("connection refused"), or None when the failure came
    after one was made (a dropped transfer) or is not about connecting."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return None
        kind = type(seen).__name__
        if isinstance(seen, socket.gaierror) or (isinstance(seen, OSError) and seen.errno in _UNREACHABLE):
            return _plain(seen.strerror or str(seen))
        if kind in ("ConnectError", "ConnectTimeout"):  # httpx: a connection was never made
            return "timed out" if kind == "ConnectTimeout" else _plain(str(seen) or kind)
        seen = seen.__cause__ or seen.__context__
    return None


def _plain(text: str) -> str:
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", text.strip().splitlines()[0] if text.strip() else "")
    return text[:1].lower() + text[1:] if text else "no answer"


def network_error(entry: CatalogEntry, exc: BaseException) -> StudioError:
    if isinstance(exc, StudioError):
        return exc
    status = getattr(getattr(exc, "response", None), "status_code", None)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if status in (401, 403):
        return DownloadError(f"The Hub refused access to {entry.repo_id} (HTTP {status}).",
                             "The repository may be gated or private; NPU Studio downloads public models only.")
    if status == 404:
        return DownloadError(f"{entry.repo_id} or one of its files was not found on the Hub (HTTP 404).",
                             "The repository changed; update NPU Studio for a current catalog.")
    if status is not None:
        return DownloadError(f"The Hub answered HTTP {status} for {entry.repo_id}: {text}", "Try again later.")
    reason = _not_reached(exc)
    if reason is not None:
        return NotReached(entry, reason)
    return DownloadError(
        f"The download of {entry.id} was interrupted: {type(exc).__name__}: {text}",
        "Check the network connection and run the same download again: it resumes where it stopped.",
    )
