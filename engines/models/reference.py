"""Adding a model folder found on this machine to the library, by reference (nothing copied) or as a copy.

A folder from another tool is untrusted like any user model: it goes through the chat engine's folder
check (the inside-the-folder rule, the config allow-list, the native-library rules), every file is
listed (links that leave it and native libraries refused) and hashed, with progress and a cancel, and
its first load is tried in the bounded child process like any model that is not bundled
(engines/models/trial.py). The entry is a folder in the library holding only the manifest, written in
one rename; removing it never touches the referenced files. Image classifiers are copied (they are
small): a Hugging Face export's labels and preprocessing come from its `config.json` and
`preprocessor_config.json`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engines import jsonfile, workdirs
from engines.errors import ModelError, StorageError
from engines.models.found import name_for
from engines.models.import_manifest import ClassifierOptions, ImportDetails, genai_manifest
from engines.models.library import (
    GENAI_CONFIG,
    ModelEntry,
    check_name,
    clean_leftovers,
    read_entry,
)
from engines.models.manifest import has_manifest, list_model_files, write_manifest
from engines.models.native import is_native_library
from engines.models.paths import resolve_inside
from engines.models.reference_check import REFERENCE, hash_file, stamp
from engines.types import CancelToken

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


def _files(folder: Path) -> list[tuple[str, Path]]:
    """(relative name, path) of every file in the folder; a link out of it or a native library refused."""
    listed: list[tuple[str, Path]] = []
    for rel in list_model_files(folder, exclude=()):
        if is_native_library(rel):
            raise ModelError(
                f"The model folder contains a native library ({rel}).",
                "NPU Studio never loads libraries that come with a model; use a folder without it.",
            )
        path = resolve_inside(folder, rel, what=f"{rel} in the folder",
                              hint="NPU Studio uses only files inside the model's own folder.")  # fmt: skip
        listed.append((rel, path))
    for dirpath, dirnames, _ in os.walk(folder, followlinks=False):
        for name in dirnames:  # a linked folder: its files must stay inside too
            if os.path.islink(os.path.join(dirpath, name)):
                rel = Path(dirpath, name).relative_to(folder).as_posix()
                resolve_inside(folder, rel, what=f"{rel} in the folder")
    if not listed:
        raise ModelError(f"{folder} has no files.", "Pick the folder that holds genai_config.json.")
    return listed


def add_reference(
    source: Path,
    user_dir: Path,
    *,
    name: str | None = None,
    bundled_dir: Path | None = None,
    tool: str = "",
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
) -> ModelEntry:
    """Add the onnxruntime-genai folder `source` to the library by reference: checked as an import is,
    every file hashed (progress, cancel), the entry committed in one rename."""
    from engines.chat.folder import validate_model_folder

    folder = Path(os.path.realpath(Path(source).expanduser()))
    name = _free_name(name or name_for(folder), user_dir, bundled_dir)
    validate_model_folder(folder)  # the rules a folder must pass before anything native sees it
    files = _files(folder)
    sizes = {rel: os.stat(path) for rel, path in files}
    total = sum(info.st_size for info in sizes.values())
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(done, total)

    entries: list[dict[str, Any]] = []
    for rel, path in files:
        digest = hash_file(path, advance, cancel)
        after = os.stat(path)
        before = sizes[rel]
        if (after.st_size, after.st_mtime_ns, after.st_ino) != (before.st_size, before.st_mtime_ns, before.st_ino):
            raise StorageError(f"{rel} changed while it was hashed.",
                               "Wait until the program writing it is done, then add the folder again.")  # fmt: skip
        entries.append({"path": rel, "sha256": digest, **stamp(after)})
    details = ImportDetails(name=name, source={"added_from": tool} if tool else {})
    manifest = genai_manifest(folder, name, folder, details)
    manifest["files"] = entries
    manifest[REFERENCE] = {"folder": str(folder), "tool": tool}
    return _commit(manifest, user_dir, name, bundled_dir)


def _free_name(name: str, user_dir: Path, bundled_dir: Path | None) -> str:
    check_name(name)
    if bundled_dir is not None and (bundled_dir / name).is_dir():
        raise ModelError(f"'{name}' is the name of a bundled demo model.", "Add it under another name (--name).")
    if (user_dir / name).exists():
        raise ModelError(
            f"A model named '{name}' is already in your library.",
            f"Remove it first (`npu-studio models remove {name}`) or choose another name (--name).",
        )
    return name


def _commit(manifest: Mapping[str, Any], user_dir: Path, name: str, bundled_dir: Path | None) -> ModelEntry:
    try:
        user_dir.mkdir(parents=True, exist_ok=True)
        clean_leftovers(user_dir)
        work = workdirs.make(user_dir, f".import-{name}-")
    except OSError as exc:
        raise StorageError(f"Your model library {user_dir} cannot be written: {exc.strerror or exc}.",
                           "Free some disk space or check the folder's permissions.") from None  # fmt: skip
    try:
        write_manifest(work, manifest)
        _free_name(name, user_dir, bundled_dir)  # another program may have taken it meanwhile
        os.replace(work, user_dir / name)
    except OSError as exc:
        raise StorageError(f"Could not add {name} to {user_dir}: {exc.strerror or exc}.", "Try again.") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already after the rename
    return read_entry(user_dir / name, bundled=False)


def add_found_folder(
    folder: Path,
    user_dir: Path,
    *,
    name: str | None = None,
    copy: bool = False,
    bundled_dir: Path | None = None,
    tool: str = "",
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
) -> ModelEntry:
    """A chat folder by reference (or, with `copy`, as an import); an image classifier as a copy."""
    from engines.models.importer import import_model

    source = Path(folder).expanduser()
    if not source.is_dir():
        raise ModelError(f"{source} is not a folder.", "Give a folder `npu-studio models scan` lists.")
    if (source / GENAI_CONFIG).exists() and not copy:
        return add_reference(source, user_dir, name=name, bundled_dir=bundled_dir, tool=tool, progress=progress,
                             cancel=cancel)  # fmt: skip
    suggested = name or name_for(Path(os.path.realpath(source)))
    if (source / GENAI_CONFIG).exists() or has_manifest(source):
        return import_model(source, user_dir, bundled_dir=bundled_dir, details=ImportDetails(name=suggested),
                            progress=progress, cancel=cancel)  # fmt: skip
    options, model_file = hugging_face_classifier(source)
    try:
        return import_model(source / model_file, user_dir, bundled_dir=bundled_dir, classifier=options,
                            details=ImportDetails(name=suggested, source={"imported_from": str(source)}),
                            progress=progress, cancel=cancel)  # fmt: skip
    finally:
        with contextlib.suppress(OSError):
            options.labels.unlink()


def hugging_face_classifier(folder: Path) -> tuple[ClassifierOptions, str]:
    """Import options for a Hugging Face image-classification export: labels (`id2label`, written to a
    temporary file the caller removes), input size, mean and std (0-1 in its config, 0-255 here)."""
    from engines.models.found_kinds import PREPROCESSOR, classifier_file, hf_labels

    try:
        config = jsonfile.read_object(folder / "config.json")
        pre = jsonfile.read_object(folder / PREPROCESSOR)
    except jsonfile.JsonFileError as exc:
        raise ModelError(f"{folder} is not an image classifier NPU Studio can read: {exc.problem}.",
                         "It needs config.json (with id2label) and preprocessor_config.json.") from None  # fmt: skip
    labels, model_file = hf_labels(config), classifier_file(folder)
    if not labels or not model_file:
        raise ModelError(f"{folder} is not an image classifier NPU Studio can read (no labels or no .onnx file).",
                         "Import it with `npu-studio models import FILE.onnx --labels LABELS`.")  # fmt: skip
    crop: Any = pre.get("crop_size") or pre.get("size") or {}
    if not isinstance(crop, Mapping):
        crop = {"height": crop, "width": crop}
    height = _int(crop.get("height") or crop.get("shortest_edge"))
    width = _int(crop.get("width")) if crop.get("width") else height
    size = (height, width) if height > 0 and width > 0 else None
    shorter = _int(pre["size"].get("shortest_edge")) if isinstance(pre.get("size"), Mapping) else -1
    mean = _channels(pre.get("image_mean"), 0.5)
    std = _channels(pre.get("image_std"), 0.5)
    handle, labels_path = tempfile.mkstemp(prefix="npu-studio-labels-", suffix=".txt")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write("\n".join(label.replace("\n", " ") for label in labels) + "\n")
    resample = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic"}.get(_int(pre.get("resample")), "bilinear")
    return ClassifierOptions(
        labels=Path(labels_path), input_size=size, resize_shorter=shorter if shorter > 0 else None,
        mean=mean, std=std, resample=resample,
    ), model_file  # fmt: skip


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _channels(value: Any, default: float) -> tuple[float, float, float]:
    items = value if isinstance(value, list) and len(value) == 3 else [default] * 3
    try:
        r, g, b = (float(v) * 255.0 for v in items)
    except (TypeError, ValueError):
        r = g = b = default * 255.0
    return r, g, b


__all__ = ["add_found_folder", "add_reference", "hugging_face_classifier"]
