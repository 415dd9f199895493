"""The Models view's host: the model library (list, import, verify, remove, catalog downloads) in a
worker thread, so copying, hashing and downloading never block the window."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app import paths
from app.jobs import Host, Job, JobContext, Worker
from engines.errors import CancelledError, StudioError

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.05  # at most ~20 progress updates a second reach the UI


@dataclass(frozen=True)
class LibrarySnapshot:
    """Everything the Models view shows, read in one go in the worker."""

    entries: tuple[Any, ...] = ()  # engines.models.library.ModelEntry
    fits: dict[str, Any] = field(default_factory=dict)  # folder -> engines.models.fit.FitHint
    catalog: tuple[Any, ...] = ()  # engines.models.catalog.CatalogEntry
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
    """The models host's thread state: where the library lives, and how to read it."""

    def __init__(self, places: LibraryPlaces | None = None) -> None:
        super().__init__()
        self._places = places

    @property
    def places(self) -> LibraryPlaces:
        if self._places is None:
            self._places = LibraryPlaces.default()
        return self._places

    def snapshot(self) -> LibrarySnapshot:
        from engines.models.catalog import load_catalog
        from engines.models.downloads import partial_bytes
        from engines.models.fit import estimate_fit
        from engines.models.library import clean_leftovers, scan_library

        p = self.places
        clean_leftovers(p.user_dir)
        entries = tuple(scan_library(p.bundled_dir, p.user_dir))
        fits: dict[str, Any] = {}
        for entry in entries:
            if entry.usable:
                try:
                    fits[str(entry.folder)] = estimate_fit(entry.folder)
                except StudioError as exc:
                    log.info("no fit hint for %s: %s", entry.name, exc)
        catalog: tuple[Any, ...] = ()
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
        from engines.models.import_manifest import ClassifierOptions, ImportDetails

        options = None
        if classifier is not None:
            values = {k: v for k, v in classifier.items() if v is not None}
            values["labels"] = Path(values["labels"])
            options = ClassifierOptions(**values)
        fields = ImportDetails(**details)

        def run(context: JobContext) -> None:
            from engines.models.importer import import_model

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
            from engines.models.library import remove_model

            remove_model(name, self.places.bundled_dir, self.places.user_dir)
            context.send(self.removed, name)
            self._list(context)

        return self.submit("model removal", run)

    def verify(self, name: str) -> Job:
        def run(context: JobContext) -> None:
            from engines.models.library import find_model, verify_model

            context.status(f"Re-hashing {name}…")
            entry = find_model(name, self.places.bundled_dir, self.places.user_dir)
            context.send(self.verified, verify_model(entry.folder))

        return self.submit("model verification", run)

    def download(self, entry_id: str, allowed: bool) -> Job:
        def run(context: JobContext) -> None:
            from engines.models.catalog import find_entry, load_catalog
            from engines.models.downloads import DownloadProgress, download_model

            entry = find_entry(load_catalog(self.places.catalog), entry_id)
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


def wire_models_view(
    view: Any,
    host: ModelsHost,
    *,
    downloads_allowed: Callable[[], bool],
    on_allow_downloads: Callable[[bool], None],
    set_status: Callable[[str], None] | None = None,
) -> None:
    """Connect a ModelsView (passed in: app modules other than app.gui do not import ui) to its host."""
    view.refresh_requested.connect(host.refresh)
    view.import_requested.connect(host.import_model)
    view.remove_requested.connect(host.remove)
    view.verify_requested.connect(host.verify)
    view.download_requested.connect(lambda entry_id: host.download(entry_id, downloads_allowed()))
    view.cancel_requested.connect(host.cancel)
    view.allow_downloads_changed.connect(on_allow_downloads)
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
