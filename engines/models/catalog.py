"""The download catalog: which Hugging Face repositories and subfolders hold models NPU Studio can fetch,
their files' allow-patterns and checksums, and which NPUs each variant is known to run on. Plain reading
and checking of JSON; no network (downloads are `engines.models.downloads`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from engines import jsonfile
from engines.errors import ModelError
from engines.models.library import KIND_LLM, check_name

CATALOG_SCHEMA = 1


@dataclass(frozen=True)
class CatalogFile:
    path: str  # relative to the variant's subfolder
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    display_name: str
    kind: str
    repo_id: str
    revision: str
    subfolder: str
    licence: str
    publisher: str
    size_bytes: int | None  # approximate, for display; the real sizes come from the Hub before downloading
    context_length: int | None
    parameters: str
    precision: str
    devices: tuple[str, ...]
    execution_provider: str
    notes: str = ""
    files: tuple[CatalogFile, ...] = ()

    @property
    def allow_patterns(self) -> list[str]:
        return [f"{self.subfolder}/*"] if self.subfolder else ["*"]

    @property
    def url(self) -> str:
        tree = f"/tree/{self.revision}/{self.subfolder}" if self.subfolder else ""
        return f"https://huggingface.co/{self.repo_id}{tree}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "display_name": self.display_name,
            "kind": self.kind,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "subfolder": self.subfolder,
            "allow_patterns": self.allow_patterns,
            "licence": self.licence,
            "publisher": self.publisher,
            "size_bytes": self.size_bytes,
            "context_length": self.context_length,
            "parameters": self.parameters,
            "precision": self.precision,
            "devices": list(self.devices),
            "execution_provider": self.execution_provider,
            "notes": self.notes,
            "url": self.url,
        }


def _catalog_error(path: Path, what: str) -> ModelError:
    return ModelError(f"The model catalog {path} is not valid: {what}.", "Reinstall NPU Studio to restore it.")


def load_catalog(path: Path) -> list[CatalogEntry]:
    """Read and validate `assets/catalog.json`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"The model catalog {path} is missing.", "Reinstall NPU Studio to restore it.") from None
    except (OSError, ValueError) as exc:
        raise _catalog_error(path, str(exc)) from exc
    if not isinstance(data, dict) or data.get("schema") != CATALOG_SCHEMA or not isinstance(data.get("models"), list):
        raise _catalog_error(path, f"expected {{'schema': {CATALOG_SCHEMA}, 'models': [...]}}")
    entries: list[CatalogEntry] = []
    for index, item in enumerate(data["models"]):
        try:
            entries.append(_entry(item))
        except (KeyError, TypeError, ValueError, ModelError) as exc:
            raise _catalog_error(path, f"models[{index}]: {exc}") from exc
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        raise _catalog_error(path, "duplicate ids")
    return entries


@dataclass(frozen=True)
class NpuAvailability:
    """Which NPU chat models exist publicly for one NPU vendor, and honestly where none is downloadable."""

    vendor: str
    ep: str
    downloadable: tuple[str, ...]  # catalog ids
    elsewhere: str = ""
    none_here: str = ""


def load_npu_availability(path: Path) -> list[NpuAvailability]:
    """`npu_by_vendor` of `assets/catalog.json` (empty when the catalog has none)."""
    try:
        data = jsonfile.read_json(path)
    except jsonfile.JsonFileError as exc:
        raise _catalog_error(path, str(exc)) from exc
    items = data.get("npu_by_vendor", []) if isinstance(data, dict) else []
    return [
        NpuAvailability(
            str(i["vendor"]), str(i["ep"]), tuple(str(x) for x in i.get("downloadable", [])),
            str(i.get("elsewhere", "")), str(i.get("none_here", "")),
        )
        for i in items
        if isinstance(i, dict) and "vendor" in i and "ep" in i
    ]


def _entry(item: Mapping[str, Any]) -> CatalogEntry:
    check_name(str(item["id"]))
    if item.get("kind", KIND_LLM) != KIND_LLM:
        raise ValueError("only genai-llm models can be downloaded")
    subfolder = str(item.get("subfolder", "")).strip("/")
    if subfolder and (".." in PurePosixPath(subfolder).parts or subfolder.startswith("/")):
        raise ValueError(f"bad subfolder {subfolder!r}")
    files = tuple(
        CatalogFile(str(f["path"]), f.get("size"), str(f["sha256"]).lower() if f.get("sha256") else None)
        for f in item.get("files", [])
    )
    return CatalogEntry(
        id=str(item["id"]),
        display_name=str(item.get("display_name", item["id"])),
        kind=KIND_LLM,
        repo_id=str(item["repo_id"]),
        revision=str(item.get("revision", "main")),
        subfolder=subfolder,
        licence=str(item.get("licence", "")),
        publisher=str(item.get("publisher", "")),
        size_bytes=int(item["size_bytes"]) if item.get("size_bytes") else None,
        context_length=int(item["context_length"]) if item.get("context_length") else None,
        parameters=str(item.get("parameters", "")),
        precision=str(item.get("precision", "")),
        devices=tuple(str(d) for d in item.get("devices", [])),
        execution_provider=str(item.get("execution_provider", "")),
        notes=str(item.get("notes", "")),
        files=files,
    )


def find_entry(catalog: Sequence[CatalogEntry], entry_id: str) -> CatalogEntry:
    for entry in catalog:
        if entry.id == entry_id:
            return entry
    raise ModelError(f"'{entry_id}' is not in the model catalog.", "Run `npu-studio models catalog` to see the ids.")
