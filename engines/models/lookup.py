"""Finding a model: a folder path, or a name looked up in the library folders (the user's first).

Every command and the app find models through `locate_model`, so `--model efficientnet-lite0`, the
Classify view's model and a third-party script mean the same folder. A library entry that refers to a
folder elsewhere (engines/models/reference_check.py) is that folder, once its files are checked to be
the ones that were added: a changed one is refused here, before anything reads it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engines.errors import ModelError
from engines.models.paths import resolve_inside


@dataclass(frozen=True)
class LocatedModel:
    folder: Path
    in_library: bool  # found by name, or a folder inside one of the library roots
    entry: Path | None = None  # the library entry that refers to `folder` (None: `folder` is the entry)

    @property
    def name(self) -> str:
        return (self.entry or self.folder).name


def looks_like_path(text: str) -> bool:
    return Path(text).is_dir() or bool(Path(text).suffix) or "/" in text or "\\" in text


def locate_model(
    model: str | os.PathLike[str], roots: Iterable[str | os.PathLike[str]] = (), *, follow_references: bool = True
) -> LocatedModel:
    """`model` as a folder path, or by name in `roots` (in order). A ModelError says which names exist.
    A reference entry is the folder it refers to, when that folder is unchanged (ModelError otherwise);
    `follow_references=False` gives the entry itself (to verify or remove it)."""
    library = [Path(r) for r in roots]
    text = os.fspath(model)
    if not isinstance(model, str) or looks_like_path(text):
        folder = Path(text).expanduser()
        located = LocatedModel(folder, any(_inside(folder, root) for root in library))
        return _followed(located) if follow_references else located
    for root in library:
        if (root / text).is_dir():
            located = LocatedModel(root / text, True)
            return _followed(located) if follow_references else located
    known = sorted({p.name for root in library if root.is_dir() for p in root.iterdir() if _is_model_dir(p)})
    listed = ", ".join(known) if known else "none"
    raise ModelError(
        f"Model '{text}' is not installed (installed: {listed}).",
        "Build the demo models (see README: `bash setup.sh`) or import a model with `npu-studio models import`.",
    )


def _followed(located: LocatedModel) -> LocatedModel:
    from engines.models.reference_check import check_reference, entry_reference, refused

    folder, manifest = entry_reference(located.folder)
    if folder is None or manifest is None:
        return located
    problems = check_reference(manifest, folder)
    if problems:
        raise refused(located.folder.name, folder, problems)
    return LocatedModel(folder, located.in_library, located.folder)


def _is_model_dir(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith(".")


def _inside(folder: Path, root: Path) -> bool:
    """Whether `folder` is an entry of the library `root`: a folder directly in it (the one inside-the-folder
    rule, engines/models/paths.py: a link that leaves `root` is no entry of it)."""
    try:
        target = folder.resolve()
        return resolve_inside(root, target.name) == target
    except (ModelError, RuntimeError, OSError):
        return False
