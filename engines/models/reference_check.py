"""Library entries that refer to a folder elsewhere (added from `npu-studio models scan`), and whether
that folder is still what was added.

Such an entry is a folder in the user's library holding only a `manifest.json` whose `reference`
names the model folder and whose `files` list every file there with its size, SHA-256, modification
time, inode and status-change time (ctime) at the moment it was added.

Before the model is opened (`engines.models.lookup`) and when the library is listed (`check_reference`):

- files that appeared or disappeared, and any file whose size or modification time differs: changed;
- every file that steers what the model does and is cheap to read (configs, tokenizer, chat template,
  genai_config.json, a graph whose weights are elsewhere: anything that is not a weight file over
  `ALWAYS_HASHED_BYTES`) is re-hashed, so an edit that keeps the size and puts the time back is seen;
- a weight file over that size is re-hashed only when its inode or ctime differs from when it was added.
  On Linux and macOS the kernel sets ctime on every write and a user cannot set it back (only root can,
  by changing the clock), so a same-size edit with its modification time restored still shows there; a
  file replaced by a copy (another inode) is hashed rather than trusted. ctime also moves for harmless
  reasons (a new hard link, a permission change): the hash decides, not the time.

`models verify` re-hashes every file (`hashes=True`). Pure Python.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from engines.errors import CancelledError, ModelError
from engines.models.manifest import Manifest, ManifestFile, has_manifest, list_model_files, read_manifest, sha256_file
from engines.models.paths import resolve_inside
from engines.types import CancelToken

REFERENCE = "reference"
ALWAYS_HASHED_BYTES = 8 << 20  # a config, template or tokenizer is KBs to a few MB: hashed in milliseconds
WEIGHT_SUFFIXES = frozenset({".onnx", ".data", ".onnx_data", ".bin", ".safetensors", ".gguf", ".ort"})
HashProgress = Callable[[int, int], None]  # (bytes hashed, bytes in all)


def entry_reference(entry_folder: Path) -> tuple[Path | None, Manifest | None]:
    """(referenced folder, manifest) of a library folder; (None, None) when it is no reference entry."""
    if not has_manifest(entry_folder):
        return None, None
    try:
        manifest = read_manifest(entry_folder, require_schema=False)
    except ModelError:
        return None, None
    return manifest.reference, manifest


def always_hashed(rel: str, size: int) -> bool:
    """Whether a referenced file is re-hashed before every load: all but the big weight files."""
    return size <= ALWAYS_HASHED_BYTES or Path(rel).suffix.lower() not in WEIGHT_SUFFIXES


def stamp(info: os.stat_result) -> dict[str, int]:
    """What a reference records of a file beside its SHA-256 (see the module's docstring)."""
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "ctime_ns": info.st_ctime_ns, "ino": info.st_ino}


def _moved(item: ManifestFile, info: os.stat_result) -> bool:
    """Whether a big file's inode or ctime differs from the recorded ones (an entry added before they
    were recorded has neither: its size and time are all there is to compare)."""
    ino, ctime = item.ino, item.ctime_ns
    return (ino is not None and info.st_ino != ino) or (ctime is not None and info.st_ctime_ns != ctime)


def check_reference(manifest: Manifest, folder: Path, *, hashes: bool = False,
                    progress: HashProgress | None = None, cancel: CancelToken | None = None) -> list[str]:  # fmt: skip
    """What changed in `folder` since it was added: missing files, other sizes, newer modification
    times, files that appeared, the SHA-256 of the files `always_hashed` names and of big files whose
    inode or ctime moved; with `hashes`, every file's SHA-256 (its progress reported)."""
    if not folder.is_dir():
        return [f"the folder {folder} is gone"]
    listed = manifest.files
    if not listed:
        return ["the manifest lists no files"]
    problems: list[str] = []
    total = sum(f.size for f in listed if f.size is not None)
    done = 0
    for item in listed:
        rel = item.path
        try:
            path = resolve_inside(folder, rel, what=rel)
            info = os.stat(path)
        except ModelError:
            problems.append(f"{rel}: now a link out of the folder")
            continue
        except OSError:
            problems.append(f"{rel}: missing")
            continue
        size, mtime, digest = item.size, item.mtime_ns, item.sha256
        if info.st_size != size:
            problems.append(f"{rel}: {info.st_size:,} bytes, {size:,} when it was added" if isinstance(size, int)
                            else f"{rel}: no size was recorded")  # fmt: skip
        elif mtime is not None and info.st_mtime_ns != mtime:
            problems.append(f"{rel}: modified since it was added")
        elif hashes or always_hashed(rel, info.st_size) or _moved(item, info):
            if cancel is not None and cancel.cancelled:
                raise CancelledError("Verification cancelled.")
            if digest is None or sha256_file(path) != digest.lower():
                problems.append(f"{rel}: contents changed (sha256 mismatch)")
            done += info.st_size
            if hashes and progress is not None:
                progress(done, total)
    known = {f.path for f in listed}
    problems += [f"{rel}: added to the folder after it was added to the library"
                 for rel in list_model_files(folder, exclude=()) if rel not in known]  # fmt: skip
    return problems


def hash_file(path: Path, progress: Callable[[int], None], cancel: CancelToken | None) -> str:
    """SHA-256 of `path`, calling `progress(bytes)` per chunk; CancelledError when `cancel` is set."""

    def step(size: int) -> None:
        if cancel is not None and cancel.cancelled:
            raise CancelledError("Cancelled: nothing was added to the library.")
        progress(size)

    return sha256_file(path, step)


class ReferenceChangedError(ModelError):
    """A library entry whose referenced folder changed since it was added: it is not loaded."""


def refused(name: str, folder: Path, problems: list[str]) -> ReferenceChangedError:
    shown = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
    return ReferenceChangedError(
        f"'{name}' refers to {folder}, and its files changed since it was added to the library ({shown}); "
        "NPU Studio does not load it.",
        f"Run `npu-studio models verify {name}` to see every change, or add the folder again "
        f"(`npu-studio models remove {name}`, then `npu-studio models add FOLDER`).",
    )
