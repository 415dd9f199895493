"""The two kinds of folder a scan describes: an onnxruntime-genai chat model and an image classifier
(NPU Studio's own manifest, or a Hugging Face image-classification export with an ONNX file).
The shared reading rules are engines/models/found.py. Pure Python."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engines.chat import config_policy
from engines.errors import ModelError
from engines.models.found import (
    GENAI_CONFIG,
    HF_CONFIG,
    BrokenFolder,
    Candidate,
    Facts,
    FoundModel,
    ScanLimits,
    Target,
    Unreadable,
    card_facts,
    chat_target,
    finish,
    origin,
    precision_of,
    read_heads,
    read_small,
)
from engines.models.library import KIND_CLASSIFIER, KIND_LLM
from engines.models.manifest import MANIFEST_NAME, SCHEMA_VERSION, Manifest
from engines.models.native import referenced_files, refuse_library_keys
from engines.models.paths import resolve_inside

INFERENCE_MODEL = "inference_model.json"  # Foundry Local's name and prompt template for the model
PREPROCESSOR = "preprocessor_config.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def describe(candidate: Candidate, limits: ScanLimits) -> FoundModel | BrokenFolder | None:
    """The found folder in plain words; BrokenFolder when its description cannot be read; None when
    it is not a model after all (a Hugging Face folder that is no image classifier)."""
    try:
        if candidate.kind == "chat":
            return describe_chat(candidate, limits)
        return describe_vision(candidate, limits)
    except Unreadable as exc:
        return BrokenFolder(candidate.folder, candidate.place.tool, str(exc))


def _text(value: Any, limit: int = 200) -> str:
    return value[:limit] if isinstance(value, str) else ""


def describe_chat(candidate: Candidate, limits: ScanLimits) -> FoundModel:
    folder = candidate.folder
    config = read_small(folder, GENAI_CONFIG, required=True) or {}
    model = config.get("model")
    if not isinstance(model, dict):
        raise Unreadable(f'{GENAI_CONFIG} has no "model" section: it is not an onnxruntime-genai config')
    name, publisher = origin(candidate)
    facts = Facts(name, publisher)
    inference = _optional(folder, INFERENCE_MODEL)
    if _text(inference.get("Name")):
        facts.name = _text(inference.get("Name"))
    manifest = Manifest.parse(folder, _optional(folder, MANIFEST_NAME))
    if manifest.schema == SCHEMA_VERSION and manifest.display_name:
        facts.name = _text(manifest.display_name)
    facts.licence, base = card_facts(folder)
    facts.licence = _text(manifest.licence) or facts.licence
    onnx_files = [v for _, v in referenced_files(config) if isinstance(v, str) and v.lower().endswith(".onnx")]
    head = read_heads(folder, onnx_files, limits.head_bytes)
    target, precompiled = chat_target(config, head)
    facts.precision = precision_of(head, f"{folder.as_posix()} {facts.name}", _text(manifest.precision))
    context = model.get("context_length")
    if isinstance(context, int) and not isinstance(context, bool) and context > 1:
        facts.context_length = context
    if _text(model.get("type")):
        facts.details.append(f"model type {_text(model.get('type'))}")
    parts = _pipeline_parts(model)
    if parts:
        facts.details.append(f"{parts}-part decoder pipeline")
    if base:
        facts.details.append(f"based on {base}")
    if precompiled:
        facts.details.append(f"precompiled for {target.label} (EPContext nodes): it runs on that device only")
    facts.problem = chat_problem(folder, config)
    return finish(candidate, KIND_LLM, facts, target, precompiled, limits)


def _optional(folder: Path, name: str) -> dict[str, Any]:
    """A describing file that may be absent or broken without the folder being broken."""
    try:
        return read_small(folder, name) or {}
    except Unreadable:
        return {}


def _pipeline_parts(model: Mapping[str, Any]) -> int:
    decoder = model.get("decoder")
    pipeline = decoder.get("pipeline") if isinstance(decoder, dict) else None
    if isinstance(pipeline, list):
        return sum(len(step) for step in pipeline if isinstance(step, dict))
    return len(pipeline) if isinstance(pipeline, dict) else 0


def chat_problem(folder: Path, config: Mapping[str, Any]) -> str:
    """Why NPU Studio's chat engine cannot use the folder, as far as its config and files tell ("" when
    they tell nothing against it). The same rules as engines/chat/folder.py, without opening a model."""
    try:
        refuse_library_keys(config, GENAI_CONFIG)
        config_policy.check_config(config)
    except ModelError as exc:
        return exc.message
    model = config["model"]
    decoder = model.get("decoder")
    if not isinstance(decoder, dict) or not isinstance(decoder.get("filename"), str):
        parts = _pipeline_parts(model)
        if parts:
            return (f"it is a {parts}-part decoder pipeline; NPU Studio's chat engine loads folders with one decoder "
                    "model (model.decoder.filename)")  # fmt: skip
        return f"{GENAI_CONFIG} names no decoder model (model.decoder.filename)"
    context = model.get("context_length")
    if not isinstance(context, int) or isinstance(context, bool) or context < 2:
        return f"{GENAI_CONFIG} has no valid model.context_length"
    for key_path, name in referenced_files(config):
        try:
            resolve_inside(folder, name, what=f"The file named by {key_path}", must_exist=True)
        except ModelError as exc:
            return exc.message
    for required in _TOKENIZER_FILES:
        if not os.path.isfile(folder / required):
            return f"it has no {required}"
    if not os.path.isfile(folder / "chat_template.jinja"):
        try:
            tokenizer = read_small(folder, "tokenizer_config.json") or {}
        except Unreadable as exc:
            return str(exc)
        if not _text(tokenizer.get("chat_template"), 1 << 20).strip():
            return "it has no chat template (chat_template.jinja, or chat_template in tokenizer_config.json)"
    return ""


# --- image classifiers -----------------------------------------------------------------------------------


def classifier_file(folder: Path) -> str:
    """The ONNX file of a Hugging Face image-classification export (onnx/model.onnx first), or ""."""
    found: list[str] = []
    for where in ("onnx", ""):
        base = folder / where if where else folder
        try:
            names = sorted(n for n in os.listdir(base) if n.lower().endswith(".onnx"))
        except OSError:
            continue
        found += [f"{where}/{n}" if where else n for n in names]
    for preferred in ("onnx/model.onnx", "model.onnx"):
        if preferred in found:
            return preferred
    return found[0] if found else ""


def hf_labels(config: Mapping[str, Any]) -> list[str]:
    """A Hugging Face config's `id2label`, in index order ([] unless it is a dense 0..n-1 mapping)."""
    raw = config.get("id2label")
    if not isinstance(raw, dict) or len(raw) < 2 or len(raw) > 100_000:
        return []
    labels: dict[int, str] = {}
    for key, value in raw.items():
        if not str(key).isdigit() or not isinstance(value, str):
            return []
        labels[int(key)] = value
    return [labels[i] for i in range(len(labels))] if set(labels) == set(range(len(labels))) else []


def describe_vision(candidate: Candidate, limits: ScanLimits) -> FoundModel | None:
    folder = candidate.folder
    name, publisher = origin(candidate)
    facts = Facts(name, publisher)
    document = read_small(folder, MANIFEST_NAME)
    if document is not None:
        manifest = Manifest.parse(folder, document)
        if manifest.kind != KIND_CLASSIFIER or manifest.classifier is None:
            return None
        facts.name = _text(manifest.display_name) or facts.name
        facts.licence = _text(manifest.licence)
        facts.precision = _text(manifest.precision)
        if manifest.num_classes is not None:
            facts.details.append(f"{manifest.num_classes} classes")
        try:
            refuse_library_keys(manifest.document, MANIFEST_NAME)
        except ModelError as exc:
            facts.problem = exc.message
        return finish(candidate, KIND_CLASSIFIER, facts, Target("", ""), False, limits)
    config = read_small(folder, HF_CONFIG) or {}
    labels = hf_labels(config)
    architectures = [a for a in config.get("architectures") or [] if isinstance(a, str)]
    try:
        preprocessor = read_small(folder, PREPROCESSOR) or {}
    except Unreadable:
        preprocessor = {}
    is_classifier = any("ImageClassification" in a for a in architectures) or "image_mean" in preprocessor
    model_file = classifier_file(folder)
    if not labels or not is_classifier or not model_file:
        return None
    facts.licence, base = card_facts(folder)
    head = read_heads(folder, [model_file], limits.head_bytes)
    facts.precision = precision_of(head, model_file)
    facts.details += [f"{len(labels)} classes", f"model file {model_file}"]
    if base:
        facts.details.append(f"based on {base}")
    if not preprocessor:
        facts.problem = f"it has no {PREPROCESSOR}, so NPU Studio cannot tell how to feed it photos"
    return finish(candidate, KIND_CLASSIFIER, facts, Target("", ""), b"EPContext" in head, limits)
