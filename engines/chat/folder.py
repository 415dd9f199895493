"""Chat model folders: validation before any native load.

A genai folder is data from somewhere else. Before `og.Config` / `og.Model` see it, every file its
`genai_config.json` names must exist *inside* the folder (no absolute paths, no `..`, no symlink
out), the tokenizer and a chat template must be there, and the config may not ask to load native
libraries (custom ops, EP plugins): a model folder never decides which code runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines import jsonfile
from engines.chat import config_policy
from engines.chat.threads import THREADS_KEY
from engines.errors import ModelError
from engines.models.native import referenced_files, refuse_library_keys, walk
from engines.models.paths import resolve_inside
from engines.models.safety import inspect_onnx
from engines.types import CPU_EP

GENAI_CONFIG = "genai_config.json"
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
TOKENIZER_MODULE = "tokenizer_module.json"  # onnxruntime-extensions: names e.g. a tiktoken file

QNN_EP = "QNNExecutionProvider"
DML_EP = "DmlExecutionProvider"

# EP name -> the provider name onnxruntime-genai's `append_provider` takes (older builds, such as
# the 0.13 DirectML one, know only the short names).
GENAI_PROVIDER_NAMES: Mapping[str, str] = {
    QNN_EP: "qnn",
    DML_EP: "dml",
    "CUDAExecutionProvider": "cuda",
    "WebGpuExecutionProvider": "webgpu",
    "OpenVINOExecutionProvider": "OpenVINO",
    "VitisAIExecutionProvider": "VitisAI",
    "NvTensorRTRTXExecutionProvider": "NvTensorRtRtx",
}
_EP_BY_LOWER_SHORT = {ep.removesuffix("ExecutionProvider").lower(): ep for ep in GENAI_PROVIDER_NAMES} | {
    "cpu": CPU_EP,
    "directml": DML_EP,
}


@dataclass(frozen=True)
class ModelFolder:
    """A genai model folder that passed validation."""

    path: Path
    model_type: str
    context_length: int
    default_max_length: int  # search.max_length from the config, capped by context_length
    files: tuple[str, ...]  # files the config (and its ONNX models) reference, relative to path
    config_providers: tuple[str, ...]  # EP names the config asks for, in order
    sets_threads: bool = False  # the decoder's session options name intra_op_num_threads

    @property
    def name(self) -> str:
        return self.path.name


def context_window(folder: ModelFolder, wanted: int | None = None) -> int:
    """THE tokens a conversation may hold with the model in `folder` (prompt and answer together): the asked
    window (`ChatOptions.context_window`), else the folder's default (its genai_config's search.max_length,
    the length its generators are built for), never more than the model's own context_length. A loaded
    model's window and the one a server lists for a model it has not loaded come from here."""
    return min(wanted or folder.default_max_length, folder.context_length)


def validate_model_folder(folder: str | Path) -> ModelFolder:
    """Check a genai folder without loading anything native. Each problem is its own ModelError."""
    path = Path(folder).expanduser()
    if not path.exists():
        raise ModelError(f"Model folder not found: {path}.", "Check the path, or pick a model folder that exists.")
    if not path.is_dir():
        raise ModelError(
            f"{path} is a file, not a model folder.",
            "Pass the folder that contains genai_config.json, not a file inside it.",
        )
    root = path.resolve()
    config_path = root / GENAI_CONFIG
    if not config_path.exists():
        raise ModelError(
            f"{path} is not an onnxruntime-genai model folder: {GENAI_CONFIG} is missing.",
            "Pick a folder made by the onnxruntime-genai model builder (it holds genai_config.json, "
            "model.onnx and the tokenizer files).",
        )
    _inside(root, GENAI_CONFIG, f"the genai config ({GENAI_CONFIG})")
    config = _read_json(config_path, GENAI_CONFIG)
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise ModelError(
            f'{GENAI_CONFIG} in {path} has no "model" section.',
            "The file is not an onnxruntime-genai config; rebuild the folder with the model builder.",
        )
    refuse_library_keys(config, GENAI_CONFIG)
    config_policy.check_config(config)  # only the session, provider and search options a folder may set
    model = config["model"]
    decoder = model.get("decoder")
    if not isinstance(decoder, dict) or not isinstance(decoder.get("filename"), str):
        raise ModelError(
            f"{GENAI_CONFIG} in {path} does not name the decoder model (model.decoder.filename).",
            "Rebuild the folder with the onnxruntime-genai model builder.",
        )
    context_length = model.get("context_length")
    if not isinstance(context_length, int) or isinstance(context_length, bool) or context_length < 2:
        raise ModelError(
            f"{GENAI_CONFIG} in {path} has no valid model.context_length (found {context_length!r}).",
            "Rebuild the folder with the onnxruntime-genai model builder.",
        )
    search = config.get("search") if isinstance(config.get("search"), dict) else {}
    max_length = search.get("max_length") if isinstance(search, dict) else None
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 2:
        max_length = context_length

    files: list[str] = []
    for key_path, name in referenced_files(config):
        _inside(root, name, f"the file named by {key_path} in {GENAI_CONFIG}")
        files.append(name)
        if name.lower().endswith(".onnx"):
            for external in inspect_onnx(root / name).external_files:
                files.append(external.relative_to(root).as_posix())

    for required in (TOKENIZER_JSON, TOKENIZER_CONFIG):
        if not (root / required).exists():
            raise ModelError(
                f"The model folder {path} has no {required}.",
                "Copy the tokenizer files next to genai_config.json (the model builder writes them).",
            )
        _inside(root, required, f"the tokenizer file {required}")
    tokenizer_config = _read_json(root / TOKENIZER_CONFIG, TOKENIZER_CONFIG)
    if not _has_chat_template(root, tokenizer_config):
        raise ModelError(
            f"The model in {path} has no chat template ({CHAT_TEMPLATE_FILE}, or chat_template in {TOKENIZER_CONFIG}).",
            "Add the model's chat template as chat_template.jinja; NPU Studio does not guess templates.",
        )
    for name in (TOKENIZER_CONFIG, TOKENIZER_MODULE):
        files += _tokenizer_named_files(root, name, tokenizer_config if name == TOKENIZER_CONFIG else None)
    _links_stay_inside(root)
    return ModelFolder(
        path=root,
        model_type=str(model.get("type", "")),
        context_length=context_length,
        default_max_length=min(max_length, context_length),
        files=tuple(dict.fromkeys(files)),
        config_providers=tuple(_config_providers(config)),
        sets_threads=isinstance(decoder.get("session_options"), dict)
        and THREADS_KEY in decoder["session_options"],
    )


def _tokenizer_named_files(root: Path, name: str, data: Any = None) -> list[str]:
    """Files a tokenizer config names (`tiktoken_file`, `vocab_file`, ...): the tokenizer opens them
    itself, so each must be inside the folder like any file the genai config names."""
    if data is None:
        if not (root / name).exists():
            return []
        _inside(root, name, f"the tokenizer file {name}")
        data = _read_json(root / name, name)
    named: list[str] = []
    for key_path, key, value in walk(data):
        lowered = key.lower()
        if value is None or not (lowered.endswith("file") or lowered.endswith("_path") or lowered.endswith("files")):
            continue
        for index, item in enumerate(value if isinstance(value, list) else [value]):
            where = f"{key_path}[{index}]" if isinstance(value, list) else key_path
            _inside(root, item, f"the file named by {where} in {name}")
            named.append(str(item))
    return named


def _links_stay_inside(root: Path, limit: int = 10_000) -> None:
    """No symbolic link anywhere in the folder leads out of it: onnxruntime-genai and its tokenizer
    open files by name (vocabularies, merges, sentencepiece models) beyond the ones checked above."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for entry in [*dirnames, *filenames]:
            seen += 1
            if seen > limit:
                raise ModelError(
                    f"The model folder {root} holds more than {limit:,} files.",
                    "Pick the folder made by the model builder, not a folder that contains it.",
                )
            if (here / entry).is_symlink():
                rel = (here / entry).relative_to(root).as_posix()
                resolve_inside(root, rel, what=f"{rel} in the model folder",
                               hint="Copy the real file into the model folder instead of linking to it.")  # fmt: skip


def _read_json(file: Path, name: str) -> Any:
    try:
        return jsonfile.read_json(file)
    except jsonfile.JsonFileError as exc:
        if exc.kind == "unreadable":
            raise ModelError(f"{name} could not be read: {exc.detail}.", "Check the file's permissions.") from None
        problem = exc.problem.removeprefix("it ")
        raise ModelError(
            f"{name} {problem}.", "The file is damaged or was edited by hand; fix it or rebuild the model folder."
        ) from None


def _inside(root: Path, name: object, what: str) -> Path:
    """The file `name` (from a config) as a path inside `root`; a ModelError otherwise."""
    return resolve_inside(root, name, what=what[:1].upper() + what[1:], must_exist=True)


def _has_chat_template(root: Path, tokenizer_config: Any) -> bool:
    template_file = root / CHAT_TEMPLATE_FILE
    if template_file.exists():
        _inside(root, CHAT_TEMPLATE_FILE, f"the chat template {CHAT_TEMPLATE_FILE}")
        try:
            return bool(template_file.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"{CHAT_TEMPLATE_FILE} could not be read: {exc}.", "Rebuild the model folder.") from exc
    template = tokenizer_config.get("chat_template") if isinstance(tokenizer_config, dict) else None
    return isinstance(template, str) and bool(template.strip())


def ep_from_genai_name(name: str) -> str:
    """`qnn`, `QNN` or `QNNExecutionProvider` -> `QNNExecutionProvider`; unknown names pass through."""
    key = name.lower().removesuffix("executionprovider")
    return _EP_BY_LOWER_SHORT.get(key, name)


def _config_providers(config: Any) -> list[str]:
    found: list[str] = []
    for _, key, value in walk(config):
        if key == "provider_options" and isinstance(value, list):
            for entry in value:
                if isinstance(entry, dict):
                    found.extend(ep_from_genai_name(str(name)) for name in entry)
    return list(dict.fromkeys(found))
