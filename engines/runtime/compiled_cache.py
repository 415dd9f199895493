"""Compiled-model (EPContext) cache for execution providers that compile a model for their device.

QNN compiles an ONNX model into a context binary for the Hexagon NPU; that takes seconds to tens of
seconds, every time, unless the compiled "context model" is kept. A context model only loads with the
EP, SDK and driver that made it (after an update QNN fails with 5000/5005), so an entry's key holds
everything that changes the compiled result: the model's SHA-256, the EP, the EP / QNN SDK / ONNX
Runtime / driver versions and the provider options that affect compilation (sorted).

Layout under the cache root (one folder per key, written to a temporary folder then renamed, so a
crash never leaves an entry that looks complete)::

    <root>/<digest>/model_ctx.onnx   the context model (plus any EP binaries next to it)
    <root>/<digest>/entry.json       key fields, created time, sizes, compile seconds

The CPU EP writes nothing for EPContext: CPU sessions need no cache (see `needs_cache`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engines import jsonfile, workdirs
from engines.errors import StorageError

if TYPE_CHECKING:
    from engines.runtime.devices import DiscoveryReport

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
CONTEXT_MODEL_NAME = "model_ctx.onnx"
SIDECAR_NAME = "entry.json"
_TMP_PREFIX = ".tmp-"

# EPs that can write an EPContext model. DirectML and the CPU EP compile nothing worth keeping.
COMPILING_EPS = frozenset(
    {"QNNExecutionProvider", "OpenVINOExecutionProvider", "VitisAIExecutionProvider", "NvTensorRTRTXExecutionProvider"}
)

# Provider options that do not change the compiled result: runtime knobs, profiling and file paths.
# Everything else is part of the key (an unknown option is assumed to matter).
RUNTIME_ONLY_OPTIONS = frozenset(
    {
        "backend_path",
        "htp_performance_mode",
        "profiling_level",
        "profiling_file_path",
        "rpc_control_latency",
        "qnn_context_priority",
        "htp_shared_memory_allocator",
    }
)

StatusCallback = Callable[[str], None]  # plain-language status lines ("Compiling for the NPU…")


def needs_cache(ep: str) -> bool:
    return ep in COMPILING_EPS


@dataclass(frozen=True)
class CacheKey:
    """Everything a compiled model depends on."""

    model_sha256: str
    ep: str
    ep_version: str  # EP plugin / QNN SDK version as reported
    ort_version: str
    driver_version: str = ""
    options: tuple[tuple[str, str], ...] = ()
    format: int = CACHE_FORMAT

    @property
    def digest(self) -> str:
        import hashlib  # here: loading OpenSSL costs ~3 ms of a start on the CPU, which has no cache

        payload = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["options"] = dict(self.options)
        return data


@dataclass(frozen=True)
class CacheEntry:
    """One compiled model in the cache, as described by its sidecar."""

    digest: str
    folder: Path
    model_name: str  # the source model's file name (for listings)
    ep: str
    ep_version: str
    ort_version: str
    driver_version: str
    options: dict[str, str]
    created: float
    compile_seconds: float
    source_size: int
    size_bytes: int  # every file of the entry

    @property
    def context_model(self) -> Path:
        return self.folder / CONTEXT_MODEL_NAME

    def as_dict(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "folder": str(self.folder),
            "model": self.model_name,
            "ep": self.ep,
            "ep_version": self.ep_version,
            "ort_version": self.ort_version,
            "driver_version": self.driver_version,
            "options": dict(self.options),
            "created": self.created,
            "compile_seconds": self.compile_seconds,
            "source_size": self.source_size,
            "size_bytes": self.size_bytes,
        }


@dataclass
class CacheOutcome:
    """What the cache did for one session: reported next to the Placement."""

    status: str  # "hit" | "miss" | "rebuilt" | "not-needed" | "unavailable"
    ep: str = ""
    key: str = ""
    compile_seconds: float = 0.0  # this run's compile (0 on a hit)
    load_seconds: float = 0.0  # creating the session from the context model (or the plain model)
    first_compile_seconds: float = 0.0  # what the entry cost when it was first compiled
    notices: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.status == "hit":
            text = f"Loaded the compiled model from the cache in {self.load_seconds:.2f} s"
            if self.first_compile_seconds:
                text += f" (compiling it took {self.first_compile_seconds:.1f} s the first time)"
            return text + "."
        if self.status in {"miss", "rebuilt"}:
            return (
                f"Compiled the model for this device in {self.compile_seconds:.1f} s and saved it; "
                f"the next start loads it from the cache (session created in {self.load_seconds:.2f} s)."
            )
        if self.status == "not-needed":
            return "No compiled-model cache needed: this device runs the ONNX model directly."
        return self.notices[-1] if self.notices else "The compiled-model cache was not used."

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "ep": self.ep,
            "key": self.key,
            "compile_seconds": self.compile_seconds,
            "load_seconds": self.load_seconds,
            "first_compile_seconds": self.first_compile_seconds,
            "notices": list(self.notices),
            "summary": self.summary(),
        }


_hash_memo: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


def model_sha256(path: Path) -> str:
    """SHA-256 of the model file (remembered per path, size and mtime within the process)."""
    stat = path.stat()
    memo_key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _hash_lock:
        if memo_key in _hash_memo:
            return _hash_memo[memo_key]
    from engines.models.manifest import sha256_file

    value = sha256_file(path)
    with _hash_lock:
        _hash_memo[memo_key] = value
    return value


def options_that_matter(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in options.items() if k not in RUNTIME_ONLY_OPTIONS))


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _read_sidecar(folder: Path) -> dict[str, Any]:
    try:
        data = jsonfile.read_json(folder / SIDECAR_NAME)
    except jsonfile.JsonFileError as exc:
        raise ValueError(exc.problem) from None
    if not isinstance(data, dict) or not isinstance(data.get("key"), dict):
        raise ValueError("not a cache entry description")
    return data


def _entry_from(folder: Path, data: Mapping[str, Any]) -> CacheEntry:
    key = data["key"]
    return CacheEntry(
        digest=folder.name,
        folder=folder,
        model_name=str(data.get("model_name", "")),
        ep=str(key["ep"]),
        ep_version=str(key["ep_version"]),
        ort_version=str(key["ort_version"]),
        driver_version=str(key.get("driver_version", "")),
        options={str(k): str(v) for k, v in dict(key.get("options", {})).items()},
        created=float(data["created"]),
        compile_seconds=float(data.get("compile_seconds", 0.0)),
        source_size=int(data.get("source_size", 0)),
        size_bytes=_folder_size(folder),
    )


class CompiledModelCache:
    """Compiled context models on disk, keyed by `CacheKey`. Safe for concurrent readers; a writer
    that loses a race to another process keeps the winner's entry."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def key_for(
        self,
        model_path: Path,
        ep: str,
        *,
        ep_version: str,
        ort_version: str,
        driver_version: str = "",
        options: Mapping[str, str] | None = None,
    ) -> CacheKey:
        return CacheKey(
            model_sha256=model_sha256(model_path),
            ep=ep,
            ep_version=ep_version,
            ort_version=ort_version,
            driver_version=driver_version,
            options=options_that_matter(options or {}),
        )

    def _folder(self, key: CacheKey | str) -> Path:
        digest = key if isinstance(key, str) else key.digest
        return self.root / digest

    def lookup(self, key: CacheKey) -> tuple[CacheEntry | None, str]:
        """The entry for `key`, or None. A damaged entry is deleted and explained in the second value."""
        folder = self._folder(key)
        if not folder.is_dir():
            return None, ""
        try:
            sidecar = _read_sidecar(folder)
            entry = _entry_from(folder, sidecar)
            problem = ""
            model = entry.context_model
            expected = int(sidecar.get("context_model_size", -1))
            if not model.is_file():
                problem = "the compiled model file is missing"
            elif model.stat().st_size != expected:
                problem = f"the compiled model file is {model.stat().st_size} bytes, {expected} were written"
            elif sidecar.get("key") != key.as_dict():
                problem = "it was made for a different model or device setup"
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problem = f"its description could not be read: {exc}"
        if problem:
            self.remove(folder.name)
            return None, f"A damaged compiled-model cache entry was removed ({problem}); compiling again."
        return entry, ""

    def _read(self, folder: Path) -> CacheEntry:
        return _entry_from(folder, _read_sidecar(folder))

    def store(
        self,
        key: CacheKey,
        source_model: Path,
        compile_into: Callable[[Path], None],
        on_progress: StatusCallback | None = None,
    ) -> CacheEntry:
        """Compile with `compile_into(context_model_path)` into a temporary folder, add the sidecar, then
        rename the folder into place. Raises what `compile_into` raises (the temporary folder is removed)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            workdirs.sweep(self.root, (_TMP_PREFIX,))  # what a compile that was killed left
            tmp = workdirs.make(self.root, f"{_TMP_PREFIX}{key.digest}-")
        except OSError as exc:
            raise StorageError(
                f"The compiled-model cache folder {self.root} cannot be written: {exc.strerror or exc}.",
                "Free some disk space or check the folder's permissions; the model still runs, it just compiles "
                "again next time.",
            ) from exc
        try:
            if on_progress is not None:
                on_progress(f"Compiling {source_model.name} for the {_short(key.ep)} (first run only)…")
            started = time.perf_counter()
            compile_into(tmp / CONTEXT_MODEL_NAME)
            seconds = time.perf_counter() - started
            context = tmp / CONTEXT_MODEL_NAME
            if not context.is_file() or context.stat().st_size == 0:
                raise StorageError(
                    f"The {_short(key.ep)} compiled nothing for {source_model.name}.",
                    "The model runs without a compiled copy; report this with `npu-studio doctor`.",
                )
            sidecar = {
                "format": CACHE_FORMAT,
                "key": key.as_dict(),
                "model_name": source_model.name,
                "created": time.time(),
                "compile_seconds": round(seconds, 3),
                "source_size": source_model.stat().st_size,
                "context_model_size": context.stat().st_size,
                "files": {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()},
            }
            (tmp / SIDECAR_NAME).write_text(json.dumps(sidecar, indent=2), encoding="utf-8")
            final = self._folder(key)
            try:
                os.replace(tmp, final)
            except OSError:
                if not final.is_dir():
                    raise
                log.info("compiled cache entry %s was written by someone else first; keeping theirs", key.digest)
                shutil.rmtree(tmp, ignore_errors=True)
            if on_progress is not None:
                on_progress(f"Compiled in {seconds:.1f} s and saved to the cache.")
            return self._read(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def remove(self, digest: str) -> bool:
        folder = self._folder(digest)
        if not folder.exists():
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return not folder.exists()

    def entries(self) -> list[CacheEntry]:
        """Every readable entry, newest first (damaged ones are skipped, see `clear`)."""
        found = []
        for folder in self._entry_folders():
            try:
                found.append(self._read(folder))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.info("skipping unreadable cache entry %s: %s", folder.name, exc)
        return sorted(found, key=lambda e: e.created, reverse=True)

    def _entry_folders(self) -> Iterable[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(_TMP_PREFIX)]

    def clear(self) -> tuple[int, int]:
        """Delete every entry (and leftovers of interrupted compiles). Returns (entries, bytes) removed."""
        count = 0
        total = 0
        if not self.root.is_dir():
            return 0, 0
        for folder in list(self.root.iterdir()):
            if not folder.is_dir():
                continue
            size = _folder_size(folder)
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                total += size
                count += 0 if folder.name.startswith(_TMP_PREFIX) else 1
        return count, total

    def total_bytes(self) -> int:
        return _folder_size(self.root) if self.root.is_dir() else 0


def _short(ep: str) -> str:
    from engines.types import short_ep_name

    return {"QNN": "NPU (QNN)"}.get(short_ep_name(ep), short_ep_name(ep))


def ep_version_for(ep: str, report: DiscoveryReport) -> tuple[str, str]:
    """(EP / SDK version text, driver version) for a cache key, from a DiscoveryReport and the plugin.

    A driver or SDK update changes these, so an entry compiled before the update is never looked up
    again (the 5000/5005 "incompatible context binary" failures users see after updates)."""
    from engines import runtime

    parts: list[str] = []
    in_use = [p for p in report.plugins if p.ep == ep and p.registered]
    # Only the plugin ONNX Runtime uses counts: the Windows ML catalog's QNN and the bundled one compile
    # different context binaries (different QNN SDKs), so switching between them must miss the cache.
    for plugin in in_use or [p for p in report.plugins if p.ep == ep and p.installed]:
        if plugin.version:
            parts.append(f"{plugin.package} {plugin.version}")
    devices = report.find_ep(ep)
    ep_version = next((d.ep_version for d in devices if d.ep_version), "")
    if ep_version:
        parts.append(f"ep {ep_version}")
    if ep == "QNNExecutionProvider" and all(p.source != "Windows ML catalog" for p in in_use):
        sdk = qnn_sdk_version(runtime.qnn_plugin())
        if sdk:
            parts.append(f"QNN SDK {sdk}")
    driver = next((d.driver_version for d in devices if d.driver_version), "")
    return "; ".join(parts) or "unknown", driver


def qnn_sdk_version(plugin: Any) -> str:
    """The QNN SDK version the onnxruntime-qnn plugin carries, when it says (the API is not fixed)."""
    if plugin is None:
        return ""
    for name in ("get_qnn_sdk_version", "get_qnn_version", "qnn_sdk_version"):
        getter = getattr(plugin, name, None)
        if callable(getter):
            try:
                return str(getter())
            except Exception as exc:  # an optional, informative call must never break a session
                log.debug("%s() failed: %s", name, exc)
    for name in ("__qnn_sdk_version__", "QNN_SDK_VERSION", "qnn_version"):
        value = getattr(plugin, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


