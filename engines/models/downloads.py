"""Catalog downloads from the Hugging Face Hub, only when the user asks for one.

Importing this module touches no network (and does not even import ``huggingface_hub``). A download:

1. lists the variant's files through the Hub API (``HfApi.list_repo_tree`` on the catalog's subfolder,
   filtered with the catalog's allow-patterns),
2. checks the free disk space against their sizes before the first byte,
3. fetches each file with ``huggingface_hub``'s ``get_hf_file_metadata`` + ``http_get`` into
   ``<library>/.downloads/<id>/`` with progress, cancel (checked on every chunk) and resume: a partial
   file is kept under a stable name and continued with an HTTP range request by the next attempt, in the
   same run (dropped connection) or a later one (cancel, crash, network gone),
4. verifies each file's SHA-256 where the catalog or the Hub (LFS) knows it; a mismatch deletes the
   download and fails,
5. validates the folder like an import and moves it into the library in one rename.

The endpoint is explicit (``endpoint=`` or ``HF_ENDPOINT`` read at call time, never at import time), so
tests point it at a loopback server.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from engines import jsonfile, shared_files
from engines.errors import CancelledError, ModelError, StorageError, StudioError
from engines.models.catalog import CatalogEntry
from engines.models.download_errors import DownloadError, NotReached, network_error
from engines.models.library import (
    ModelEntry,
    check_free_space,
    check_new_name,
    commit_folder,
    format_bytes,
)
from engines.models.manifest import sha256_file
from engines.types import CancelToken

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
DOWNLOADS_DIR = ".downloads"
_CHUNK = 1 << 20
_STATE = "state.json"


# --------------------------------------------------------------------------------------------
# Download
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteFile:
    repo_path: str  # path in the repository
    rel: str  # path inside the model folder (relative to the subfolder)
    size: int
    sha256: str | None  # expected content hash, when known
    sha_source: str = ""  # "catalog" or "hub"


@dataclass(frozen=True)
class DownloadProgress:
    file: str
    file_done: int
    file_total: int
    done: int  # bytes of the whole download on disk (resumed bytes included)
    total: int
    files_done: int
    files_total: int

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


DownloadProgressCallback = Callable[[DownloadProgress], None]


def resolve_endpoint(endpoint: str | None = None) -> str:
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def staging_dir(user_dir: Path, entry_id: str) -> Path:
    return user_dir / DOWNLOADS_DIR / entry_id


def partial_bytes(user_dir: Path, entry_id: str) -> int:
    """Bytes already on disk for an unfinished download of `entry_id` (0 when none)."""
    root = staging_dir(user_dir, entry_id)
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0


def _payload_bytes(root: Path) -> int:
    """Bytes of model files under a staging folder (fetched or partial), its bookkeeping left out."""
    return sum(p.stat().st_size for d in (root / "files", root / "parts") if d.is_dir() for p in d.rglob("*")
               if p.is_file())  # fmt: skip


def discard_partial(user_dir: Path, entry_id: str) -> bool:
    root = staging_dir(user_dir, entry_id)
    if not root.exists():
        return False
    shutil.rmtree(root, ignore_errors=True)
    return True


def _quiet_hub() -> None:
    """Import huggingface_hub with its telemetry off. Without this, building the request headers fetches an
    "agent harness" list from huggingface.co (huggingface_hub 2.x) whatever endpoint the download uses: a
    request the user did not ask for, to a host they may not have chosen."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        import huggingface_hub.constants
    except ImportError:
        raise DownloadError(
            "Downloads need the huggingface-hub package, which this installation does not include.",
            'Install it with `pip install "npu-studio[downloads]"`, or import a model you already have with '
            "`npu-studio models import PATH`.",
        ) from None
    huggingface_hub.constants.HF_HUB_DISABLE_TELEMETRY = True
    # The hub's logger prints its warnings (a retry, a refused connection) itself *and* passes them on to
    # the application's handlers: each would show twice. They are said once, by the application's.
    from huggingface_hub.utils import logging as hub_logging  # (adds that handler when first imported)

    hub_log = hub_logging.get_logger("huggingface_hub")
    for handler in list(hub_log.handlers):
        if type(handler) is logging.StreamHandler:
            hub_log.removeHandler(handler)
    # Cancel is checked once per chunk: 1 MiB keeps it prompt on a slow link (the default is 10 MB).
    constants = huggingface_hub.constants
    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, _CHUNK)


def list_remote_files(entry: CatalogEntry, endpoint: str) -> list[RemoteFile]:
    """The variant's files, from the Hub API (sizes and LFS SHA-256), filtered by the allow-patterns."""
    _quiet_hub()
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=endpoint, token=False, library_name="npu-studio")
    try:
        tree = api.list_repo_tree(
            entry.repo_id, path_in_repo=entry.subfolder or None, revision=entry.revision, recursive=True
        )
        items = [item for item in tree if isinstance(item, RepoFile)]
    except Exception as exc:
        raise network_error(entry, exc) from exc
    catalog_files = {f.path: f for f in entry.files}
    prefix = f"{entry.subfolder}/" if entry.subfolder else ""
    found: list[RemoteFile] = []
    for item in items:
        if not any(fnmatch.fnmatch(item.path, pattern) for pattern in entry.allow_patterns):
            continue
        rel = item.path[len(prefix):]
        if not rel or rel.startswith(".") or "/." in rel:
            continue
        known = catalog_files.get(rel)
        lfs_sha = item.lfs.sha256 if item.lfs is not None else None
        if known is not None and known.sha256:
            sha, source = known.sha256, "catalog"
        elif lfs_sha:
            sha, source = str(lfs_sha).lower(), "hub"
        else:
            sha, source = None, ""
        found.append(RemoteFile(item.path, rel, int(item.size), sha, source))
    missing = sorted(set(catalog_files) - {f.rel for f in found})
    if missing:
        raise DownloadError(
            f"{entry.repo_id} no longer has {', '.join(missing[:3])} in {entry.subfolder or 'its root'}.",
            "The repository changed; update NPU Studio for a current catalog.",
        )
    if not found:
        raise DownloadError(f"{entry.repo_id} has no files under {entry.subfolder or 'its root'}.",
                            "The repository changed; update NPU Studio for a current catalog.")
    return sorted(found, key=lambda f: f.rel)


def download_model(
    entry: CatalogEntry,
    user_dir: Path,
    *,
    allowed: bool,
    bundled_dir: Path | None = None,
    name: str | None = None,
    endpoint: str | None = None,
    progress: DownloadProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> ModelEntry:
    """Download a catalog model into the library. `allowed` is the user's consent (the setting or a
    one-off flag): without it nothing touches the network."""
    if not allowed:
        raise DownloadError(
            "Downloads are turned off (setting allow_downloads is false), so nothing was downloaded.",
            "Turn on 'Allow downloads' in the settings, or pass --allow-download for this one download.",
        )
    name = check_new_name(name or entry.id, user_dir, bundled_dir)
    endpoint = resolve_endpoint(endpoint)
    user_dir.mkdir(parents=True, exist_ok=True)
    root = staging_dir(user_dir, entry.id)
    had = _payload_bytes(root)
    try:
        return _download(entry, user_dir, root, name, endpoint, bundled_dir, progress, cancel)
    except NotReached as exc:
        kept = _payload_bytes(root)
        if kept == 0:
            shutil.rmtree(root, ignore_errors=True)  # nothing came: no empty staging folder is left either
        raise exc.said(endpoint, fetched=max(0, kept - had), kept=kept) from exc.__cause__


def _download(
    entry: CatalogEntry,
    user_dir: Path,
    root: Path,
    name: str,
    endpoint: str,
    bundled_dir: Path | None,
    progress: DownloadProgressCallback | None,
    cancel: CancelToken | None,
) -> ModelEntry:
    files_dir, parts_dir = root / "files", root / "parts"
    remote = list_remote_files(entry, endpoint)
    total = sum(f.size for f in remote)
    have = partial_bytes(user_dir, entry.id)
    check_free_space(user_dir, max(0, total - have), "download")
    files_dir.mkdir(parents=True, exist_ok=True)
    parts_dir.mkdir(parents=True, exist_ok=True)
    state = _read_state(root)
    state.update({"id": entry.id, "repo_id": entry.repo_id, "revision": entry.revision})
    digests: dict[str, str] = {}
    done_before = 0
    commits: set[str] = set()
    for index, f in enumerate(remote):
        if cancel is not None and cancel.cancelled:
            raise _cancelled(user_dir, entry)
        base = done_before
        counts = index

        def report(file_done: int, file_total: int, f: RemoteFile = f, base: int = base, counts: int = counts) -> None:
            if progress is not None:
                progress(DownloadProgress(f.rel, file_done, file_total, base + file_done, total, counts, len(remote)))

        digest, commit = _fetch(entry, f, files_dir, parts_dir, state, root, endpoint, report, cancel, user_dir)
        digests[f.rel] = digest
        if commit:
            commits.add(commit)
        done_before += f.size
    if progress is not None:
        progress(DownloadProgress("", total, total, total, total, len(remote), len(remote)))
    return _commit(entry, user_dir, name, files_dir, root, digests, sorted(commits), bundled_dir)


def _commit(
    entry: CatalogEntry,
    user_dir: Path,
    name: str,
    files_dir: Path,
    root: Path,
    digests: dict[str, str],
    commits: list[str],
    bundled_dir: Path | None,
) -> ModelEntry:
    from engines.models.import_manifest import ImportDetails, genai_manifest

    details = ImportDetails(
        name=name,
        display_name=entry.display_name,
        licence=entry.licence,
        precision=entry.precision,
        devices=entry.devices,
        source={
            "catalog_id": entry.id,
            "repo_id": entry.repo_id,
            "revision": entry.revision,
            "commit": commits[-1] if commits else "",
            "subfolder": entry.subfolder,
            "url": entry.url,
            "publisher": entry.publisher,
        },
    )
    try:
        model = commit_folder(
            files_dir,
            user_dir,
            name,
            lambda folder, n: genai_manifest(folder, n, folder, details),
            digests,
            bundled_dir=bundled_dir,
            rehash=False,  # every file was hashed from disk when it was verified
        )
    except ModelError as exc:
        shutil.rmtree(root, ignore_errors=True)  # a finished download that is not a usable model: no use resuming
        raise ModelError(f"The downloaded {entry.id} is not a usable model: {exc.message}",
                         "The download was removed; the catalog entry may be out of date.") from exc
    shutil.rmtree(root, ignore_errors=True)
    return model


def _read_state(root: Path) -> dict[str, Any]:
    with contextlib.suppress(jsonfile.JsonFileError):
        data = jsonfile.read_json(root / _STATE)
        if isinstance(data, dict) and isinstance(data.get("files"), dict):
            return data
    return {"files": {}}


def _write_state(root: Path, state: Mapping[str, Any]) -> None:
    shared_files.write_atomically(root / _STATE, json.dumps(state, indent=1).encode("utf-8"), mode=0o644)


def _fetch(
    entry: CatalogEntry,
    f: RemoteFile,
    files_dir: Path,
    parts_dir: Path,
    state: dict[str, Any],
    root: Path,
    endpoint: str,
    report: Callable[[int, int], None],
    cancel: CancelToken | None,
    user_dir: Path,
) -> tuple[str, str]:
    """One file, resumed when a partial copy from the same remote version exists; returns (sha256, commit)."""
    _quiet_hub()
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(entry.repo_id, f.repo_path, revision=entry.revision, endpoint=endpoint)
    try:
        meta = get_hf_file_metadata(url, token=False, endpoint=endpoint)
    except Exception as exc:
        raise network_error(entry, exc) from exc
    size = meta.size if meta.size is not None else f.size
    etag = meta.etag or ""
    final, part = files_dir / f.rel, parts_dir / f"{f.rel}.part"
    record = state["files"].get(f.rel, {})
    if final.is_file() and record.get("etag") == etag and record.get("sha256") and final.stat().st_size == size:
        report(size, size)
        return str(record["sha256"]), str(meta.commit_hash or "")
    if record.get("etag") != etag:  # another version of the file: a partial copy of the old one is useless
        part.unlink(missing_ok=True)
        final.unlink(missing_ok=True)
    state["files"][f.rel] = {"etag": etag, "size": size}
    _write_state(root, state)
    part.parent.mkdir(parents=True, exist_ok=True)
    resume = part.stat().st_size if part.exists() else 0
    if resume > size:
        part.unlink()
        resume = 0
    report(resume, size)
    _http_get(entry, meta.location, part, resume, size, report, cancel, user_dir)
    digest = _sha256(part, cancel, user_dir, entry)
    expected = f.sha256 or (etag.lower() if len(etag) == 64 and all(c in "0123456789abcdef" for c in etag) else None)
    if expected and digest != expected:
        shutil.rmtree(root, ignore_errors=True)
        raise ModelError(
            f"{f.rel} from {entry.repo_id} failed its checksum: sha256 {digest[:16]}..., expected "
            f"{expected[:16]}... (from the {f.sha_source or 'hub'}). The download was deleted.",
            "Try again later; if it keeps failing, the file on the Hub differs from what the catalog expects.",
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(part, final)
    state["files"][f.rel] = {"etag": etag, "size": size, "sha256": digest}
    _write_state(root, state)
    return digest, str(meta.commit_hash or "")


def _http_get(
    entry: CatalogEntry,
    url: str,
    part: Path,
    resume: int,
    size: int,
    report: Callable[[int, int], None],
    cancel: CancelToken | None,
    user_dir: Path,
) -> None:
    from huggingface_hub.file_download import http_get

    class _Progress:
        """The progress bar huggingface_hub drives: reports bytes and checks cancel on every chunk (it is
        called before the chunk is written, so the partial file always holds whole chunks)."""

        def __init__(self, **kwargs: Any) -> None:
            self.n = int(kwargs.get("initial") or 0)

        def update(self, n: int | float | None = 1) -> None:
            if cancel is not None and cancel.cancelled:
                raise CancelledError("Download cancelled.")
            self.n += int(n or 0)
            report(self.n, size)

        def close(self) -> None:
            pass

        def __enter__(self) -> _Progress:
            return self

        def __exit__(self, *args: object) -> None:
            pass

    try:
        with open(part, "ab") as handle:
            http_get(url, handle, resume_size=resume, expected_size=size, displayed_filename=part.name,
                     tqdm_class=cast(Any, _Progress))
    except CancelledError:
        raise _cancelled(user_dir, entry) from None
    except StudioError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            raise StorageError(
                "The disk filled up during the download.",
                f"Free some space and run the same download again: it resumes ({format_bytes(part.stat().st_size)} "
                "of this file are kept).",
            ) from exc
        raise network_error(entry, exc) from exc
    except Exception as exc:
        raise network_error(entry, exc) from exc


def _sha256(path: Path, cancel: CancelToken | None, user_dir: Path, entry: CatalogEntry) -> str:
    def check(_size: int) -> None:
        if cancel is not None and cancel.cancelled:
            raise _cancelled(user_dir, entry)

    return sha256_file(path, check)


def _cancelled(user_dir: Path, entry: CatalogEntry) -> CancelledError:
    kept = partial_bytes(user_dir, entry.id)
    return CancelledError(
        f"Download of {entry.id} cancelled; {format_bytes(kept)} kept so the same download resumes later.",
        f"Run it again to resume, or delete {staging_dir(user_dir, entry.id)} to free the space.",
    )
