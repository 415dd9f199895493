"""The Devices view's host: device discovery and Windows ML's execution-provider download, on its own thread.

Discovery imports ONNX Runtime inside the worker thread, on first use, so the main window never waits for it.
"""

from __future__ import annotations

import threading
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.hosts.jobs import SHUTDOWN_TIMEOUT_MS, Host, Job, JobContext, Worker


class DevicesWorker(Worker):
    def __init__(self) -> None:
        super().__init__()
        self.cancel_download = threading.Event()  # set from the GUI thread


class DevicesHost(Host):
    worker: DevicesWorker
    devices_found = Signal(object)  # engines.runtime.devices.DiscoveryReport
    download_progress = Signal(str, float)  # EP name, 0..1
    downloaded = Signal(object)  # list of engines.runtime.catalog.PrepareResult

    def __init__(self, parent: QObject | None = None) -> None:
        worker = DevicesWorker()
        super().__init__(worker, "devices-host", parent)
        self.worker = worker

    def discover(self) -> Job:
        """Look for devices (one operation on the generic runner: app/hosts/jobs.py)."""

        def find(context: JobContext) -> Any:
            context.status("Loading ONNX Runtime and looking for devices…")
            from engines import discover

            return discover()

        job = self.submit("device discovery", find)
        job.returned.connect(self.devices_found)
        return job

    def download_eps(self, names: list[str]) -> Job:
        """Windows ML's EP download, asked for by the user (the view asked for consent first); then the
        devices are discovered again so the new EPs are registered and listed."""
        wanted = list(names)
        cancel = self.worker.cancel_download

        def download(context: JobContext) -> Any:
            from engines import discover, download_eps

            cancel.clear()
            context.status("Downloading execution providers from Windows Update…")
            results = download_eps(
                wanted, consent=True, cancel=cancel,
                on_progress=lambda ep, value: context.send(self.download_progress, ep, value),
            )
            context.send(self.downloaded, results)
            return discover()

        job = self.submit("execution provider download", download)
        job.returned.connect(self.devices_found)
        return job

    def cancel_download(self) -> None:
        self.worker.cancel_download.set()

    def shutdown(self, timeout_ms: int = SHUTDOWN_TIMEOUT_MS) -> bool:
        self.worker.cancel_download.set()  # a download in progress is cancelled, not waited for
        return super().shutdown(timeout_ms)
