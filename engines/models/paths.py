"""The one inside-the-folder rule for files a model folder names.

A model folder is data from somewhere else: its manifest, its genai config and its ONNX files name other
files (weights, labels, tokenizer, external data). Every such name goes through `resolve_inside`, which
refuses empty names, NUL characters, absolute paths (POSIX, Windows, drive-relative or UNC), any `..`
component (with either slash), the folder itself, and symbolic links that leave the folder. Pure Python.
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
        raise ModelError(f"{what} is a link to a file outside the model's folder ({name} -> {target}).", hint)
    if must_exist and not target.is_file():
        raise ModelError(
            f"{what} is missing ({name}): the model folder is incomplete.",
            "Copy the whole model folder again, or rebuild it.",
        )
    return target


def is_inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether `path` (after following links) is `folder` or inside it."""
    real, root = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return real == root or real.is_relative_to(root)
