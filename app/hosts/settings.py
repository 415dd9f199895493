"""The Settings view's host: the compiled-model (EPContext) cache and the diagnostics export, in a
worker thread, so neither walking the cache folder, deleting compiled models nor running the doctor
ever blocks the window.

The settings themselves (theme, downloads, system prompt) are plain values the composition root
(app.gui) keeps and saves; this module only does the slow, disk- and runtime-bound work.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from app import paths
from app.hosts.jobs import Host, Job, JobContext, Worker
from engines import IMAGE_SUFFIXES, CacheEntry, CompiledModelCache, StorageError

log = logging.getLogger(__name__)

DOCTOR_RUNS = 10  # timed classifier calls per device: enough for a median, quick enough to wait for


@dataclass(frozen=True)
class CacheListing:
    """The compiled-model cache as the Settings view shows it."""

    folder: str
    entries: tuple[CacheEntry, ...]  # newest first
    total_bytes: int


@dataclass(frozen=True)
class CacheRemoval:
    """What a "Remove selected" or "Clear all" did."""

    removed: int
    freed_bytes: int
    kept: tuple[str, ...] = ()  # model names that could not be deleted (a file still in use)
    cleared: bool = False  # "Clear all" (True) or "Remove selected"


@dataclass(frozen=True)
class DiagnosticsExport:
    """A finished diagnostics export."""

    path: str
    summary: str  # "2 ok, 1 skipped, 2 unavailable"
    failed_checks: int
    seconds: float


def default_places() -> dict[str, str]:
    """The folders (and the log file) the Settings view shows and opens."""
    from app.logs import log_file
    from app.storage.settings import settings_path

    return {
        "data": str(paths.data_dir()),
        "logs": str(paths.log_dir()),
        "cache": str(paths.cache_dir()),
        "compiled": str(paths.compiled_cache_dir()),
        "log_file": log_file(),
        "settings_file": str(settings_path()),
    }


def installed_classifier(folder: Path | None) -> Path | None:
    """The classifier folder for the doctor's classifier check, when it is a complete model folder."""
    from engines import has_manifest

    return folder if folder is not None and has_manifest(folder) else None


def _copy_into_place(source: Path, target: Path) -> None:
    """Copy `source` to `target` through a temporary name, so a failed copy leaves no half zip."""
    partial = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise StorageError(
            f"The diagnostics zip could not be written to {target}: {exc.strerror or exc}.",
            "Choose another folder (one you can write to, with some free space) and export again.",
        ) from exc


class SettingsWorker(Worker):
    """The settings host's thread state: the cache folder and the doctor (tests: their own)."""

    def __init__(self, cache_root: Path | None = None, doctor: Callable[..., Any] | None = None) -> None:
        super().__init__()
        self.cache_root = cache_root
        self.doctor = doctor

    def cache(self) -> CompiledModelCache:
        return CompiledModelCache(self.cache_root if self.cache_root is not None else paths.compiled_cache_dir())

    def listing(self) -> CacheListing:
        cache = self.cache()
        return CacheListing(str(cache.root), tuple(cache.entries()), cache.total_bytes())


class SettingsHost(Host):
    worker: SettingsWorker
    cache_listed = Signal(object)  # CacheListing
    cache_removed = Signal(object)  # CacheRemoval
    diagnostics_progress = Signal(str)
    diagnostics_exported = Signal(object)  # DiagnosticsExport

    def __init__(
        self, cache_root: Path | None = None, doctor: Callable[..., Any] | None = None, parent: QObject | None = None
    ) -> None:
        worker = SettingsWorker(cache_root, doctor)
        super().__init__(worker, "settings-host", parent)
        self.worker = worker

    def list_cache(self) -> Job:
        def listing(context: JobContext) -> None:
            context.send(self.cache_listed, self.worker.listing())

        return self.submit("listing compiled models", listing)

    def remove_cache(self, digests: list[str]) -> Job:
        wanted = list(digests)

        def remove(context: JobContext) -> None:
            cache = self.worker.cache()
            # Only entries of the current listing are removed: a digest names a folder under the cache root.
            known = {entry.digest: entry for entry in cache.entries()}
            removed, freed, kept = 0, 0, []
            for digest in wanted:
                entry = known.get(digest)
                if entry is None:
                    continue
                if cache.remove(digest):
                    removed += 1
                    freed += entry.size_bytes
                else:
                    kept.append(entry.model_name or digest)
            context.send(self.cache_removed, CacheRemoval(removed, freed, tuple(kept)))
            context.send(self.cache_listed, self.worker.listing())

        return self.submit("removing compiled models", remove)

    def clear_cache(self) -> Job:
        def clear(context: JobContext) -> None:
            removed, freed = self.worker.cache().clear()
            left = self.worker.listing()
            kept = tuple(entry.model_name or entry.digest for entry in left.entries)
            context.send(self.cache_removed, CacheRemoval(removed, freed, kept, cleared=True))
            context.send(self.cache_listed, left)

        return self.submit("clearing compiled models", clear)

    def export_diagnostics(self, target: str, classifier: Path | None = None) -> Job:
        destination = Path(target)

        def export(context: JobContext) -> None:
            from app import diagnostics
            from engines import run_doctor, write_doctor_report

            doctor = self.worker.doctor or run_doctor

            def progress(text: str) -> None:
                context.send(self.diagnostics_progress, text)
                context.status(f"Diagnostics: {text}")

            started = time.perf_counter()
            samples_dir = paths.assets_dir() / "samples"
            samples = sorted(p for p in samples_dir.glob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
            cache_root = self.worker.cache_root
            report = doctor(
                classifier=classifier,
                chat_model=None,
                chat=None,  # the chat model stays in its own process; `npu-studio doctor` runs the chat check
                samples=samples,
                cache_dir=cache_root if cache_root is not None else paths.compiled_cache_dir(),
                runs=DOCTOR_RUNS,
                on_progress=progress,
            )
            progress("Writing the zip…")
            with tempfile.TemporaryDirectory(prefix="npu-studio-diagnostics-") as tmp:
                _text, _json, zip_path = write_doctor_report(
                    report, Path(tmp), diagnostics.attachments(), redact=diagnostics.redactor().data,
                    contents=diagnostics.contents(),
                )
                _copy_into_place(zip_path, destination)
            counts = report.counts()
            summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
            log.info("diagnostics exported to %s (%s)", target, summary)
            elapsed = time.perf_counter() - started
            done = DiagnosticsExport(str(target), summary, counts.get("failed", 0), elapsed)
            context.send(self.diagnostics_exported, done)

        return self.submit("diagnostics export", export)


class CacheCard(Protocol):
    """The Settings view's compiled-models card (ui.settings.cache.CompiledModelsCard)."""

    @property
    def refresh_requested(self) -> SignalInstance: ...
    @property
    def remove_requested(self) -> SignalInstance: ...
    @property
    def clear_requested(self) -> SignalInstance: ...
    def show_listing(self, listing: CacheListing) -> None: ...
    def show_removed(self, result: CacheRemoval) -> None: ...


class DiagnosticsCard(Protocol):
    """The Settings view's diagnostics card (ui.settings.diagnostics.DiagnosticsCard)."""

    @property
    def export_requested(self) -> SignalInstance: ...
    def set_places(self, places: dict[str, str]) -> None: ...
    def set_contents(self, lines: list[str]) -> None: ...
    def show_progress(self, text: str) -> None: ...
    def show_exported(self, result: DiagnosticsExport) -> None: ...


class SettingsCards(Protocol):
    """What the settings host talks to in the Settings view (ui.settings.view.SettingsView)."""

    @property
    def cache(self) -> CacheCard: ...
    @property
    def diagnostics(self) -> DiagnosticsCard: ...
    def show_error(self, error: object) -> None: ...


def wire_settings_view(
    view: SettingsCards,
    host: SettingsHost,
    *,
    classifier_folder: Callable[[], Path | None] = lambda: None,
    places: dict[str, str] | None = None,
    set_status: Callable[[str], None] | None = None,
) -> None:
    """Connect a SettingsView's cards (passed in: app modules other than app.gui do not import ui) to the
    host: the cache and diagnostics requests go to the worker, the results come back to the cards."""
    from app.diagnostics import contents

    cache, diagnostics_card = view.cache, view.diagnostics
    diagnostics_card.set_places(places if places is not None else default_places())
    diagnostics_card.set_contents(contents())
    cache.refresh_requested.connect(host.list_cache)
    cache.remove_requested.connect(host.remove_cache)
    cache.clear_requested.connect(host.clear_cache)
    diagnostics_card.export_requested.connect(
        lambda target: host.export_diagnostics(target, installed_classifier(classifier_folder()))
    )
    host.cache_listed.connect(cache.show_listing)
    host.cache_removed.connect(cache.show_removed)
    host.diagnostics_progress.connect(diagnostics_card.show_progress)
    host.diagnostics_exported.connect(diagnostics_card.show_exported)
    host.failed.connect(view.show_error)
    if set_status is not None:
        host.status.connect(set_status)
