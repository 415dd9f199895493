"""The one inside-the-folder rule for files a model folder names.

A model folder is data from somewhere else: its manifest, its genai config and its ONNX files name other
files (weights, labels, tokenizer, external data). Every such name goes through `resolve_inside`, which
refuses empty names, NUL characters, absolute paths (POSIX, Windows, drive-relative or UNC), any `..`
component (with either slash), the folder itself, and symbolic links that leave the folder. Pure Python.

One layout is allowed to link out, and only so far: a folder inside a Hugging Face hub cache snapshot
(`.../models--<org>--<name>/snapshots/<revision>/...`). There every file is a link into the same
repository's `blobs/` (huggingface_hub writes them so, file_download.py `_create_symlink`), so a link may
end in that repository's `blobs/` folder; never anywhere else, and never through a `blobs` that is
itself a link. Such a name comes back as the link inside the folder (its target checked), so that what
callers list stays relative to the folder.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from engines.errors import ModelError

UNSAFE_HINT = "Only files inside the model's own folder are allowed; this model folder is unsafe."


def resolve_inside(
    folder: str | os.PathLike[str],
    name: object,
    *,
    what: str = "A file named by the model folder",
    must_exist: bool = False,
    hint: str = UNSAFE_HINT,
) -> Path:
    """`name` (relative, from a model folder's own files) as a resolved path inside `folder`.

    `what` starts each message ("The labels file named by the manifest in X"). With `must_exist`, a
    missing file is a ModelError too. Raises ModelError for every name that could leave the folder."""
    if not isinstance(name, str) or not name.strip():
        raise ModelError(f"{what} has an empty or non-text file name ({name!r}).", hint)
    if "\x00" in name:
        raise ModelError(f"{what} has a NUL character in its file name.", hint)
    windows = PureWindowsPath(name)
    if PurePosixPath(name).is_absolute() or windows.is_absolute() or windows.drive or windows.root:
        raise ModelError(f"{what} points to an absolute path ({name}).", hint)
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        raise ModelError(f"{what} points outside the model's folder with '..' ({name}).", hint)
    try:
        root = Path(folder).resolve()
        target = root.joinpath(*parts).resolve()
    except (RuntimeError, OSError) as exc:  # a loop of links: RuntimeError up to Python 3.12, OSError after
        raise ModelError(f"{what} is a loop of symbolic links ({name}).", hint) from exc
    if target == root:
        raise ModelError(f"{what} names the model folder itself ({name}), not a file in it.", hint)
    if not target.is_relative_to(root):
        if not _in_snapshot_blobs(target, root):
            raise ModelError(f"{what} is a link to a file outside the model's folder ({name} -> {target}).", hint)
        target = root.joinpath(*parts)  # the snapshot's own link, inside the folder; where it leads was checked
    if must_exist and not target.is_file():
        raise ModelError(
            f"{what} is missing ({name}): the model folder is incomplete.",
            "Copy the whole model folder again, or rebuild it.",
        )
    return target


def hub_repository(folder: Path) -> Path | None:
    """The `models--<org>--<name>` folder of a Hugging Face hub cache snapshot that (resolved) `folder` is in
    (the snapshot itself or a subfolder of it), or None."""
    parts = folder.parts
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] == "snapshots" and parts[index - 1].startswith("models--"):
            return Path(*parts[:index])
    return None


def _in_snapshot_blobs(target: Path, root: Path) -> bool:
    repository = hub_repository(root)
    if repository is None:
        return False
    blobs = repository / "blobs"
    return not blobs.is_symlink() and target.is_relative_to(blobs) and target != blobs


def is_within(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether `path` is `folder` itself or, by `resolve_inside`'s rule, a file or folder inside it (links
    followed), for a path a caller holds rather than a name a model folder gives."""
    try:
        target, root = Path(path).resolve(), Path(folder).resolve()
        rel = os.path.relpath(target, root)
    except (RuntimeError, OSError, ValueError):  # a loop of links; another drive (Windows)
        return False
    if rel == os.curdir:
        return True
    try:
        resolve_inside(root, rel)
    except ModelError:
        return False
    return True
