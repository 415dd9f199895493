"""Model folder manifests: what a model folder contains and how to check it is intact.

Every model folder (bundled demo models and user models) carries a ``manifest.json`` describing the
model and listing each file with its size and SHA-256. The schema is documented in
``assets/recipes/README.md``. This module is pure Python (no ONNX Runtime, no Qt) so the recipe,
the engines and the UI can all use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from engines import jsonfile
from engines.errors import ModelError
from engines.models import paths

MANIFEST_NAME = "manifest.json"
SCHEMA_VERSION = 1
_CHUNK = 1 << 20
_HINT_REBUILD = (
    "Rebuild the bundled models with `python assets/recipes/build_demo_models.py --force`, "
    "or re-import the model folder."
)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def resolve_inside(root: str | os.PathLike[str], rel: str) -> Path:
    """``root / rel`` resolved, for a file the manifest lists (the one rule: engines/models/paths.py)."""
    return paths.resolve_inside(root, rel, what=f"Manifest file path {rel!r}", hint=_HINT_REBUILD)


def file_entry(root: str | os.PathLike[str], rel: str) -> dict[str, Any]:
    """Manifest entry ``{"path", "size", "sha256"}`` for the file ``rel`` inside ``root``."""
    path = resolve_inside(root, rel)
    if not path.is_file():
        raise ModelError(f"{rel} is not a file in {root}.", _HINT_REBUILD)
    return {
        "path": PurePosixPath(rel.replace("\\", "/")).as_posix(),
        "size": path.stat().st_size,
        "sha256": sha256_file(path),
    }


def list_model_files(root: str | os.PathLike[str], exclude: Iterable[str] = (MANIFEST_NAME,)) -> list[str]:
    """Relative POSIX paths of every regular file under ``root`` (sorted), minus ``exclude``."""
    base = Path(root)
    skip = set(exclude)
    found: list[str] = []
    for path in base.rglob("*"):
        if path.is_file():
            rel = path.relative_to(base).as_posix()
            if rel not in skip:
                found.append(rel)
    return sorted(found)


def load_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and minimally validate ``folder/manifest.json``; raises ``ModelError`` when unusable."""
    path = Path(folder) / MANIFEST_NAME
    try:
        data = jsonfile.read_json(path)
    except jsonfile.JsonFileError as exc:
        if exc.missing:
            raise ModelError(f"No {MANIFEST_NAME} in {folder}.", _HINT_REBUILD) from None
        if exc.kind == "unreadable":
            raise ModelError(f"Cannot read {path}: {exc.detail}.", _HINT_REBUILD) from None
        raise ModelError(f"{path} cannot be used: {exc.problem}.", _HINT_REBUILD) from None
    if not isinstance(data, dict):
        raise ModelError(f"{path} does not hold a JSON object.", _HINT_REBUILD)
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        raise ModelError(
            f"{path} has manifest schema {schema!r}; this version of NPU Studio reads schema {SCHEMA_VERSION}.",
            _HINT_REBUILD,
        )
    if not isinstance(data.get("files"), list):
        raise ModelError(f"{path} has no 'files' list.", _HINT_REBUILD)
    return data


@dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int | None
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A model folder's manifest.json, typed: the one reader every command and the engines use."""

    folder: Path
    name: str
    display_name: str
    kind: str
    precision: str
    devices: tuple[str, ...]
    licence: str
    files: tuple[ManifestFile, ...]
    classifier: Mapping[str, Any] | None  # the classifier section (image classifiers only)
    source: Mapping[str, Any]
    verification: Mapping[str, Any]
    data: Mapping[str, Any]  # the whole document, for what only one reader needs

    @property
    def quantized(self) -> bool:
        return self.precision.lower().startswith("qdq")

    @property
    def derived_from(self) -> str:
        value = self.source.get("derived_from")
        return value if isinstance(value, str) else ""

    def model_entry(self) -> ManifestFile:
        """The ONNX model's entry (the first .onnx file listed; model.onnx when none is)."""
        return next((f for f in self.files if f.path.lower().endswith(".onnx")), ManifestFile("model.onnx", None, ""))

    def path_of(self, rel: str, what: str = "", *, must_exist: bool = False) -> Path:
        """A file the manifest names, inside the folder (the one rule: engines/models/paths.py)."""
        return paths.resolve_inside(
            self.folder, rel, what=what or f"The manifest in {self.folder}", must_exist=must_exist, hint=_HINT_REBUILD
        )


def read_manifest(folder: str | os.PathLike[str], *, require_schema: bool = True) -> Manifest:
    """`folder/manifest.json` as a Manifest; a ModelError that says what is wrong otherwise."""
    root = Path(folder)
    if require_schema:
        data: Mapping[str, Any] = load_manifest(root)
    else:
        try:
            data = jsonfile.read_object(root / MANIFEST_NAME)
        except jsonfile.JsonFileError as exc:
            if exc.missing:
                raise ModelError(f"No {MANIFEST_NAME} in {root}.", _HINT_REBUILD) from None
            raise ModelError(f"The manifest in {root} is not valid: {exc.problem}.", _HINT_REBUILD) from None
    files = []
    listed = data.get("files")
    for entry in listed if isinstance(listed, list) else []:
        if isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
            size = entry.get("size")
            digest = entry.get("sha256")
            files.append(
                ManifestFile(
                    str(entry["path"]),
                    size if isinstance(size, int) and not isinstance(size, bool) else None,
                    digest if isinstance(digest, str) else "",
                )
            )

    def section(key: str) -> Mapping[str, Any]:
        value = data.get(key)
        return value if isinstance(value, Mapping) else {}

    classifier = data.get("classifier")
    devices = data.get("devices")
    return Manifest(
        folder=root,
        name=str(data.get("name") or root.name),
        display_name=str(data.get("display_name") or data.get("name") or root.name),
        kind=str(data.get("kind", "")),
        precision=str(data.get("precision", "fp32")),
        devices=tuple(str(d).lower() for d in devices) if isinstance(devices, list) else (),
        licence=str(data.get("licence", "")),
        files=tuple(files),
        classifier=classifier if isinstance(classifier, Mapping) else None,
        source=section("source"),
        verification=section("verification"),
        data=data,
    )


def write_manifest(folder: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write ``folder/manifest.json`` atomically (temporary file in the same folder, then replace)."""
    target = Path(folder) / MANIFEST_NAME
    payload = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    fd, tmp_name = tempfile.mkstemp(prefix=f".{MANIFEST_NAME}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp_name, 0o644)  # mkstemp creates 0600; a model folder is meant to be readable by all
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def verify_files(
    folder: str | os.PathLike[str], manifest: Mapping[str, Any], *, check_hashes: bool = True
) -> list[str]:
    """Compare the files listed in ``manifest`` with what is on disk.

    Returns a list of human-readable problems (empty when every file is present with the listed
    size and, if ``check_hashes``, the listed SHA-256). Never raises for a bad entry.
    """
    files = manifest.get("files")
    if not isinstance(files, list):
        return ["the manifest has no 'files' list"]
    if not files:
        return ["the manifest lists no files"]
    problems: list[str] = []
    seen: set[str] = set()
    for index, entry in enumerate(files):
        if not isinstance(entry, Mapping):
            problems.append(f"files[{index}] is not an object")
            continue
        rel = entry.get("path")
        size = entry.get("size")
        digest = entry.get("sha256")
        if not isinstance(rel, str) or not rel.strip():
            problems.append(f"files[{index}] has no path")
            continue
        try:
            path = resolve_inside(folder, rel)
        except ModelError:
            problems.append(f"{rel}: path points outside the model folder")  # any unsafe name
            continue
        if rel in seen:
            problems.append(f"{rel}: listed twice")
            continue
        seen.add(rel)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            problems.append(f"{rel}: size is missing or invalid")
            continue
        if not isinstance(digest, str) or len(digest) != 64:
            problems.append(f"{rel}: sha256 is missing or invalid")
            continue
        if not path.is_file():
            problems.append(f"{rel}: missing")
            continue
        actual_size = path.stat().st_size
        if actual_size != size:
            problems.append(f"{rel}: size {actual_size} bytes, manifest says {size}")
            continue
        if check_hashes and sha256_file(path) != digest.lower():
            problems.append(f"{rel}: contents changed (sha256 mismatch)")
    return problems
