"""A fake `windowsml` package (Windows ML's EP catalog, a ctypes wrapper on Windows only), shaped like
windowsml 2.5: `EpCatalog().find_all_providers()` -> providers with name, version, library_path,
ready_state (EpReadyState), certification, `ensure_ready()` and `ensure_ready_async(on_complete,
on_progress)` -> an operation with get_status(wait), cancel() and close(). Failures are OSError with the
HRESULT in `winerror` (signed, as ctypes reports it). A provider that becomes ready adds its devices to
the fake onnxruntime once registered, like the real catalog EP package."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from tests.unit.fake_ort import FakeEpDevice, FakeHw, HwType


class EpReadyState(IntEnum):
    Ready = 0
    NotReady = 1
    NotPresent = 2


class EpCertification(IntEnum):
    Unknown = 0
    Certified = 1
    Uncertified = 2


class WinError(OSError):
    def __init__(self, hresult: int, text: str = "") -> None:
        signed = hresult - (1 << 32) if hresult & 0x80000000 else hresult
        super().__init__(f"[WinError {signed}] {text or 'Windows ML error'}")
        self.winerror = signed


@dataclass
class FakeCatalogEp:
    name: str
    version: str
    library: str
    state: EpReadyState = EpReadyState.Ready
    certification: EpCertification = EpCertification.Certified
    ensure_error: int = 0  # HRESULT the download fails with (0 = it succeeds)
    progress_steps: tuple[float, ...] = (0.25, 0.5, 1.0)
    hold: threading.Event | None = None  # the download waits for this (to test cancel)
    ensure_calls: int = 0

    @property
    def library_path(self) -> str:
        return self.library if self.state == EpReadyState.Ready else ""

    @property
    def ready_state(self) -> EpReadyState:
        return self.state

    @property
    def package_family_name(self) -> str:
        return f"MicrosoftCorporationII.WinML.{self.name}_8wekyb3d8bbwe"

    def ensure_ready(self) -> None:
        self.ensure_calls += 1
        if self.ensure_error:
            raise WinError(self.ensure_error)
        self.state = EpReadyState.Ready

    def ensure_ready_async(
        self, on_complete: Callable[[], None] | None = None, on_progress: Callable[[float], None] | None = None
    ) -> FakeOperation:
        self.ensure_calls += 1
        return FakeOperation(self, on_complete, on_progress)


class FakeOperation:
    def __init__(self, ep: FakeCatalogEp, on_complete: Any, on_progress: Any) -> None:
        self.ep = ep
        self.cancelled = threading.Event()
        self.error = 0
        self.closed = False
        self._done = threading.Event()

        def work() -> None:
            for step in ep.progress_steps:
                if ep.hold is not None:
                    ep.hold.wait(5)
                if self.cancelled.is_set():
                    self.error = 0x800704C7
                    break
                if on_progress is not None:
                    on_progress(step)
            else:
                if ep.ensure_error:
                    self.error = ep.ensure_error
                else:
                    ep.state = EpReadyState.Ready
            self._done.set()
            if on_complete is not None:
                on_complete()

        self._thread = threading.Thread(target=work, daemon=True)
        self._thread.start()

    def get_status(self, wait: bool = False) -> None:
        if wait:
            self._done.wait(10)
        if self.error:
            raise WinError(self.error)

    def cancel(self) -> None:
        self.cancelled.set()
        if self.ep.hold is not None:
            self.ep.hold.set()

    def close(self) -> None:
        self._done.wait(10)
        self.closed = True


@dataclass
class FakeWindowsMl:
    """The module: `providers` is what the catalog lists; `enum_error` makes listing fail."""

    providers: list[FakeCatalogEp] = field(default_factory=list)
    enum_error: int = 0
    __version__: str = "2.5.96"
    EpReadyState: Any = EpReadyState
    EpCertification: Any = EpCertification

    def EpCatalog(self) -> FakeEpCatalog:  # the real package's class name
        return FakeEpCatalog(self)


class FakeEpCatalog:
    def __init__(self, module: FakeWindowsMl) -> None:
        self.module = module
        self.closed = False

    def find_all_providers(self) -> list[FakeCatalogEp]:
        if self.module.enum_error:
            raise WinError(self.module.enum_error)
        return list(self.module.providers)

    def close(self) -> None:
        self.closed = True


def npu_device(
    ep: str, vendor: str, vendor_id: int, device_id: int = 0, driver: str = "", text: str = ""
) -> FakeEpDevice:
    meta = {"Description": text or f"{vendor} NPU"}
    if driver:
        meta["DriverVersion"] = driver
    return FakeEpDevice(ep, vendor, FakeHw(HwType.NPU, vendor, vendor_id, device_id, meta), {"version": ""})
