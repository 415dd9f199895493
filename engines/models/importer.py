"""Importing a model the user already has on disk into the library.

Three kinds of source: an onnxruntime-genai folder (validated by the chat engine's folder check), a
classifier folder with a manifest, or a single ``.onnx`` classifier with its labels and preprocessing.
Every import is validated, hashed and atomic: files are copied into a hidden folder inside the library
(``.import-<name>-*``), hashed while copied and re-hashed from disk, checked (a classifier is opened on
the CPU and run once), given a manifest, and only then renamed to ``<name>``. Nothing is ever
half-imported; a native library shipped with or named by a model is refused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engines import workdirs
from engines.errors import CancelledError, ModelError, StorageError, StudioError
from engines.models.import_manifest import (
    ClassifierOptions,
    ImportDetails,
    classifier_folder_manifest,
    classifier_manifest,
    genai_manifest,
)
from engines.models.library import (
    GENAI_CONFIG,
    KIND_CLASSIFIER,
    ModelEntry,
    check_free_space,
    check_new_name,
    clean_leftovers,
    commit_folder,
    suggest_name,
)
from engines.models.manifest import MANIFEST_NAME, has_manifest, read_manifest
from engines.models.native import is_native_library, refuse_library_keys
from engines.types import CancelToken

_CHUNK = 1 << 20

CopyProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total)


def import_model(
    source: Path,
    user_dir: Path,
    *,
    bundled_dir: Path | None = None,
    classifier: ClassifierOptions | None = None,
    details: ImportDetails | None = None,
    progress: CopyProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> ModelEntry:
    """Import a genai folder, a classifier folder with a manifest, or an `.onnx` classifier (with
    `classifier` options) into `user_dir`. Validated, hashed, atomic; raises a StudioError saying what
    is wrong with the source."""
    details = details or ImportDetails()
    source = Path(source).expanduser()
    if not source.exists():
        raise ModelError(f"Nothing to import: {source} does not exist.", "Check the path.")
    name = check_new_name(details.name or suggest_name(source.stem if source.is_file() else source.name),
                          user_dir, bundled_dir)
    if source.is_file():
        if source.suffix.lower() != ".onnx":
            raise ModelError(f"{source.name} is neither a model folder nor an .onnx file.",
                             "Import a genai folder (with genai_config.json) or a classifier .onnx with --labels.")
        if classifier is None:
            raise ModelError(f"{source.name} is a single ONNX file: NPU Studio treats it as an image classifier "
                             "and needs its class names.", "Add --labels FILE (one class name per line).")
        labels = Path(classifier.labels).expanduser()
        if not labels.is_file():
            raise ModelError(f"Labels file not found: {labels}",
                             "Give the file with one class name per line (--labels).")
        files = [*_onnx_file_set(source), (labels, "labels.txt")]
        options = classifier
        builder: Callable[[Path, str], dict[str, Any]] = lambda tmp, n: classifier_manifest(  # noqa: E731
            tmp, n, source, options, details)
    elif (source / GENAI_CONFIG).exists():
        _precheck_genai(source)
        files = _folder_file_set(source)
        builder = lambda tmp, n: genai_manifest(tmp, n, source, details)  # noqa: E731
    elif has_manifest(source):
        manifest = read_manifest(source)
        if manifest.kind != KIND_CLASSIFIER or manifest.classifier is None:
            raise ModelError(f"{source} has a manifest but is neither an image classifier nor a genai folder.",
                             "Import a genai folder (with genai_config.json) or a classifier .onnx with --labels.")
        refuse_library_keys(manifest.document, MANIFEST_NAME)
        files = _folder_file_set(source)
        builder = lambda tmp, n: classifier_folder_manifest(tmp, n, source, manifest, details)  # noqa: E731
    else:
        raise ModelError(
            f"{source} is not a model folder: it has no {GENAI_CONFIG} (chat model) and no {MANIFEST_NAME} "
            "(classifier).",
            "Import a genai folder made by the onnxruntime-genai model builder, or a classifier .onnx with --labels.",
        )
    return _stage_and_commit(user_dir, name, files, builder, bundled_dir, progress, cancel)


def _stage_and_commit(
    user_dir: Path,
    name: str,
    files: Sequence[tuple[Path, str]],
    build_manifest: Callable[[Path, str], dict[str, Any]],
    bundled_dir: Path | None,
    progress: CopyProgressCallback | None,
    cancel: CancelToken | None,
) -> ModelEntry:
    try:
        user_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"Your model library {user_dir} cannot be created: {exc.strerror or exc}.",
            "Check that NPU Studio's data folder (NPU_STUDIO_HOME, if set) is on a writable disk.",
        ) from None
    clean_leftovers(user_dir)
    total = sum(src.stat().st_size for src, _ in files)
    check_free_space(user_dir, total, "import")
    try:
        tmp = workdirs.make(user_dir, f".import-{name}-")
    except OSError as exc:
        raise StorageError(
            f"Your model library {user_dir} cannot be written: {exc.strerror or exc}.",
            "Free some disk space or check the folder's permissions.",
        ) from None
    try:
        digests = copy_files(files, tmp, progress=progress, cancel=cancel)
        return commit_folder(tmp, user_dir, name, build_manifest, digests, bundled_dir=bundled_dir, rehash=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already after a successful commit


def copy_files(
    files: Sequence[tuple[Path, str]],
    dest: Path,
    *,
    progress: CopyProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> dict[str, str]:
    """Copy (source, relative destination) pairs into `dest`, hashing as it goes; returns {rel: sha256}."""
    total = sum(src.stat().st_size for src, _ in files)
    done = 0
    digests: dict[str, str] = {}
    for src, rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        try:
            with open(src, "rb") as reader, open(target, "wb") as writer:
                while chunk := reader.read(_CHUNK):
                    if cancel is not None and cancel.cancelled:
                        raise CancelledError("Import cancelled; nothing was added to the library.")
                    digest.update(chunk)
                    writer.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
        except OSError as exc:
            raise _copy_error(src, exc) from exc
        digests[rel] = digest.hexdigest()
    return digests


def _copy_error(src: Path, exc: OSError) -> StudioError:
    if exc.errno == 28:  # ENOSPC
        return StorageError("The disk filled up during the import; nothing was added to the library.",
                            "Free some disk space and try again.")
    return StorageError(f"Could not copy {src.name}: {exc.strerror or exc}.", "Check the file and try again.")


def _refuse_native(path: Path, root: Path) -> None:
    if is_native_library(path.name):
        raise ModelError(
            f"The model folder contains a native library ({path.relative_to(root).as_posix()}).",
            "NPU Studio never loads libraries that come with a model; remove the file and import again.",
        )


def _folder_file_set(root: Path) -> list[tuple[Path, str]]:
    """Every regular file of a model folder (hidden files and folders skipped), checked for links out."""
    root_real = root.resolve()
    found: list[tuple[Path, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for d in list(dirnames):
            if (here / d).is_symlink():
                _link_inside(here / d, root, root_real)
                dirnames.remove(d)  # the target is inside the folder: it is copied from there
        for filename in sorted(filenames):
            if filename.startswith(".") or (here / filename).relative_to(root).as_posix() == MANIFEST_NAME:
                continue
            path = here / filename
            if path.is_symlink():
                _link_inside(path, root, root_real)
            if not path.is_file():
                continue
            _refuse_native(path, root)
            found.append((path, path.relative_to(root).as_posix()))
    if not found:
        raise ModelError(f"{root} has no files to import.", "Pick the folder that holds the model files.")
    return found


def _link_inside(path: Path, root: Path, root_real: Path) -> None:
    from engines.models.paths import resolve_inside

    resolve_inside(
        root_real,
        path.relative_to(root).as_posix(),
        what=f"{path.relative_to(root).as_posix()} in the folder",
        hint="Copy the real file into the model folder instead of linking to it.",
    )


def _onnx_file_set(model: Path) -> list[tuple[Path, str]]:
    """The .onnx file plus its external data files (which must sit inside the model's folder)."""
    from engines.models.safety import inspect_onnx

    info = inspect_onnx(model)  # external data inside the folder, no custom-op domains
    root = model.parent.resolve()  # the external files come back resolved (engines/models/paths.py)
    pairs = [(model, model.name)]
    for external in info.external_files:
        pairs.append((external, external.relative_to(root).as_posix()))
    return pairs


def _precheck_genai(source: Path) -> None:
    """The genai checks on the source, before a byte is copied (they run again on the copy)."""
    from engines.chat.folder import validate_model_folder

    validate_model_folder(source)


