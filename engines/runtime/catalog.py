"""Windows ML's execution-provider catalog (the `windowsml` package): which EPs Windows offers this PC,
whether each is ready, and getting one ready (a download through Windows Update) when the user agrees.

Reading the catalog never downloads anything. `prepare()` is the only call that may download, and only
with `allow_download=True`, which callers pass after the user consented; it reports progress and can be
cancelled. Failures come back as plain words (`explain_hresult`), never as exceptions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from engines import runtime
from engines.types import short_ep_name

log = logging.getLogger(__name__)

WINDOWS_24H2_BUILD = 26100
PACKAGE = "windowsml"


class ReadyState(StrEnum):
    READY = "ready"
    NOT_READY = "not ready"  # on the PC, not prepared yet
    NOT_PRESENT = "not downloaded"  # Windows Update must download it first
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CatalogEp:
    name: str  # the EP name ONNX Runtime knows ("QNNExecutionProvider")
    version: str
    library_path: str
    state: ReadyState
    certification: str = ""  # "Certified" / "Uncertified" / "Unknown"
    package_family: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "library_path": self.library_path,
            "state": self.state.value,
            "certification": self.certification,
            "package_family": self.package_family,
        }


@dataclass(frozen=True)
class CatalogReport:
    """What the catalog says. `available` False: `reason` says why (not Windows, too old, not installed)."""

    available: bool
    reason: str = ""
    providers: tuple[CatalogEp, ...] = ()
    windows_build: int = 0
    version: str = ""  # of the windowsml package

    def find(self, ep: str) -> CatalogEp | None:
        return next((p for p in self.providers if p.name == ep), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "reason": self.reason,
            "windows_build": self.windows_build,
            "windowsml": self.version,
            "providers": [p.as_dict() for p in self.providers],
        }


def _state(raw: Any) -> ReadyState:
    name = str(getattr(raw, "name", raw)).rsplit(".", 1)[-1].replace("_", "").lower()
    return {"ready": ReadyState.READY, "notready": ReadyState.NOT_READY, "notpresent": ReadyState.NOT_PRESENT}.get(
        name, ReadyState.UNKNOWN
    )


def _read_provider(raw: Any) -> CatalogEp:
    def text(attr: str) -> str:
        try:
            return str(getattr(raw, attr, "") or "")
        except OSError:
            return ""

    try:
        state = _state(raw.ready_state)
    except OSError:
        state = ReadyState.UNKNOWN
    try:
        certification = str(getattr(raw.certification, "name", raw.certification))
    except (OSError, AttributeError):
        certification = ""
    return CatalogEp(
        name=text("name"),
        version=text("version"),
        library_path=text("library_path"),
        state=state,
        certification=certification,
        package_family=text("package_family_name"),
    )


def read_catalog() -> CatalogReport:
    """The catalog's providers and their states. Never downloads, never raises."""
    build = runtime.windows_build()
    module = runtime.windowsml()
    if module is None:
        error = runtime.windowsml_error()
        if build == 0:
            return CatalogReport(False, "Windows ML exists only on Windows.", windows_build=0)
        if error:
            return CatalogReport(
                False,
                f"The Windows ML package could not be loaded ({error}). Reinstall NPU Studio.",
                windows_build=build,
            )
        return CatalogReport(
            False, "The Windows ML package (windowsml) is not installed in this build.", windows_build=build
        )
    version = runtime.package_version(module, PACKAGE)
    if 0 < build < WINDOWS_24H2_BUILD:
        return CatalogReport(
            False,
            f"Windows ML's execution providers need Windows 11 24H2 (build {WINDOWS_24H2_BUILD}) or newer; "
            f"this PC runs build {build}. Update Windows; until then NPU Studio uses its bundled plugin EPs.",
            windows_build=build,
            version=version,
        )
    try:
        catalog = module.EpCatalog()
        try:
            providers = tuple(_read_provider(p) for p in catalog.find_all_providers())
        finally:
            close = getattr(catalog, "close", None)
            if close is not None:
                close()
    except Exception as exc:  # the catalog is an extra: its failure must not stop discovery
        log.warning("Windows ML catalog failed: %s", exc)
        return CatalogReport(
            False, f"Windows ML's catalog could not be read: {explain_error(exc)}", windows_build=build, version=version
        )
    providers = tuple(p for p in providers if p.name)
    reason = "" if providers else (
        "Windows ML's catalog offers no execution provider for this PC (no supported NPU or GPU driver found)."
    )
    return CatalogReport(True, reason, providers, build, version)


# ---- errors in plain words ------------------------------------------------------------------------------

_UPDATE_HINT = "Settings > Windows Update"
_HRESULTS: dict[int, str] = {
    0x80073D3B: "Windows offers no package of this EP for this PC's hardware or Windows version",
    0x8024401C: "the PC could not reach Windows Update (offline, or a proxy / firewall blocks it)",
    0x80240438: "the PC could not reach Windows Update (offline, or a proxy / firewall blocks it)",
    0x80072EE7: "the PC could not reach Windows Update (no network name resolution)",
    0x80072EFD: "the PC could not reach Windows Update (no connection)",
    0x80240016: "Windows is installing other updates or waits for a restart; restart the PC and try again",
    0x80070BC2: "Windows waits for a restart to finish earlier updates; restart the PC and try again",
    0x80070422: "the Windows Update service is disabled on this PC",
    0x8024002E: "your organisation's policy blocks downloads from Windows Update",
    0x80073D01: "your organisation's policy blocks installing this package",
    0x80070005: "access was denied (your organisation may manage this PC's updates)",
    0x80070070: "there is not enough free disk space",
    0x800704C7: "the download was cancelled",
}


def explain_hresult(code: int) -> str:
    """An HRESULT from the catalog in plain words, with the code."""
    unsigned = code & 0xFFFFFFFF
    text = _HRESULTS.get(unsigned)
    if text is None and (unsigned >> 16) == 0x8024:  # the Windows Update facility
        text = (
            "Windows Update refused the download; updates may be paused, blocked by policy or waiting for a "
            f"restart ({_UPDATE_HINT})"
        )
    return f"{text or 'Windows ML reported an error'} (0x{unsigned:08X})"


def explain_error(exc: BaseException) -> str:
    code = getattr(exc, "winerror", None)
    if code is None and isinstance(exc, OSError) and isinstance(exc.errno, int) and exc.errno < 0:
        code = exc.errno
    if isinstance(code, int) and code != 0:
        return explain_hresult(code)
    return f"{type(exc).__name__}: {exc}"


# ---- getting an EP ready (may download) ------------------------------------------------------------------


class PrepareStatus(StrEnum):
    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"
    NEEDS_CONSENT = "needs consent"
    UNAVAILABLE = "unavailable"


@dataclass
class PrepareResult:
    ep: str
    status: PrepareStatus
    message: str
    seconds: float = 0.0
    progress: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == PrepareStatus.READY


Progress = Callable[[float], None]


def _find_raw(module: Any, name: str) -> tuple[Any, Any]:
    catalog = module.EpCatalog()
    for provider in catalog.find_all_providers():
        if str(provider.name) == name:
            return catalog, provider
    catalog.close()
    return None, None


def prepare(
    ep: str,
    *,
    allow_download: bool,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
    timeout: float = 1800.0,
) -> PrepareResult:
    """Get the catalog EP `ep` ready (Windows Update downloads it when it is not on the PC yet).

    `allow_download` must come from the user's consent; without it nothing is started. `on_progress`
    gets 0..1; setting `cancel` cancels the download. Never raises."""
    name = short_ep_name(ep)
    started = time.perf_counter()
    report = read_catalog()
    found = report.find(ep)
    if not report.available or found is None:
        why = report.reason or f"Windows ML's catalog does not offer {name} for this PC."
        return PrepareResult(ep, PrepareStatus.UNAVAILABLE, why)
    if found.state == ReadyState.READY:
        return PrepareResult(ep, PrepareStatus.READY, f"{name} {found.version} is ready.")
    if not allow_download:
        return PrepareResult(
            ep,
            PrepareStatus.NEEDS_CONSENT,
            f"{name} {found.version} must be downloaded by Windows Update first; it is only downloaded when you "
            "ask for it (Devices > Download, or `npu-studio devices --download-eps`).",
        )
    module = runtime.windowsml()
    progress: list[float] = []
    done = threading.Event()

    def tick(value: float) -> None:
        progress.append(float(value))
        if on_progress is not None:
            on_progress(float(value))

    catalog = None
    try:
        catalog, raw = _find_raw(module, ep)
        if raw is None:
            return PrepareResult(ep, PrepareStatus.UNAVAILABLE, f"{name} left Windows ML's catalog.")
        operation = raw.ensure_ready_async(on_complete=done.set, on_progress=tick)
        try:
            deadline = time.monotonic() + timeout
            while not done.wait(0.1):
                if cancel is not None and cancel.is_set():
                    operation.cancel()
                    return PrepareResult(
                        ep, PrepareStatus.CANCELLED, f"The {name} download was cancelled.",
                        time.perf_counter() - started, progress,
                    )
                if time.monotonic() > deadline:
                    operation.cancel()
                    return PrepareResult(
                        ep, PrepareStatus.FAILED, f"The {name} download did not finish in {timeout:.0f} s.",
                        time.perf_counter() - started, progress,
                    )
            operation.get_status(wait=True)  # raises OSError with the HRESULT when it failed
        finally:
            operation.close()
    except Exception as exc:
        log.warning("Windows ML could not get %s ready: %s", ep, exc)
        why = explain_error(exc)
        status = PrepareStatus.CANCELLED if "0x800704C7" in why else PrepareStatus.FAILED
        return PrepareResult(
            ep, status, f"Windows ML could not get {name} ready: {why}.", time.perf_counter() - started, progress
        )
    finally:
        if catalog is not None:
            catalog.close()
    return PrepareResult(ep, PrepareStatus.READY, f"{name} is ready.", time.perf_counter() - started, progress)


def windows_update_reachable(timeout: float = 3.0) -> bool:
    """Whether this PC is online at all (Windows' own connectivity probe host resolves and answers)."""
    import socket

    try:
        with socket.create_connection(("www.msftconnecttest.com", 80), timeout=timeout):
            return True
    except OSError:
        return False


def download_eps(
    eps: list[str] | None,
    *,
    consent: bool,
    online: Callable[[], bool] | None = None,
    on_progress: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
) -> list[PrepareResult]:
    """Get the catalog EPs `eps` (None: every one not ready) ready, after the user's consent.

    Offline, or without consent, nothing is attempted: each EP comes back NEEDS_CONSENT / FAILED with
    the reason. The caller re-runs discovery afterwards (which registers the EPs now ready)."""
    report = read_catalog()
    names = eps if eps is not None else [p.name for p in report.providers if p.state != ReadyState.READY]
    if not names:
        return []
    if not consent:
        return [prepare(name, allow_download=False) for name in names]
    if not (online or windows_update_reachable)():
        return [
            PrepareResult(
                name, PrepareStatus.FAILED,
                f"This PC is offline, so {short_ep_name(name)} was not downloaded. Connect to the internet and "
                "try again; nothing was changed.",
            )
            for name in names
        ]
    results = []
    for name in names:
        if cancel is not None and cancel.is_set():
            cancelled = f"The {short_ep_name(name)} download was cancelled."
            results.append(PrepareResult(name, PrepareStatus.CANCELLED, cancelled))
            continue

        def tick(value: float, ep: str = name) -> None:
            if on_progress is not None:
                on_progress(ep, value)

        results.append(prepare(name, allow_download=True, on_progress=tick, cancel=cancel))
    return results
