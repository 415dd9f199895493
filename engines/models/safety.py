"""Checks on an untrusted ONNX file before any native code loads it.

A model from the internet can point its external data anywhere on disk (`../../secrets`, an absolute
path, a symlink out of its folder), claim to be small and be huge, or depend on custom operator
libraries. NPU Studio refuses all of these with a clear message; it never loads a library that a model
folder names. The file's structure is read by engines.models.onnx_wire (protobuf's wire format, tensor
payloads skipped), so the check needs neither the `onnx` package nor the weights in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engines.errors import ModelError
from engines.models import onnx_wire
from engines.models.paths import resolve_inside

# Operator domains ONNX Runtime implements itself; anything else needs a custom-op library.
KNOWN_DOMAINS = {
    "",
    "ai.onnx",
    "ai.onnx.ml",
    "com.microsoft",
    "com.microsoft.nchwc",
    "ai.onnx.training",
    "ai.onnx.preview.training",
    "com.ms.internal.nhwc",
    "com.microsoft.experimental",
    "com.microsoft.dml",
    "com.qualcomm",
}
# A declared size is a promise: a file this much larger than declared is refused.
SIZE_TOLERANCE = 1.10
# Files that passed, by identity (path, size, modification time, inode, and its folder's modification
# time, which changes when a file there is added, renamed or replaced), with their external files'
# sizes: opening a classifier checks its file when the folder is read and again before the session is
# made (~16 ms for EfficientNet-Lite0's 18 MB); a changed or replaced file is checked again.
_PASSED: dict[tuple[str, int, int, int, int], tuple[ModelFiles, tuple[int, ...]]] = {}
_PASSED_MAX = 64


@dataclass(frozen=True)
class ModelFiles:
    """What an ONNX model consists of on disk."""

    model: Path
    external_files: tuple[Path, ...]
    total_bytes: int
    custom_domains: tuple[str, ...]


def inspect_onnx(model_path: Path, declared_bytes: int | None = None) -> ModelFiles:
    """Read the model's structure (not its weights) and check every file it refers to."""
    model_path = Path(model_path)
    if not model_path.is_file():
        raise ModelError(f"Model file not found: {model_path}", "Build the demo models or import the model again.")
    stat = model_path.stat()
    size = stat.st_size
    if declared_bytes is not None and size > declared_bytes * SIZE_TOLERANCE:
        raise ModelError(
            f"{model_path.name} is {size:,} bytes but its manifest declares {declared_bytes:,}.",
            "The file was changed or replaced; re-import the model from its source.",
        )
    key = (str(model_path.resolve()), size, stat.st_mtime_ns, stat.st_ino, model_path.parent.stat().st_mtime_ns)
    known = _PASSED.get(key)
    if known is not None and _sizes(known[0].external_files) == known[1]:
        return known[0]
    files = _inspect(model_path, size)
    if len(_PASSED) >= _PASSED_MAX:
        _PASSED.clear()
    _PASSED[key] = (files, _sizes(files.external_files))
    return files


def _sizes(paths: tuple[Path, ...]) -> tuple[int, ...]:
    """Each file's size (-1: gone)."""
    sizes = []
    for path in paths:
        try:
            sizes.append(path.stat().st_size)
        except OSError:
            sizes.append(-1)
    return tuple(sizes)


def _inspect(model_path: Path, size: int) -> ModelFiles:
    try:
        model = onnx_wire.read_file(model_path)
    except (onnx_wire.DecodeError, OSError) as exc:
        raise ModelError(
            f"{model_path.name} is not a valid ONNX model ({type(exc).__name__}).",
            "Rebuild or re-import the model; check the file is complete.",
        ) from exc
    root = model_path.parent
    external: dict[Path, int] = {}
    for tensor in model.external_tensors:
        info = dict(tensor.external_data)
        what = f"External data of tensor '{tensor.name}'"
        path = resolve_inside(root, info.get("location", ""), what=what)
        if not path.is_file():
            raise ModelError(f"{what} is missing ({info.get('location')}).", "Copy the whole model folder.")
        file_size = path.stat().st_size
        offset = _byte_count(info.get("offset"), f"{what} has an offset")
        # Without a `length` the runtime reads as many bytes as the tensor's shape says: bound that too.
        needed = _tensor_bytes(tensor)
        length = _byte_count(info.get("length"), f"{what} has a length")
        if info.get("length") is None and needed is not None:
            length = needed
        elif needed is not None and length != needed:
            raise ModelError(
                f"{what} says it is {length:,} bytes long but its shape needs {needed:,}.",
                "The model file is damaged or was edited; rebuild or re-import it.",
            )
        end = offset + length
        if end > file_size:
            raise ModelError(
                f"{what} reaches byte {end:,} but {path.name} has only {file_size:,} bytes (truncated).",
                "Copy the whole model folder again.",
            )
        external[path] = file_size
    total = size + sum(external.values())
    # Domains of every node (main graph, nested graphs, local functions' bodies, training graphs) that
    # neither ONNX Runtime nor one of the model's own functions defines.
    custom = tuple(sorted(model.node_domains - KNOWN_DOMAINS - model.function_domains))
    if custom:
        raise ModelError(
            f"{model_path.name} uses custom operators ({', '.join(custom)}) that need an extra native library.",
            "NPU Studio never loads libraries named by a model; use a model made of standard ONNX operators.",
        )
    return ModelFiles(model_path, tuple(external), total, custom)


def _byte_count(value: str | None, what: str) -> int:
    """An external-data offset or length: absent is 0; anything but a whole number of bytes is refused."""
    if value is None or value == "":
        return 0
    if not value.isdigit() or len(value) > 20:
        raise ModelError(f"{what} that is not a byte count ({value[:40]!r}).", "The model file is damaged; rebuild it.")
    return int(value)


def _tensor_bytes(tensor: onnx_wire.Tensor) -> int | None:
    """Bytes a tensor's shape and type take (None when the type has no fixed size, e.g. strings)."""
    for dim in tensor.dims:
        if dim < 0:
            raise ModelError(f"Tensor '{tensor.name}' has a negative dimension ({dim}).", "The model file is damaged.")
    return tensor.byte_size()
