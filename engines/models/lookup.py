"""Finding a model: a folder path, or a name looked up in the library folders (the user's first).

Every command and the app find models through `locate_model`, so `--model efficientnet-lite0`, the
Classify view's model and a third-party script mean the same folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engines.errors import ModelError


@dataclass(frozen=True)
class LocatedModel:
    folder: Path
    in_library: bool  # found by name, or a folder inside one of the library roots

    @property
    def name(self) -> str:
        return self.folder.name


def looks_like_path(text: str) -> bool:
    return Path(text).is_dir() or bool(Path(text).suffix) or "/" in text or "\\" in text


def locate_model(model: str | os.PathLike[str], roots: Iterable[str | os.PathLike[str]] = ()) -> LocatedModel:
    """`model` as a folder path, or by name in `roots` (in order). A ModelError says which names exist."""
    library = [Path(r) for r in roots]
    text = os.fspath(model)
    if not isinstance(model, str) or looks_like_path(text):
        folder = Path(text).expanduser()
        return LocatedModel(folder, any(_inside(folder, root) for root in library))
    for root in library:
        if (root / text).is_dir():
            return LocatedModel(root / text, True)
    known = sorted({p.name for root in library if root.is_dir() for p in root.iterdir() if _is_model_dir(p)})
    listed = ", ".join(known) if known else "none"
    raise ModelError(
        f"Model '{text}' is not installed (installed: {listed}).",
        "Build the demo models (see README: `bash setup.sh`) or import a model with `npu-studio models import`.",
    )


def _is_model_dir(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith(".")


def _inside(folder: Path, root: Path) -> bool:
    try:
        return folder.resolve().parent == root.resolve()
    except OSError:
        return False
