"""Model folder manifests: what a model folder contains and how to check it is intact.

Every model folder (bundled demo models and user models) carries a ``manifest.json`` describing the
model and listing each file with its size and SHA-256. The schema is documented in
``assets/recipes/README.md``. `read_manifest` is the one reader: it gives a typed `Manifest`, and the
file's keys are read there and nowhere else; `has_manifest` says whether a folder has one. This module
is pure Python (no ONNX Runtime, no Qt) so the recipe, the engines and the UI can all use it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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


def manifest_path(folder: str | os.PathLike[str]) -> Path:
    """Where a model folder keeps its manifest."""
    return Path(folder) / MANIFEST_NAME


def has_manifest(folder: str | os.PathLike[str]) -> bool:
    """Whether `folder` has a manifest file (a finished NPU Studio model folder); says nothing of its contents."""
    return manifest_path(folder).is_file()


def sha256_file(path: str | os.PathLike[str], on_chunk: Callable[[int], None] | None = None) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks. `on_chunk(size)` is called with each chunk's size
    before it is hashed: progress, and a cancel check (it raises to stop)."""
    import hashlib  # here: loading OpenSSL costs ~3 ms of every command's start, and most hash nothing

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            if on_chunk is not None:
                on_chunk(len(chunk))
            digest.update(chunk)
    return digest.hexdigest()


def _inside(root: str | os.PathLike[str], rel: object) -> Path:
    return paths.resolve_inside(root, rel, what=f"Manifest file path {rel!r}", hint=_HINT_REBUILD)


def file_entry(root: str | os.PathLike[str], rel: str) -> dict[str, Any]:
    """Manifest entry ``{"path", "size", "sha256"}`` for the file ``rel`` inside ``root``."""
    path = _inside(root, rel)
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


@dataclass(frozen=True)
class ManifestFile:
    """One entry of the manifest's file list; a value of the wrong type reads as None."""

    path: str
    size: int | None
    sha256: str | None
    mtime_ns: int | None = None  # these three only in an entry that refers to a folder elsewhere
    ctime_ns: int | None = None
    ino: int | None = None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _section(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class Manifest:
    """A model folder's manifest.json, typed: the one place its keys are read (`read_manifest`).

    Text fields are "" and sections None (or empty) when the file lacks them or gives another type."""

    folder: Path
    schema: int | None
    name: str
    display_name: str
    kind: str
    precision: str
    devices: tuple[str, ...]
    licence: str
    files: tuple[ManifestFile, ...]  # the entries with a text path, in the file's order
    classifier: Mapping[str, Any] | None  # the classifier section (image classifiers only)
    chat: Mapping[str, Any] | None  # the chat section (chat models only)
    source: Mapping[str, Any]
    verification: Mapping[str, Any]
    quantization: Mapping[str, Any]
    reference: Path | None  # the folder a library entry refers to instead of holding the files
    document: Mapping[str, Any] = field(repr=False, compare=False)  # the whole tree, for checks that walk it

    @classmethod
    def parse(cls, folder: str | os.PathLike[str], document: Mapping[str, Any]) -> Manifest:
        """The typed view of a manifest document read from `folder` (read_manifest, or a scan's bounded read)."""
        root = Path(folder)
        listed = document.get("files")
        files = tuple(
            ManifestFile(
                entry["path"], _count(entry.get("size")), entry.get("sha256") if isinstance(entry.get("sha256"), str)
                else None, _count(entry.get("mtime_ns")), _count(entry.get("ctime_ns")), _count(entry.get("ino")),
            )
            for entry in (listed if isinstance(listed, list) else [])
            if isinstance(entry, Mapping) and isinstance(entry.get("path"), str)
        )  # fmt: skip
        devices = document.get("devices")
        reference = _section(document.get("reference")) or {}
        referred = reference.get("folder")
        return cls(
            folder=root,
            schema=_count(document.get("schema")),
            name=_text(document.get("name")),
            display_name=_text(document.get("display_name")),
            kind=_text(document.get("kind")),
            precision=_text(document.get("precision")),
            devices=tuple(d for d in devices if isinstance(d, str)) if isinstance(devices, list) else (),
            licence=_text(document.get("licence")),
            files=files,
            classifier=_section(document.get("classifier")),
            chat=_section(document.get("chat")),
            source=_section(document.get("source")) or {},
            verification=_section(document.get("verification")) or {},
            quantization=_section(document.get("quantization")) or {},
            reference=Path(referred) if isinstance(referred, str) and referred.strip() else None,
            document=document,
        )

    @property
    def model_name(self) -> str:
        """The model's name: the manifest's, else the folder's."""
        return self.name or self.folder.name

    @property
    def title(self) -> str:
        """The name shown to people: the display name, else the model's name."""
        return self.display_name or self.model_name

    @property
    def quantized(self) -> bool:
        return self.precision.lower().startswith("qdq")

    @property
    def derived_from(self) -> str:
        """The name of the float model a quantized variant was made from ("" for any other model)."""
        return _text(self.source.get("derived_from"))

    @property
    def origin(self) -> str:
        """Where the model came from: its hub repository, else the folder it was imported from."""
        return str(self.source.get("repo_id") or self.source.get("imported_from") or "")

    @property
    def licence_notes(self) -> str:
        return _text(self.document.get("licence_notes"))

    @property
    def recipe_version(self) -> int | None:
        """The version of the recipe step that built a bundled demo model (None for any other model)."""
        return _count(self.document.get("recipe_version"))

    @property
    def context_length(self) -> int | None:
        """The chat model's context length in tokens, when the manifest records it."""
        return _count((self.chat or {}).get("context_length"))

    @property
    def num_classes(self) -> int | None:
        """How many classes an image classifier tells apart, when the manifest records it."""
        return _count((self.classifier or {}).get("num_classes"))

    @property
    def labels_file(self) -> object:
        """The labels file an image classifier's section names ("labels.txt" when it names none), as written:
        `paths.resolve_inside` judges it."""
        named = (self.classifier or {}).get("labels")
        return "labels.txt" if named is None else named

    @property
    def input_name(self) -> Any:  # as written (any JSON value): the classifier checks it against the model
        return (self.classifier or {}).get("input")

    @property
    def output_name(self) -> Any:  # as written, like input_name
        return (self.classifier or {}).get("output")

    @property
    def output_kind(self) -> str:
        """What an image classifier outputs: "logits" (softmax applied) or "probabilities"."""
        return str((self.classifier or {}).get("output_kind", "logits"))

    @property
    def kv_cache_dtype(self) -> str:
        return _text((self.chat or {}).get("kv_cache_dtype"))

    @property
    def top1_agreement(self) -> float:
        """How often a quantized variant's top class matched the float model's when it was made (0 unknown)."""
        agreement = self.verification.get("top1_agreement_with_float", {})
        try:
            return float(agreement["agree"]) / float(agreement["total"])
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return 0.0

    @property
    def activation_bits(self) -> int:
        """A quantized model's activation width: 16 or 8 (from its quantization section, else its precision)."""
        activations = str(self.quantization.get("activations", "")).lower()
        if activations:
            return 16 if "16" in activations else 8
        return 16 if "a16" in self.precision.lower() else 8

    def classifier_problem(self) -> str:
        """Why the manifest has no usable classifier section ("" when it has one)."""
        raw = self.document.get("classifier")
        if self.classifier is not None:
            return ""
        return "it has no classifier section" if raw is None else (
            f"its classifier section is a {type(raw).__name__}, not an object")  # fmt: skip

    def preprocess(self) -> Preprocess:
        """How the classifier wants its photos (its section's input_size, resize_shorter, resample, mean, std,
        layout, color); ValueError when the section is missing or holds a value that cannot be used."""
        if self.classifier is None:
            raise ValueError(self.classifier_problem())
        return Preprocess.from_manifest(self.classifier)

    def model_entry(self) -> ManifestFile:
        """The ONNX model's entry (the first .onnx file listed; model.onnx when none is)."""
        return next((f for f in self.files if f.path.lower().endswith(".onnx")), ManifestFile("model.onnx", None, None))


RESAMPLE_NAMES = ("bicubic", "bilinear", "lanczos", "nearest")  # Pillow's filters by name (engines/vision/images.py)


def check_normalisation(mean: Sequence[float], std: Sequence[float]) -> None:
    """The manifest's per-channel normalisation: finite means, finite standard deviations above 0."""
    for name, values in (("mean", mean), ("std", std)):
        if any(not math.isfinite(v) for v in values):
            raise ValueError(f"'{name}' {list(values)} holds a value that is not a finite number")
    if any(v <= 0 for v in std):
        raise ValueError(f"'std' {list(std)} must be above 0 for every channel (it divides the pixels)")


@dataclass(frozen=True)
class Preprocess:
    """How a classifier wants its input (from the model's manifest: `Manifest.preprocess`)."""

    input_size: tuple[int, int] = (224, 224)  # height, width
    resize_shorter: int = 256
    resample: str = "bicubic"
    mean: tuple[float, float, float] = (127.0, 127.0, 127.0)
    std: tuple[float, float, float] = (128.0, 128.0, 128.0)
    layout: str = "NCHW"
    color: str = "RGB"

    @classmethod
    def from_manifest(cls, spec: Mapping[str, object]) -> Preprocess:
        """The classifier section's preprocessing; ValueError (never TypeError/OverflowError) for any value a
        hand-edited manifest may hold."""

        def number(value: object, key: str) -> float:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"'{key}' must hold finite numbers (found {value!r:.40})")
            return float(value)

        def whole(value: object, key: str, top: int) -> int:
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ValueError(f"'{key}' must be a whole number from 1 to {top} (found {value!r:.40})")
            return value

        def triple(key: str, default: tuple[float, float, float]) -> tuple[float, float, float]:
            value = spec.get(key, default)
            if not isinstance(value, list | tuple) or len(value) != 3:
                raise ValueError(f"'{key}' must be a list of 3 numbers")
            return (number(value[0], key), number(value[1], key), number(value[2], key))

        size = spec.get("input_size", [224, 224])
        if not isinstance(size, list | tuple) or len(size) != 2:
            raise ValueError("'input_size' must be [height, width]")
        height, width = whole(size[0], "input_size", 4096), whole(size[1], "input_size", 4096)
        resample = str(spec.get("resample", "bicubic"))
        if resample not in RESAMPLE_NAMES:
            raise ValueError(f"'resample' must be one of {', '.join(RESAMPLE_NAMES)}")
        layout = str(spec.get("layout", "NCHW")).upper()
        if layout not in {"NCHW", "NHWC"}:
            raise ValueError("'layout' must be NCHW or NHWC")
        color = str(spec.get("color", "RGB")).upper()
        if color not in {"RGB", "BGR"}:
            raise ValueError("'color' must be RGB or BGR")
        resize_shorter = whole(spec.get("resize_shorter", max(height, width)), "resize_shorter", 8192)
        check_normalisation(triple("mean", (127.0, 127.0, 127.0)), triple("std", (128.0, 128.0, 128.0)))
        return cls(
            input_size=(height, width),
            resize_shorter=resize_shorter,
            resample=resample,
            mean=triple("mean", (127.0, 127.0, 127.0)),
            std=triple("std", (128.0, 128.0, 128.0)),
            layout=layout,
            color=color,
        )

    def manifest_section(self) -> dict[str, Any]:
        """These settings as the keys of a manifest's classifier section (what `from_manifest` reads)."""
        return {
            "layout": self.layout,
            "input_size": list(self.input_size),
            "resize_shorter": self.resize_shorter,
            "resample": self.resample,
            "mean": list(self.mean),
            "std": list(self.std),
            "color": self.color,
        }


def read_manifest(folder: str | os.PathLike[str], *, require_schema: bool = True) -> Manifest:
    """`folder/manifest.json` as a Manifest; a ModelError that says what is wrong otherwise.

    With `require_schema` (the library, import, quantize) the file must be this version's schema and hold
    a file list; without it (classify, benchmark, variants) any JSON object is read."""
    root = Path(folder)
    path = manifest_path(root)
    try:
        data = jsonfile.read_json(path) if require_schema else jsonfile.read_object(path)
    except jsonfile.JsonFileError as exc:
        if exc.missing:
            raise ModelError(f"No {MANIFEST_NAME} in {folder}.", _HINT_REBUILD) from None
        if not require_schema:
            raise ModelError(f"The manifest in {root} is not valid: {exc.problem}.", _HINT_REBUILD) from None
        if exc.kind == "unreadable":
            raise ModelError(f"Cannot read {path}: {exc.detail}.", _HINT_REBUILD) from None
        raise ModelError(f"{path} cannot be used: {exc.problem}.", _HINT_REBUILD) from None
    if require_schema:
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
    return Manifest.parse(root, data)


def write_manifest(folder: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write ``folder/manifest.json`` atomically (temporary file in the same folder, then replace)."""
    target = manifest_path(folder)
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


def verify_files(manifest: Manifest, *, check_hashes: bool = True) -> list[str]:
    """Compare the files listed in ``manifest`` with what is in its folder.

    Returns a list of human-readable problems (empty when every file is present with the listed
    size and, if ``check_hashes``, the listed SHA-256). Never raises for a bad entry.
    """
    files = manifest.document.get("files")
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
            path = _inside(manifest.folder, rel)
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
