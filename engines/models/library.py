"""The model library: the bundled demo models (read-only) plus the user's own models folder.

Every model is a folder with a ``manifest.json`` (schema in ``assets/recipes/README.md``). This module
lists them, verifies and removes them, adds a finished folder to the library in one rename
(:func:`commit_folder`, used by imports and downloads), and estimates whether a model fits in memory
before anything loads it (:mod:`engines.models.fit`). Pure Python: no network, no Qt, no ONNX Runtime.

Hidden folders (``.import-*``, ``.removing-*``, ``.downloads``) are work in progress and never part of
the library; :func:`clean_leftovers` removes what a killed import or removal left behind.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines import names, shared_files, workdirs
from engines.errors import ModelError, StorageError
from engines.models.manifest import Manifest, file_entry, list_model_files, read_manifest, verify_files, write_manifest
from engines.models.reference_check import check_reference

log = logging.getLogger(__name__)

KIND_CLASSIFIER = "image-classifier"
KIND_LLM = "genai-llm"
KINDS = (KIND_CLASSIFIER, KIND_LLM)
DEVICE_CLASSES = ("cpu", "gpu", "npu")
GENAI_CONFIG = "genai_config.json"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_LEFTOVER_PREFIXES = (".import-", ".removing-")
LEFTOVER_AGE_SECONDS = 6 * 3600  # an import still running after this long was killed, not slow


# --------------------------------------------------------------------------------------------
# Entries
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFile:
    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ModelEntry:
    """One model of the library, as its manifest describes it (no file is re-hashed to build this)."""

    name: str
    display_name: str
    kind: str
    folder: Path
    bundled: bool
    size_bytes: int
    sha256: str  # digest of the manifest's (path, size, sha256) list: changes when any file changes
    licence: str = ""
    precision: str = ""
    devices: tuple[str, ...] = ()
    files: tuple[ModelFile, ...] = ()
    context_length: int | None = None
    source: str = ""
    problem: str = ""  # why the model is not usable as it is ("" when fine)
    reference: str = ""  # the folder elsewhere this entry refers to ("": the files are in `folder`)

    @property
    def usable(self) -> bool:
        return not self.problem

    @property
    def model_folder(self) -> Path:
        """Where the model's files are: the referenced folder, or the entry's own."""
        return Path(self.reference) if self.reference else self.folder

    @property
    def short_sha(self) -> str:
        return self.sha256[:12]

    @property
    def origin(self) -> str:
        return "bundled" if self.bundled else "by reference" if self.reference else "yours"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "kind": self.kind,
            "folder": str(self.folder),
            "origin": self.origin,
            "read_only": self.bundled,
            "size_bytes": self.size_bytes,
            "sha256": self.sha256,
            "licence": self.licence,
            "precision": self.precision,
            "devices": list(self.devices),
            "context_length": self.context_length,
            "source": self.source,
            "problem": self.problem,
            "reference": self.reference,
            "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files],
        }


def folder_digest(files: Iterable[ModelFile]) -> str:
    """One SHA-256 for a whole model folder, from its manifest's file list (sorted by path)."""
    import hashlib  # OpenSSL: loaded when a folder is digested, not with the library

    digest = hashlib.sha256()
    for f in sorted(files, key=lambda item: item.path):
        digest.update(f"{f.path}\t{f.size}\t{f.sha256.lower()}\n".encode())
    return digest.hexdigest()


def manifest_files(manifest: Manifest) -> tuple[ModelFile, ...]:
    """The manifest's complete entries (path, size and SHA-256 all given)."""
    return tuple(
        ModelFile(f.path, f.size, f.sha256) for f in manifest.files if f.size is not None and f.sha256 is not None
    )


def read_entry(folder: Path, *, bundled: bool) -> ModelEntry:
    """The library entry for one model folder; a folder with a broken manifest still gets an entry,
    with `problem` saying what is wrong."""
    try:
        manifest = read_manifest(folder)
    except ModelError as exc:
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        return ModelEntry(folder.name, folder.name, "unknown", folder, bundled, size, "", problem=exc.message)
    files = manifest_files(manifest)
    reference = manifest.reference
    if reference is not None:  # sizes, times and the file list of the folder it refers to
        problems = check_reference(manifest, reference)
    else:
        problems = verify_files(manifest, check_hashes=False)  # sizes only: cheap, catches most damage
    kind = manifest.kind
    if kind not in KINDS:
        problems.insert(0, f"unknown kind {kind!r}")
    return ModelEntry(
        name=folder.name,  # the library's key (remove, verify, lookups): never a name the manifest chooses
        display_name=manifest.title,
        kind=kind,
        folder=folder,
        bundled=bundled,
        size_bytes=sum(f.size for f in files),
        sha256=folder_digest(files),
        licence=manifest.licence,
        precision=manifest.precision,
        devices=manifest.devices,
        files=files,
        context_length=manifest.context_length,
        source="bundled demo model" if bundled else manifest.origin,
        problem="; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""),
        reference=str(reference) if reference is not None else "",
    )


def _model_folders(root: Path | None) -> list[Path]:
    if root is None or not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def scan_library(bundled_dir: Path | None, user_dir: Path | None) -> list[ModelEntry]:
    """Every model: the bundled ones first, then the user's, each sorted by folder name."""
    entries = [_entry_or_problem(f, bundled=True) for f in _model_folders(bundled_dir)]
    entries += [_entry_or_problem(f, bundled=False) for f in _model_folders(user_dir)]
    return entries


def _entry_or_problem(folder: Path, *, bundled: bool) -> ModelEntry:
    """One damaged folder is one unusable entry, never the end of the listing of every model."""
    try:
        return read_entry(folder, bundled=bundled)
    except Exception as exc:  # a hand-edited manifest can hold any type anywhere
        log.warning("model folder %s cannot be read: %r", folder, exc)
        detail = exc.message if isinstance(exc, ModelError) else f"its manifest cannot be read ({type(exc).__name__})"
        return ModelEntry(folder.name, folder.name, "unknown", folder, bundled, 0, "", problem=detail)


def find_model(name: str, bundled_dir: Path | None, user_dir: Path | None) -> ModelEntry:
    """A model by name: the user's library first, then the bundled models (the one lookup,
    engines/models/lookup.py, as `classify --model` and the app use it)."""
    from engines.models.lookup import locate_model

    check_name(name)
    roots = [r for r in (user_dir, bundled_dir) if r is not None]
    try:
        located = locate_model(name, roots, follow_references=False)
    except ModelError:
        known = ", ".join(sorted({f.name for f in _model_folders(bundled_dir) + _model_folders(user_dir)})) or "none"
        raise ModelError(
            f"There is no model named '{name}' in the library (models: {known}).",
            "Run `npu-studio models list` to see the names.",
        ) from None
    return read_entry(located.folder, bundled=located.folder.parent != user_dir)


def check_name(name: str) -> str:
    """`name` if it can name a model folder on every platform (engines/names.py: Windows' rules), else a
    ModelError that names the rule it breaks."""
    problem = names.name_problem(name or "", "model name")
    if problem:
        raise ModelError(f"{problem}.", "Choose another name (--name): 1-80 letters, digits, '.', '_' or '-'.")
    if not _NAME_RE.match(name):
        raise ModelError(
            f"'{name}' is not a valid model name.",
            "Use 1-80 letters, digits, '.', '_' or '-', starting with a letter or digit.",
        )
    return name


def check_new_name(name: str, user_dir: Path, bundled_dir: Path | None) -> str:
    """`check_name`, and free: no model of that name, nor of a name that differs only in case (one folder on
    Windows and macOS), is in the user's library or among the bundled models."""
    check_name(name)
    if bundled_dir is not None and (bundled_dir / name).is_dir():
        raise ModelError(f"'{name}' is the name of a bundled demo model.", "Choose another name (--name).")
    if (user_dir / name).exists():
        raise ModelError(f"A model named '{name}' is already in your library.",
                         f"Remove it first (`npu-studio models remove {name}`) or choose another name (--name).")
    existing = [p.name for root in (user_dir, bundled_dir) if root is not None for p in _model_folders(root)]
    other = names.case_collision(name, existing)
    if other:
        raise ModelError(
            f"'{name}' differs from the model '{other}' only in case; on Windows and macOS they would be one folder.",
            "Choose another name (--name).",
        )
    return name


def library_lock(user_dir: Path) -> Any:
    """The lock every change of the user's library holds while it checks a name and renames a folder (its
    file sits beside the library folder, `.models.lock`: the library holds only models)."""
    return shared_files.locked(user_dir)


def suggest_name(text: str) -> str:
    """A valid model name derived from a folder or file name (never one Windows reserves: "nul" -> "nul-model")."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text)
    cleaned = re.sub(r"[-.]*-[-.]*|\.{2,}", lambda m: "-" if "-" in m.group() else ".", cleaned)  # no "..", "-.-"
    cleaned = cleaned.strip("-._")[:80].rstrip("-._")
    if cleaned and names.reserved_stem(cleaned):
        head, dot, rest = cleaned.partition(".")
        cleaned = f"{head}-model{dot}{rest}"[:80].rstrip("-._")
    return cleaned or "model"


# --------------------------------------------------------------------------------------------
# Verify and remove
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyReport:
    name: str
    folder: Path
    ok: bool
    problems: tuple[str, ...]
    files_checked: int
    bytes_checked: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "folder": str(self.folder),
            "ok": self.ok,
            "problems": list(self.problems),
            "files_checked": self.files_checked,
            "bytes_checked": self.bytes_checked,
        }


def verify_model(folder: Path, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Re-hash every file and compare with the manifest; also report files the manifest does not list.
    For an entry that refers to a folder elsewhere, that folder's files."""
    try:
        manifest = read_manifest(folder)
    except ModelError as exc:
        return VerifyReport(folder.name, folder, False, (exc.message,), 0, 0)
    reference = manifest.reference
    if reference is not None:
        problems = check_reference(manifest, reference, hashes=True, progress=progress)
        files = manifest_files(manifest)
        return VerifyReport(manifest.model_name, reference, not problems, tuple(problems),
                            len(files), sum(f.size for f in files))  # fmt: skip
    problems = verify_files(manifest, check_hashes=True)
    listed = {f.path for f in manifest_files(manifest)}
    problems += [f"{rel}: not in the manifest (added after the import)" for rel in list_model_files(folder)
                 if rel not in listed]
    files = manifest_files(manifest)
    return VerifyReport(
        manifest.model_name, folder, not problems, tuple(problems),
        len(files), sum(f.size for f in files),
    )


def remove_model(name: str, bundled_dir: Path | None, user_dir: Path) -> Path:
    """Delete a model from the user's library. Bundled models are read-only and refused."""
    check_name(name)
    target = user_dir / name
    if not target.is_dir():
        if bundled_dir is not None and (bundled_dir / name).is_dir():
            raise ModelError(
                f"'{name}' is a bundled demo model; bundled models are read-only and cannot be removed.",
                "Only models you imported or downloaded can be removed.",
            )
        raise ModelError(f"There is no model named '{name}' in your library.",
                         "Run `npu-studio models list` to see the names.")
    doomed = user_dir / f".removing-{name}-{os.urandom(4).hex()}"
    try:
        os.replace(target, doomed)  # one rename: the model is gone from the library at once
    except OSError as exc:
        raise StorageError(f"Could not remove {target}: {exc.strerror or exc}.",
                           "Close any program using the model and try again.") from exc
    shutil.rmtree(doomed, ignore_errors=True)
    return target


def clean_leftovers(user_dir: Path, max_age: float = LEFTOVER_AGE_SECONDS) -> list[Path]:
    """Remove the work folders killed commands left in the library (imports, removals, quantizations, ...):
    at once when the process that made one is gone (engines/workdirs.py), else once older than `max_age`."""
    return workdirs.sweep(user_dir, max_age=max_age)


# --------------------------------------------------------------------------------------------
# Adding a model folder
# --------------------------------------------------------------------------------------------


def commit_folder(
    folder: Path,
    user_dir: Path,
    name: str,
    build_manifest: Callable[[Path, str], dict[str, Any]],
    digests: Mapping[str, str],
    *,
    bundled_dir: Path | None = None,
    rehash: bool = True,
) -> ModelEntry:
    """Turn a complete folder inside the library (same disk) into the model `name`: validate it through
    `build_manifest`, write the manifest with every file's size and SHA-256, then rename it in one step.

    `digests` are the SHA-256 values computed while the files arrived; with `rehash` the files are read
    again from disk and must match them."""
    manifest = build_manifest(folder, name)
    present = set(list_model_files(folder))
    if present != set(digests):
        extra = sorted(present - set(digests)) + sorted(set(digests) - present)
        raise ModelError(f"The model files changed during the import ({', '.join(extra[:3])}).",
                         "Try the import again.")
    entries: list[dict[str, Any]] = []
    for rel in sorted(digests):
        if rehash:
            entry = file_entry(folder, rel)
            if entry["sha256"] != digests[rel]:
                raise StorageError(f"{rel} changed while it was copied (sha256 differs).",
                                   "Check the disk and try the import again.")
        else:
            entry = {"path": rel, "size": (folder / rel).stat().st_size, "sha256": digests[rel]}
        entries.append(entry)
    manifest["files"] = entries
    write_manifest(folder, manifest)
    final = user_dir / name
    long_path = next((p for rel in digests if (p := names.path_length_problem(final / rel, "model file"))), "")
    if long_path:
        raise ModelError(f"{long_path}.", "Choose a shorter name (--name) or move the library to a shorter path.")
    try:
        with library_lock(user_dir):  # two imports of one name: one wins, the other is told
            check_new_name(name, user_dir, bundled_dir)
            os.replace(folder, final)
    except OSError as exc:
        raise StorageError(f"Could not move the model into {final}: {exc.strerror or exc}.", "Try again.") from exc
    log.info("added model %s to %s", name, final)
    return read_entry(final, bundled=False)


def check_free_space(folder: Path, needed: int, what: str, margin: int = 64 << 20) -> None:
    """StorageError unless `folder`'s disk has `needed` bytes (+ a margin) free."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise StorageError(f"Could not check the free space in {folder}: {exc.strerror or exc}.") from exc
    if free < needed + margin:
        raise StorageError(
            f"Not enough disk space for this {what}: it needs {format_bytes(needed)} "
            f"and {folder} has {format_bytes(free)} free.",
            "Free some disk space (or remove models you no longer use) and try again.",
        )


def format_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(value) < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"  # pragma: no cover - the loop always returns
