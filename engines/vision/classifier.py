"""ImageClassifier: any single-image classifier described by a manifest, on a verified session."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from engines import heap, runtime
from engines.errors import CancelledError, InputContractError, ModelError
from engines.models import trial
from engines.models.manifest import MANIFEST_NAME, Manifest, Preprocess, has_manifest, read_manifest
from engines.models.paths import resolve_inside
from engines.models.safety import inspect_onnx
from engines.runtime.compiled_cache import CompiledModelCache, StatusCallback
from engines.runtime.sessions import SessionSettings, VerifiedSession, create_session
from engines.types import (
    CPU_EP,
    CancelToken,
    Classification,
    ClassScore,
    DeviceChoice,
    Placement,
    cpu_count,
)
from engines.vision.images import preprocess
from engines.vision.pipeline import MAX_JOB_CPUS, EarlyPhotos, Lanes, RunBatch, classify_stream
from engines.vision.scores import to_probabilities

log = logging.getLogger(__name__)

_FLOAT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
# EPs whose memory is not the CPU's (or that pin host buffers): IOBinding with reused buffers pays.
# Not the CPU EP: tests/bench/bench_iobinding.py measured bound (reused output OrtValue) vs plain `run`
# on EfficientNet-Lite0 at 0.99-1.01x (batch 1) and 1.00-1.02x (batch 8), i.e. no gain, because the input is
# already in the CPU EP's memory and the output is only 1000 floats per image. With DirectML the output
# would otherwise be copied back and freshly allocated each call; with QNN the HTP reads host buffers.
IOBINDING_EPS = {"DmlExecutionProvider", "QNNExecutionProvider", "CUDAExecutionProvider", "WebGpuExecutionProvider"}
# No spin-waiting in ONNX Runtime's intra-op threads: between operators (and after each run) a spinning
# thread keeps its core busy, and that core is the one the photo decoders (engines/vision/pipeline.py) need
# while the model runs. tests/bench/bench_folder.py measured the in-process pipeline on 2 cores at 1.17x the
# hand-written script with spinning and 1.57x without (1 MP photos), 2.05x vs 2.57x (12 MP); on a shared
# machine batch-1 latency was also lower without it (4.9-5.9 ms vs 5.8-13 ms).
CLASSIFIER_CONFIG = (("session.intra_op.allow_spinning", "0"),)
# Photos per inference call. On the CPU EP a batch of 2-4 runs EfficientNet-Lite0 8-13% faster per photo
# than 8 (4.1-4.4 ms vs 4.8-5.0 ms, 2 threads; 16: 5.9-6.1 ms): a larger batch's activations no longer fit
# in the cores' caches. Devices with their own memory keep the larger batch.
CPU_MAX_BATCH = 4
DEVICE_MAX_BATCH = 8
# A folder on the CPU runs its batches side by side, each on one onnxruntime thread, with the photo
# decoders in the same pool (engines/vision/pipeline.py). Two photos per run: with two runs side by side
# EfficientNet-Lite0 took 2.58 ms per photo at 2, 2.77 ms at 4 and 3.03 ms at 8 (2 cores, one sitting).
SIDE_BY_SIDE_BATCH = 2
MAX_SIDE_BY_SIDE_RUNS = 4  # each run holds its own activations (~6 MB a photo at 224 x 224)
# Fewer photos than this run on the classifier's own session: making the one-thread session for side by
# side runs (~35 ms) would cost more than it saves.
SIDE_BY_SIDE_MIN_PHOTOS = 24


@dataclass(frozen=True)
class ClassifierSpec:
    """What the engine needs to know about a classifier, read from its manifest."""

    model_path: Path
    labels: tuple[str, ...]
    preprocess: Preprocess
    input_name: str | None = None
    output_name: str | None = None
    output_kind: str = "logits"  # or "probabilities"
    name: str = ""
    quantized: bool = False
    declared_bytes: int | None = None  # the model file's size in the manifest

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str]) -> ClassifierSpec:
        root = Path(folder)
        manifest, pre = _classifier_section(root)
        entry = manifest.model_entry()
        model_file, declared = entry.path, entry.size
        labels_name = str(manifest.labels_file)
        model_path = resolve_inside(root, model_file, what=f"The manifest in {root}")
        # The labels are shown to the user: a manifest must not make NPU Studio read files elsewhere.
        labels_file = resolve_inside(root, labels_name, what=f"The labels file named by the manifest in {root}")
        declared_bytes = declared
        # Before any session in this process: the static checks, then a graph that hangs or crashes does
        # it in a bounded child (engines/models/trial.py).
        inspect_onnx(model_path, declared_bytes)
        trial.ensure_tried(root, trial.CLASSIFIER, model_file=str(model_path), input_size=pre.input_size)
        return cls(
            model_path=model_path,
            labels=read_labels(labels_file),
            preprocess=pre,
            input_name=manifest.input_name,
            output_name=manifest.output_name,
            output_kind=manifest.output_kind,
            name=manifest.model_name,
            quantized=manifest.quantized,
            declared_bytes=declared_bytes,
        )


def _classifier_section(root: Path) -> tuple[Manifest, Preprocess]:
    """The folder's manifest and the preprocessing its classifier section describes."""
    if not has_manifest(root):
        raise ModelError(
            f"{root} has no {MANIFEST_NAME}.", "Import the classifier so NPU Studio knows its inputs and labels."
        )
    manifest = read_manifest(root, require_schema=False)
    try:
        pre = manifest.preprocess()
    except ValueError as exc:
        raise ModelError(f"The manifest in {root} is not valid: {str(exc).rstrip('.')}.",
                         "Re-import or rebuild the model.") from exc  # fmt: skip
    return manifest, pre


def read_preprocess(folder: str | os.PathLike[str]) -> Preprocess:
    """How the classifier in `folder` wants its photos (its manifest only: nothing else is read)."""
    return _classifier_section(Path(folder))[1]


def read_labels(path: Path) -> tuple[str, ...]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise ModelError(f"Labels file not found: {path}", "Re-import the model with its labels.") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"Labels file {path} could not be read: {exc}", "Re-import the model.") from exc
    labels = tuple(line.strip() for line in lines if line.strip())
    if not labels:
        raise ModelError(f"Labels file {path} is empty.", "Re-import the model with its labels.")
    return labels




def top_k(probs: np.ndarray, labels: Sequence[str], k: int) -> tuple[ClassScore, ...]:
    """The k highest scores, highest first. Few numpy calls: it runs right after inference, with the
    caches cold (~10 us a call then)."""
    k = max(1, min(k, probs.shape[-1]))
    found = np.argpartition(probs, -k)[-k:]
    indices, values = found.tolist(), probs[found].tolist()
    order = sorted(range(k), key=lambda j: -values[j])
    return tuple(
        ClassScore(indices[j], labels[indices[j]] if indices[j] < len(labels) else str(indices[j]), values[j])
        for j in order
    )


@dataclass(frozen=True)
class _Contract:
    input_name: str
    output_name: str
    dtype: Any
    fixed_batch: int | None  # None: dynamic batch


def check_contract(session: Any, spec: ClassifierSpec) -> _Contract:
    """Validate the model's input/output contract against the spec, with readable errors."""
    inputs = list(session.get_inputs())
    outputs = list(session.get_outputs())
    if spec.input_name:
        matching = [i for i in inputs if i.name == spec.input_name]
        if not matching:
            names = ", ".join(i.name for i in inputs)
            raise InputContractError(
                f"The model has no input named '{spec.input_name}' (it has: {names}).", "Fix the manifest."
            )
        image_input = matching[0]
    else:
        image_inputs = [i for i in inputs if len(i.shape or ()) == 4]
        if len(image_inputs) != 1:
            raise InputContractError(
                f"Expected exactly one 4-D image input, found {len(image_inputs)} among {len(inputs)} inputs.",
                "Name the image input in the manifest.",
            )
        image_input = image_inputs[0]
    others = [i for i in inputs if i.name != image_input.name]
    if others:
        raise InputContractError(
            f"The model needs extra inputs ({', '.join(i.name for i in others)}); "
            "only single-image classifiers are supported.",
            "Use a single-input image classification model.",
        )
    if image_input.type not in _FLOAT_TYPES:
        raise InputContractError(
            f"Input '{image_input.name}' is {image_input.type}; a float image tensor is expected.",
            "Quantized models must keep float inputs (QDQ format).",
        )
    shape = list(image_input.shape)
    if len(shape) != 4:
        raise InputContractError(f"Input '{image_input.name}' has rank {len(shape)}; 4 (N, C, H, W) is expected.")
    h, w = spec.preprocess.input_size
    expected = [3, h, w] if spec.preprocess.layout == "NCHW" else [h, w, 3]
    for axis, (dim, want) in enumerate(zip(shape[1:], expected, strict=True), start=1):
        if isinstance(dim, int) and dim != want:
            raise InputContractError(
                f"Input '{image_input.name}' has shape {shape}, but the manifest says "
                f"{spec.preprocess.layout} {expected} (axis {axis}).",
                "Fix the manifest's input_size/layout.",
            )
    batch = shape[0] if isinstance(shape[0], int) and shape[0] > 0 else None
    if spec.output_name:
        out = next((o for o in outputs if o.name == spec.output_name), None)
        if out is None:
            names = ", ".join(o.name for o in outputs)
            raise InputContractError(f"The model has no output named '{spec.output_name}' (it has: {names}).")
    else:
        candidates = [o for o in outputs if o.shape and o.shape[-1] == len(spec.labels)]
        if not candidates:
            raise InputContractError(
                f"No output has {len(spec.labels)} classes (one per label).", "Check the labels file."
            )
        out = candidates[0]
    if out.shape is not None and len(out.shape) < 2:
        raise InputContractError(
            f"Output '{out.name}' has shape {list(out.shape)}: no batch axis, so its scores cannot be told apart "
            "per image.",
            "Export the model with a batch axis first (N, classes).",
        )
    last = out.shape[-1] if out.shape else None
    if isinstance(last, int) and last != len(spec.labels):
        raise InputContractError(
            f"Output '{out.name}' has {last} classes but there are {len(spec.labels)} labels.",
            "Use the labels file that belongs to this model.",
        )
    return _Contract(image_input.name, out.name, _FLOAT_TYPES[image_input.type], batch)


class _BoundRunner:
    """IOBinding with an output buffer reused between calls of the same batch size."""

    def __init__(self, session: Any, contract: _Contract) -> None:
        self._session = session
        self._contract = contract
        self._binding = session.io_binding()
        self._outputs: dict[int, Any] = {}
        self._classes = 0

    def run(self, batch: np.ndarray, classes: int) -> np.ndarray:
        ort = runtime.ort()
        n = batch.shape[0]
        if n not in self._outputs:
            self._outputs[n] = ort.OrtValue.ortvalue_from_shape_and_type((n, classes), np.float32, "cpu", 0)
        self._binding.bind_cpu_input(self._contract.input_name, batch)
        self._binding.bind_ortvalue_output(self._contract.output_name, self._outputs[n])
        self._binding.synchronize_inputs()
        self._session.run_with_iobinding(self._binding)
        self._binding.synchronize_outputs()
        return np.asarray(self._outputs[n].numpy())


def _arena_release(active_eps: Sequence[str]) -> Any:
    """Run options that shrink the CPU arena at the end of a run (None without the CPU EP or the API)."""
    make = getattr(runtime.ort(), "RunOptions", None)
    if CPU_EP not in active_eps or make is None:
        return None
    options = make()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


class ImageClassifier:
    """A classifier on one verified session: preprocess, batch, run, softmax, top-k, latency."""

    def __init__(
        self,
        spec: ClassifierSpec,
        choice: DeviceChoice,
        settings: SessionSettings | None = None,
        *,
        io_binding: bool | None = None,
        warmup: bool = True,
        max_batch: int | None = None,
        session: VerifiedSession | None = None,
        cache: CompiledModelCache | None = None,
        on_progress: StatusCallback | None = None,
    ) -> None:
        self.spec = spec
        self.choice = choice
        settings = settings or SessionSettings(quantized_model=spec.quantized, config_entries=CLASSIFIER_CONFIG)
        self.settings = settings
        if session is None:
            session = create_session(
                spec.model_path,
                choice,
                settings,
                cache=cache,
                on_progress=on_progress,
                declared_bytes=spec.declared_bytes,
            )
        self.verified = session
        self.session = self.verified.session
        self.contract = check_contract(self.session, spec)
        if max_batch is None:
            max_batch = CPU_MAX_BATCH if self.uses_cpu_only else DEVICE_MAX_BATCH
        self.max_batch = 1 if self.contract.fixed_batch == 1 else max(1, max_batch)
        if io_binding is None:
            io_binding = self.placement.primary_ep in IOBINDING_EPS
        self.io_binding = io_binding
        self._runner = _BoundRunner(self.session, self.contract) if io_binding else None
        self._release = None if io_binding else _arena_release(self.placement.active_eps)
        self._release_next = False
        self.warmup_ms = self._warmup() if warmup else 0.0

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str], choice: DeviceChoice, **kwargs: Any) -> ImageClassifier:
        return cls(ClassifierSpec.from_folder(folder), choice, **kwargs)

    @property
    def placement(self) -> Placement:
        return self.verified.placement

    @property
    def uses_cpu_only(self) -> bool:
        return self.placement.active_eps == (CPU_EP,)

    def _warmup(self) -> float:
        h, w = self.spec.preprocess.input_size
        shape = (1, 3, h, w) if self.spec.preprocess.layout == "NCHW" else (1, h, w, 3)
        started = time.perf_counter()
        zeros = np.zeros(shape, dtype=self.contract.dtype)
        self._release_next = True
        self.probabilities(self.infer(zeros))  # a wrong output is refused now
        return (time.perf_counter() - started) * 1000

    def infer(self, batch: np.ndarray) -> np.ndarray:
        """Run a preprocessed batch; returns the raw output (N, classes). After the last run of a job
        (`_release_next` set: the load's warm-up, a photo, a folder's last batch) ONNX Runtime's CPU
        arena hands its free blocks back to the OS. The arena keeps the largest batch's activations
        otherwise (~70 MB after a batch of 8 at 224x224, for as long as the app runs); growing it again
        costs the next job's first run ~2 ms. (With runs side by side the flag may be taken by the other
        run ending at the same time: the arena then shrinks at that run's end, as near the job's end.)"""
        release, self._release_next = self._release_next, False
        batch = batch.astype(self.contract.dtype, copy=False)
        if self._runner is not None:
            return self._runner.run(batch, len(self.spec.labels))
        feed = {self.contract.input_name: batch}
        if release and self._release is not None:
            try:
                out = self.session.run([self.contract.output_name], feed, self._release)
                return np.asarray(out[0], dtype=np.float32)
            except Exception as exc:
                if "arena" not in str(exc).lower():
                    raise
                log.debug("no CPU arena to shrink: %s", exc)  # a session without one: run as usual
                self._release = None
        return np.asarray(self.session.run([self.contract.output_name], feed)[0], dtype=np.float32)

    def probabilities(self, raw: np.ndarray, batch: int = 1) -> np.ndarray:
        """(batch, classes) probabilities; wrong output (shape, NaN, false probabilities) is refused."""
        return to_probabilities(raw, batch, len(self.spec.labels), self.spec.output_kind, f"The model {self.spec.name}")

    def classify(self, source: str | os.PathLike[str] | bytes, k: int = 5) -> Classification:
        """One photo -> top-k. Raises ImageError for a bad image."""
        started = time.perf_counter()
        tensor = preprocess(source, self.spec.preprocess)
        pre_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        self._release_next = True
        raw = self.infer(tensor[None])
        latency = (time.perf_counter() - started) * 1000
        probs = self.probabilities(raw)[0]
        name = "<bytes>" if isinstance(source, bytes) else str(source)
        return Classification(name, top_k(probs, self.spec.labels, k), latency, pre_ms, self.placement)

    def classify_many(
        self,
        paths: Iterable[str | os.PathLike[str]],
        k: int = 5,
        cancel: CancelToken | None = None,
        on_result: Callable[[Classification], None] | None = None,
        on_index: Callable[[int, Classification], None] | None = None,
        *,
        decode_workers: int | None = None,
        early: EarlyPhotos | None = None,
    ) -> list[Classification]:
        """Batched classification of many photos, returned in input order and streamed in input order as
        they finish (to `on_result`, and to `on_index` with the photo's position). One pool of threads
        decodes photos and runs batches (engines.vision.pipeline; `decode_workers` sets its size, 0
        does everything on the calling thread), a bounded number of photos ahead. A bad photo becomes a
        result with `error` set; the batch goes on. Cancel is checked between photos and batches
        (raises CancelledError). `early`: the same photos, decoding since before the model opened."""
        results: list[Classification] = []
        lanes, run = self._plan_job(paths, decode_workers)
        for scored in classify_stream(paths, self.spec.preprocess, run, lanes, cancel, early):
            for decoded, scores in scored.results():
                if scores is None:
                    result = Classification(decoded.path, (), 0.0, 0.0, self.placement, error=decoded.error)
                else:
                    top = top_k(scores, self.spec.labels, k)
                    result = Classification(decoded.path, top, scored.run_ms, decoded.preprocess_ms, self.placement)
                results.append(result)
                if on_result is not None:
                    on_result(result)
                if on_index is not None:
                    on_index(decoded.index, result)
        if cancel is not None and cancel.cancelled:
            raise CancelledError("Classification cancelled.")
        if lanes.workers > 0:
            heap.trim()  # what the pool's threads freed, back to the OS (~15 us; engines/heap.py)
        return results

    def _plan_job(self, paths: Iterable[object], workers: int | None) -> tuple[Lanes, RunBatch]:
        """How a folder job shares the cores, and what runs its batches.

        * A device (NPU, GPU): one batch at a time, on the classifier's session; one thread per CPU
          decodes.
        * The CPU: batches side by side, one onnxruntime thread each, as many as the CPUs allow, the
          same threads decoding. With its thread count left to the runtime (one per physical core, what a
          single photo wants), a folder job runs on a session of its own with one thread, made for the
          job and dropped after it (a few photos run one batch at a time on the classifier's session); an
          explicit thread count is kept (`cpus // threads` runs side by side).
        """
        cpus = min(cpu_count(), MAX_JOB_CPUS)
        engine = self
        runs = 1
        if self.uses_cpu_only:
            threads = self.settings.intra_op_threads
            count = len(paths) if isinstance(paths, Sized) else SIDE_BY_SIDE_MIN_PHOTOS
            if threads == 0 and cpus > 1 and count >= SIDE_BY_SIDE_MIN_PHOTOS and workers != 0:
                engine = self._one_thread_twin()
                threads = engine.settings.intra_op_threads
            if threads:  # left to the runtime (0), a run takes every physical core: one at a time
                runs = max(1, min(MAX_SIDE_BY_SIDE_RUNS, cpus // threads))
        # Side by side, one thread per CPU decodes and runs; one run at a time, the running thread mostly
        # waits (for the device, or on onnxruntime's own threads), so one thread more.
        pool, size = (cpus, min(self.max_batch, SIDE_BY_SIDE_BATCH)) if runs > 1 else (cpus + 1, self.max_batch)
        if workers is not None:
            pool, runs = workers, min(runs, max(1, workers))
        lanes = Lanes(workers=pool, runs=runs, batch=size, lookahead=size * (runs + 2))

        def run(batch: np.ndarray, last: bool) -> np.ndarray:
            if last and engine is self:
                self._release_next = True  # (a one-thread session made for the job goes with it)
            return engine.probabilities(engine.infer(batch), len(batch))

        return lanes, run

    def _one_thread_twin(self) -> ImageClassifier:
        """The classifier's model on the CPU with one intra-op thread: a session made for one folder job,
        with the same checks and verification as any session. The classifier itself when the CPU does
        not take the whole graph on that session."""
        settings = replace(self.settings, intra_op_threads=1)
        twin = ImageClassifier(self.spec, DeviceChoice.parse("cpu"), settings, warmup=False, max_batch=self.max_batch)
        return twin if twin.uses_cpu_only else self
