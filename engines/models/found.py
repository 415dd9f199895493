"""What a model folder found on this machine is, in plain words, from its own small files.

Read: `genai_config.json`, Foundry Local's `inference_model.json`, a model card's front matter
(`README.md`), NPU Studio's `manifest.json`, a Hugging Face `config.json` / `preprocessor_config.json`,
all through the bounded JSON reader (engines/jsonfile.py), each only when it is a regular file inside
the folder (engines/models/paths.py). From the ONNX files the config names, only the first
`head_bytes`: protobuf writes a graph's nodes before its weights, so the head tells whether the model is
precompiled for a device (EPContext nodes, and which EP made them) and how its weights are quantized.
Nothing is loaded. Whether NPU Studio can use the folder is checked here as far as its config and file
list tell; adding it to the library runs the full checks (engines/models/reference.py). Pure Python.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engines import jsonfile
from engines.errors import ModelError
from engines.models.library import format_bytes, suggest_name
from engines.models.native import is_native_library, walk
from engines.models.paths import hub_repository, resolve_inside
from engines.models.places import AI_DEV_GALLERY, AI_TOOLKIT, FOUNDRY, HUGGING_FACE, Place
from engines.types import CPU_EP, short_ep_name

GENAI_CONFIG = "genai_config.json"
HF_CONFIG = "config.json"
DOWNLOADING = "download.tmp"  # Foundry Local's marker of a download in progress


SMALL_FILE = 2 << 20  # a config, card or manifest is KBs; a tokenizer_config with its template < 1 MB
_EP_MARKERS = {
    b"QNNExecutionProvider": "QNNExecutionProvider",
    b"OpenVINOExecutionProvider": "OpenVINOExecutionProvider",
    b"VitisAIExecutionProvider": "VitisAIExecutionProvider",
}
_PRECISION_WORDS = re.compile(r"(?<![a-z0-9])(int4|int8|uint8|fp16|fp32|bf16|qdq|w4a16|w8a16|q4f16|awq)(?![a-z0-9])")
_LICENCE = re.compile(r"^licen[sc]e:\s*['\"]?([A-Za-z0-9.+-]+)", re.MULTILINE | re.IGNORECASE)
_BASE_MODEL = re.compile(r"^base_model:\s*(?:\n\s*-\s*)?['\"]?([A-Za-z0-9._/-]+)", re.MULTILINE)


@dataclass(frozen=True)
class ScanLimits:
    max_entries: int = 20_000  # directory entries looked at in one place
    max_dir_entries: int = 5_000  # a folder listing longer than this is not read further
    seconds: float = 10.0  # the whole scan
    max_models: int = 200
    folder_files: int = 5_000  # files counted in one model folder (its size)
    head_bytes: int = 256 << 10  # bytes read from the start of an ONNX file (its node list)


@dataclass(frozen=True)
class Candidate:
    folder: Path
    kind: str  # "chat" (a genai_config.json) or "vision" (maybe an image classifier)
    place: Place


@dataclass(frozen=True)
class Target:
    """The execution provider and device a folder's config (or its precompiled nodes) asks for."""

    ep: str  # CPU_EP when the config names none; "" for a model NPU Studio places itself (a classifier)
    device: str  # "NPU", "GPU" or "CPU" ("" with no ep)
    source: str = "genai_config.json"  # or "EPContext nodes", "manifest"

    @property
    def label(self) -> str:
        if not self.ep:
            return "Any device"
        if self.ep == CPU_EP:
            return "CPU"
        name = short_ep_name(self.ep)
        return name if name.upper().endswith(self.device) else f"{name} {self.device}"


@dataclass(frozen=True)
class FoundModel:
    folder: Path
    tool: str
    kind: str  # KIND_LLM or KIND_CLASSIFIER
    name: str
    publisher: str
    target: Target
    precision: str
    size_bytes: int
    files: int
    size_complete: bool  # False when the folder held more files than were counted
    context_length: int | None = None
    licence: str = ""
    precompiled: bool = False  # EPContext nodes: compiled for one device, runs nowhere else
    problem: str = ""  # why NPU Studio cannot use it as it is ("" when it looks usable)
    details: tuple[str, ...] = ()  # more plain facts ("12 classes, 224x224 input", "4-part pipeline")
    verdict: str = ""  # engines.models.here: "runs", "needs" or "unusable" ("" when not judged)
    runs_here: str = ""  # engines.models.here: the verdict in words
    in_library: str = ""  # the library name it was added under, when it was
    suggested_name: str = ""  # a name for it in the library (engines.models.found.name_for)

    @property
    def size_text(self) -> str:
        return format_bytes(self.size_bytes) + ("" if self.size_complete else "+")

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder), "tool": self.tool, "kind": self.kind, "name": self.name,
            "publisher": self.publisher, "execution_provider": self.target.ep, "device": self.target.device,
            "target": self.target.label, "target_from": self.target.source, "precision": self.precision,
            "size_bytes": self.size_bytes, "files": self.files, "size_complete": self.size_complete,
            "context_length": self.context_length, "licence": self.licence, "precompiled": self.precompiled,
            "problem": self.problem, "details": list(self.details), "verdict": self.verdict,
            "runs_here": self.runs_here, "in_library": self.in_library, "suggested_name": self.suggested_name,
        }  # fmt: skip


@dataclass(frozen=True)
class BrokenFolder:
    """A folder that looks like a model but whose own description cannot be read."""

    folder: Path
    tool: str
    problem: str

    def as_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "tool": self.tool, "problem": self.problem}


class Unreadable(Exception):
    """A file that describes the folder is there but cannot be used (the message says why)."""


def read_small(folder: Path, name: str, *, required: bool = False) -> dict[str, Any] | None:
    """The JSON object in `folder/name` when it is a regular file inside the folder; None when absent.
    Unreadable (with the reason) when it is there but cannot be used."""
    path = folder / name
    if not os.path.lexists(path):
        if required:
            raise Unreadable(f"{name} is missing")
        return None
    try:
        resolve_inside(folder, name, what=name)
    except ModelError as exc:
        raise Unreadable(exc.message) from None
    if not _regular(path):
        raise Unreadable(f"{name} is not a regular file (a pipe, a device or a folder)")
    try:
        return jsonfile.read_object(path, max_bytes=SMALL_FILE)
    except jsonfile.JsonFileError as exc:
        raise Unreadable(f"{name}: {exc.problem}") from None


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _card(folder: Path) -> str:
    """The front matter of the folder's model card (README.md), or of its Hugging Face snapshot's."""
    places = [folder]
    repository = hub_repository(Path(os.path.realpath(folder)))
    if repository is not None:
        snapshot = Path(os.path.realpath(folder))
        while snapshot.parent.name != "snapshots" and snapshot.parent != snapshot:
            snapshot = snapshot.parent
        places.append(snapshot)
    for where in places:
        path = where / "README.md"
        if _regular(path):
            try:
                resolve_inside(where, "README.md")
                head = jsonfile.read_bytes(path, max_bytes=1 << 20)[:8192].decode("utf-8", "replace")
            except (ModelError, jsonfile.JsonFileError):
                continue
            if head.startswith("---"):
                return head.split("---", 2)[1] if head.count("---") >= 2 else ""
    return ""


def origin(candidate: Candidate) -> tuple[str, str]:
    """(name, publisher) from where the folder sits: Foundry's `<Publisher>/<model>`, a hub cache's
    `models--<org>--<name>`, AI Dev Gallery's `<org>--<repo>/<ref>/<path>`, AI Toolkit's
    `<publisher>/<model>/<runtime>/<display name>`."""
    try:
        parts = candidate.folder.relative_to(candidate.place.path).parts
    except ValueError:
        parts = ()
    tool = candidate.place.tool
    if tool == FOUNDRY and parts:
        if parts[:2] == ("cache", "models"):
            parts = parts[2:]
        if len(parts) >= 2:
            return parts[1], parts[0]
    if tool == HUGGING_FACE and parts and parts[0].startswith("models--"):
        org, _, repo = parts[0].removeprefix("models--").partition("--")
        sub = "/".join(parts[3:])
        return f"{org}/{repo}" + (f" ({sub})" if sub else ""), org
    if tool == AI_DEV_GALLERY and parts and "--" in parts[0]:
        org, _, repo = parts[0].partition("--")
        sub = "/".join(parts[2:])
        return f"{org}/{repo}" + (f" ({sub})" if sub else ""), org
    if tool == AI_TOOLKIT and parts:
        if parts[0] == "models" and len(parts) > 4:  # a moved storage folder holding a `models` folder
            parts = parts[1:]
        if len(parts) >= 3:
            return f"{parts[1]} ({'/'.join(parts[2:])})", parts[0]
    return candidate.folder.name, ""


def folder_size(folder: Path, limit: int) -> tuple[int, int, bool, str]:
    """(bytes, files, all counted, a problem seen) for the files under `folder`, links followed only
    where they stay inside (engines/models/paths.py), special files never opened."""
    total = files = 0
    problem = ""
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            if files >= limit:
                return total, files, False, problem
            path = Path(dirpath) / name
            rel = path.relative_to(folder).as_posix()
            if is_native_library(name) and not problem:
                problem = f"it ships a native library ({rel}), which NPU Studio never loads"
            try:
                if path.is_symlink():
                    resolve_inside(folder, rel, what=rel)
                info = os.stat(path)
            except ModelError as exc:
                problem = problem or exc.message
                continue
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                problem = problem or f"{rel} is not a regular file (a pipe or a device)"
                continue
            total += info.st_size
            files += 1
    return total, files, True, problem


def read_heads(folder: Path, names: list[str], limit: int) -> bytes:
    """The first `limit` bytes of up to four of the ONNX files named (regular files inside only)."""
    out = b""
    for name in names[:4]:
        try:
            path = resolve_inside(folder, name, what=name)
        except ModelError:
            continue
        if not _regular(path):
            continue
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                out += os.read(fd, limit)
        except OSError:
            pass
        finally:
            os.close(fd)
    return out


def _providers(config: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every (provider name as written, its options) in every session_options of the config."""
    for _, key, value in walk(config):
        if key == "provider_options" and isinstance(value, list):
            for entry in value:
                if isinstance(entry, dict):
                    for name, options in entry.items():
                        yield str(name), options if isinstance(options, dict) else {}


def _device_of(ep: str, options: Mapping[str, Any]) -> str:
    filtering = options.get("device_filtering_options")
    if isinstance(filtering, dict) and str(filtering.get("hardware_device_type", "")).upper() in ("NPU", "GPU", "CPU"):
        return str(filtering["hardware_device_type"]).upper()
    if ep == "QNNExecutionProvider":
        backend = str(options.get("backend_type") or options.get("backend_path") or "").lower()
        return "GPU" if "gpu" in backend else "CPU" if "cpu" in backend else "NPU"
    if ep == "OpenVINOExecutionProvider":
        # "NPU", "GPU.1", "AUTO:GPU,NPU", "HETERO:NPU,CPU": the first device named is the one OpenVINO tries first
        device = str(options.get("device_type", "CPU")).upper()
        named = [(device.find(kind), kind) for kind in ("NPU", "GPU", "CPU") if kind in device]
        return min(named)[1] if named else "CPU"
    from engines.types import EP_DEVICE_TYPE

    known = EP_DEVICE_TYPE.get(ep)
    return known.value if known is not None else "NPU" if ep == "RyzenAI" else "CPU"


def chat_target(config: Mapping[str, Any], heads: bytes) -> tuple[Target, bool]:
    """The EP and device a genai config asks for (its first provider that is not the CPU), or, when it
    names none, the EP its precompiled EPContext nodes were made by; and whether it has such nodes."""
    from engines.chat.folder import ep_from_genai_name

    precompiled = b"EPContext" in heads
    for name, options in _providers(config):
        ep = ep_from_genai_name(name)
        if ep != CPU_EP:
            return Target(ep, _device_of(ep, options)), precompiled
    if precompiled:
        for marker, ep in _EP_MARKERS.items():
            if marker in heads:
                return Target(ep, "NPU", "EPContext nodes"), True
    return Target(CPU_EP, "CPU"), precompiled


def precision_of(heads: bytes, words: str, stated: str = "") -> str:
    if stated:
        return stated
    if b"EPContext" in heads:
        return "npu-context"
    if b"MatMulNBits" in heads:
        return "int4"
    if b"QuantizeLinear" in heads and b"DequantizeLinear" in heads:
        return "qdq"
    match = _PRECISION_WORDS.search(words.lower())
    return match.group(1) if match else ""


@dataclass
class Facts:
    """What the describers gather before a FoundModel is made."""

    name: str
    publisher: str
    licence: str = ""
    precision: str = ""
    context_length: int | None = None
    problem: str = ""
    details: list[str] = field(default_factory=list)


def finish(candidate: Candidate, kind: str, facts: Facts, target: Target, precompiled: bool,
           limits: ScanLimits) -> FoundModel:  # fmt: skip
    size, files, complete, size_problem = folder_size(candidate.folder, limits.folder_files)
    return FoundModel(
        candidate.folder, candidate.place.tool, kind, facts.name, facts.publisher, target, facts.precision, size,
        files, complete, facts.context_length, facts.licence, precompiled, facts.problem or size_problem,
        tuple(facts.details), suggested_name=name_for(candidate.folder),
    )  # fmt: skip


def with_verdict(found: FoundModel, verdict: str, words: str) -> FoundModel:
    return replace(found, verdict=verdict, runs_here=words)


def card_facts(folder: Path) -> tuple[str, str]:
    """(licence, base model) from the folder's model card, "" when it has none."""
    card = _card(folder)
    licence = _LICENCE.search(card)
    base = _BASE_MODEL.search(card)
    return (licence.group(1) if licence else ""), (base.group(1) if base else "")


def name_for(folder: Path) -> str:
    """A library name for a found folder: a hub repository's name (and the subfolder in its snapshot),
    Foundry's model folder rather than its `v1`, the folder's own name otherwise."""
    parts = list(folder.parts)
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] == "snapshots" and parts[index - 1].startswith("models--"):
            repository = parts[index - 1].removeprefix("models--").split("--", 1)[-1]
            return suggest_name("-".join([repository, *parts[index + 2 :]]))
    last = folder.name
    if len(parts) >= 2 and (_is_version(last) or len(last) <= 4):
        return suggest_name(folder.parent.name if _is_version(last) else f"{folder.parent.name}-{last}")
    return suggest_name(last)


def _is_version(name: str) -> bool:
    return len(name) > 1 and name[0] in "vV" and name[1:].isdigit()
