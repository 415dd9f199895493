"""The Models view's host: the model library (list, import, verify, remove, catalog downloads) and the
models other tools keep on this machine (scan, add by reference) in a worker thread, so copying, hashing,
scanning and downloading never block the window."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from app import paths
from app.hosts.jobs import Host, Job, JobContext, Worker
from engines import CancelledError, StudioError

if TYPE_CHECKING:
    from engines import CancelToken, CatalogEntry, FitHint, MachineDevices, ModelEntry, ScanReport, VerifyReport

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.05  # at most ~20 progress updates a second reach the UI


@dataclass(frozen=True)
class LibrarySnapshot:
    """Everything the Models view shows, read in one go in the worker."""

    entries: tuple[ModelEntry, ...] = ()
    fits: dict[str, FitHint] = field(default_factory=dict)  # folder -> how it fits this machine
    catalog: tuple[CatalogEntry, ...] = ()
    partial_bytes: dict[str, int] = field(default_factory=dict)  # catalog id -> bytes kept for a resume
    catalog_error: str = ""
    user_dir: str = ""
    bundled_dir: str = ""


@dataclass(frozen=True)
class LibraryPlaces:
    bundled_dir: Path
    user_dir: Path
    catalog: Path

    @classmethod
    def default(cls) -> LibraryPlaces:
        return cls(paths.bundled_models_dir(), paths.user_models_dir(), paths.assets_dir() / "catalog.json")


class _Throttle:
    def __init__(self, emit: Callable[[str, int, int], None]) -> None:
        self._emit = emit
        self._last = 0.0

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self._last >= PROGRESS_INTERVAL_S:
            self._last = now
            self._emit(what, done, total)


class ModelsWorker(Worker):
    """The models host's thread state: where the library lives, how to read it, the last scan."""

    def __init__(self, places: LibraryPlaces | None = None) -> None:
        super().__init__()
        self._places = places
        self.found: ScanReport | None = None  # the last scan
        self.devices: MachineDevices | None = None  # discovered once

    def scan(self, folders: list[str], cancel: CancelToken | None, ask_foundry: bool = True) -> ScanReport:
        from engines import find_models, machine_devices

        if self.devices is None:
            self.devices = machine_devices()
        p = self.places
        self.found = find_models(folders, p.bundled_dir, p.user_dir, cancel=cancel, ask_foundry=ask_foundry,
                                 devices=self.devices)  # fmt: skip
        return self.found

    def marked(self) -> ScanReport | None:
        """The last scan with the library's references marked again (after an add or a removal)."""
        from engines import mark_added, scan_library

        if self.found is not None:
            entries = scan_library(self.places.bundled_dir, self.places.user_dir)
            self.found.models = mark_added(self.found.models, entries)
        return self.found

    @property
    def places(self) -> LibraryPlaces:
        if self._places is None:
            self._places = LibraryPlaces.default()
        return self._places

    def snapshot(self) -> LibrarySnapshot:
        from engines import clean_library_leftovers, estimate_fit, load_catalog, partial_bytes, scan_library

        p = self.places
        clean_library_leftovers(p.user_dir)
        entries = tuple(scan_library(p.bundled_dir, p.user_dir))
        fits: dict[str, FitHint] = {}
        for entry in entries:
            if entry.usable:
                try:
                    fits[str(entry.folder)] = estimate_fit(entry.model_folder)
                except StudioError as exc:
                    log.info("no fit hint for %s: %s", entry.name, exc)
        catalog: tuple[CatalogEntry, ...] = ()
        error = ""
        try:
            catalog = tuple(load_catalog(p.catalog))
        except StudioError as exc:
            error = exc.user_text()
        partials = {e.id: partial_bytes(p.user_dir, e.id) for e in catalog}
        return LibrarySnapshot(entries, fits, catalog, partials, error, str(p.user_dir), str(p.bundled_dir))


class ModelsHost(Host):
    worker: ModelsWorker
    listed = Signal(object)  # LibrarySnapshot
    progress = Signal(str, int, int)  # what, bytes done, bytes total
    imported = Signal(object)  # ModelEntry
    removed = Signal(str)
    verified = Signal(object)  # VerifyReport
    downloaded = Signal(object)  # ModelEntry
    cancelled = Signal(str)  # what was cancelled, in plain words
    scanned = Signal(object)  # engines.models.scan.ScanReport: the models other tools keep here

    def __init__(self, places: LibraryPlaces | None = None, parent: QObject | None = None) -> None:
        worker = ModelsWorker(places)
        super().__init__(worker, "models-host", parent)
        self.worker = worker

    @property
    def places(self) -> LibraryPlaces:
        return self.worker.places

    def _list(self, context: JobContext) -> None:
        context.send(self.listed, self.worker.snapshot())

    def refresh(self) -> Job:
        return self.submit("model list", self._list)

    def import_model(self, source: str, classifier: dict[str, Any] | None, details: dict[str, Any]) -> Job:
        """Import `source`; `classifier` and `details` are the view's plain fields (see ModelsView)."""
        from engines import ClassifierOptions, ImportDetails

        options = None
        if classifier is not None:
            values = {k: v for k, v in classifier.items() if v is not None}
            values["labels"] = Path(values["labels"])
            options = ClassifierOptions(**values)
        fields = ImportDetails(**details)

        def run(context: JobContext) -> None:
            from engines import import_model

            name = Path(source).name
            context.status(f"Importing {name}…")
            throttle = _Throttle(lambda *args: context.send(self.progress, *args))
            try:
                entry = import_model(Path(source), self.places.user_dir, bundled_dir=self.places.bundled_dir,
                                     classifier=options, details=fields, cancel=context.cancel,
                                     progress=lambda done, total: throttle(f"Importing {name}", done, total))
            except CancelledError as exc:
                context.send(self.cancelled, exc.user_text())
                return
            context.send(self.imported, entry)
            self._list(context)

        return self.submit("model import", run)

    def remove(self, name: str) -> Job:
        def run(context: JobContext) -> None:
            from engines import remove_model

            remove_model(name, self.places.bundled_dir, self.places.user_dir)
            context.send(self.removed, name)
            self._list(context)
            if self.worker.found is not None:
                context.send(self.scanned, self.worker.marked())

        return self.submit("model removal", run)

    def verify(self, name: str) -> Job:
        def run(context: JobContext) -> None:
            from engines import find_model, verify_model

            context.status(f"Re-hashing {name}…")
            entry = find_model(name, self.places.bundled_dir, self.places.user_dir)
            context.send(self.verified, verify_model(entry.folder))

        return self.submit("model verification", run)

    def scan(self, folders: list[str], ask_foundry: bool = True) -> Job:
        """Look for the models other tools keep here (engines/models/scan.py), in `folders` first."""

        def run(context: JobContext) -> None:
            context.status("Looking for models on this machine…")
            context.send(self.scanned, self.worker.scan(list(folders), context.cancel, ask_foundry))

        return self.submit("model scan", run)

    def add_found(self, folder: str, name: str, copy: bool, tool: str = "") -> Job:
        """Add a found folder to the library: by reference (every file hashed), or as a copy."""

        def run(context: JobContext) -> None:
            from engines import add_found_folder, found_model_name

            what = ("Copying " if copy else "Hashing ") + (name or found_model_name(Path(folder)))
            context.status(what + "…")
            throttle = _Throttle(lambda *args: context.send(self.progress, *args))
            try:
                entry = add_found_folder(Path(folder), self.places.user_dir, name=name or None, copy=copy,
                                         bundled_dir=self.places.bundled_dir, tool=tool, cancel=context.cancel,
                                         progress=lambda done, total: throttle(what, done, total))  # fmt: skip
            except CancelledError as exc:
                context.send(self.cancelled, exc.user_text())
                return
            context.send(self.imported, entry)
            self._list(context)
            context.send(self.scanned, self.worker.marked())

        return self.submit("adding a model found on this machine", run)

    def download(self, entry_id: str, allowed: bool) -> Job:
        def run(context: JobContext) -> None:
            from engines import DownloadProgress, download_model, find_catalog_entry, load_catalog

            entry = find_catalog_entry(load_catalog(self.places.catalog), entry_id)
            throttle = _Throttle(lambda *args: context.send(self.progress, *args))

            def on_progress(p: DownloadProgress) -> None:
                what = f"Downloading {entry.display_name} ({p.files_done}/{p.files_total} files)"
                throttle(what, p.done, p.total)

            context.status(f"Downloading {entry.display_name}…")
            try:
                model = download_model(entry, self.places.user_dir, allowed=allowed,
                                       bundled_dir=self.places.bundled_dir, progress=on_progress, cancel=context.cancel)
            except CancelledError as exc:
                context.send(self.cancelled, exc.user_text())
                self._list(context)  # the partial download shows in the catalog
                return
            context.send(self.downloaded, model)
            self._list(context)

        return self.submit("model download", run)


class ModelsViewSide(Protocol):
    """What the models host talks to in the Models view (ui.models.view.ModelsView)."""

    @property
    def refresh_requested(self) -> SignalInstance: ...
    @property
    def import_requested(self) -> SignalInstance: ...
    @property
    def remove_requested(self) -> SignalInstance: ...
    @property
    def verify_requested(self) -> SignalInstance: ...
    @property
    def download_requested(self) -> SignalInstance: ...
    @property
    def cancel_requested(self) -> SignalInstance: ...
    @property
    def allow_downloads_changed(self) -> SignalInstance: ...
    @property
    def scan_requested(self) -> SignalInstance: ...
    @property
    def add_found_requested(self) -> SignalInstance: ...
    @property
    def folders_changed(self) -> SignalInstance: ...
    def set_model_folders(self, folders: list[str]) -> None: ...
    def show_found(self, report: ScanReport) -> None: ...
    def show_snapshot(self, snapshot: LibrarySnapshot) -> None: ...
    def show_progress(self, what: str, done: int, total: int) -> None: ...
    def show_imported(self, entry: ModelEntry) -> None: ...
    def show_removed(self, name: str) -> None: ...
    def show_verified(self, report: VerifyReport) -> None: ...
    def show_downloaded(self, entry: ModelEntry) -> None: ...
    def show_cancelled(self, text: str) -> None: ...
    def show_error(self, error: object) -> None: ...


def wire_models_view(
    view: ModelsViewSide,
    host: ModelsHost,
    *,
    downloads_allowed: Callable[[], bool],
    on_allow_downloads: Callable[[bool], None],
    set_status: Callable[[str], None] | None = None,
    model_folders: Callable[[], list[str]] = list,
    on_folders_changed: Callable[[list[str]], None] | None = None,
) -> None:
    """Connect a ModelsView (passed in: app modules other than app.gui do not import ui) to its host.
    `model_folders()` are the folders the scan looks in first (the setting); the view's edits of them
    reach `on_folders_changed` and start a new scan."""
    view.refresh_requested.connect(host.refresh)
    view.import_requested.connect(host.import_model)
    view.remove_requested.connect(host.remove)
    view.verify_requested.connect(host.verify)
    view.download_requested.connect(lambda entry_id: host.download(entry_id, downloads_allowed()))
    view.cancel_requested.connect(host.cancel)
    view.allow_downloads_changed.connect(on_allow_downloads)
    view.scan_requested.connect(lambda: host.scan(model_folders()))
    view.add_found_requested.connect(host.add_found)

    def folders_changed(folders: list[str]) -> None:
        if on_folders_changed is not None:
            on_folders_changed(list(folders))
        host.scan(list(folders))

    view.folders_changed.connect(folders_changed)
    view.set_model_folders(model_folders())
    host.scanned.connect(view.show_found)
    host.listed.connect(view.show_snapshot)
    host.progress.connect(view.show_progress)
    host.imported.connect(view.show_imported)
    host.removed.connect(view.show_removed)
    host.verified.connect(view.show_verified)
    host.downloaded.connect(view.show_downloaded)
    host.cancelled.connect(view.show_cancelled)
    host.failed.connect(view.show_error)
    if set_status is not None:
        host.status.connect(set_status)
