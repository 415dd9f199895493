"""Opening a model on a device, in one place: what `engines.open_classifier` and `engines.open_chat` do.

`open_classifier` finds the model (a folder, or a name in the library folders), picks its QDQ variant
when the choice lands on a usable NPU, opens a verified session (the safety check and the one planner
run inside session creation; the compiled-model cache when given), and wraps it so that a device that
fails mid-run goes through the one fallback mechanism (engines/runtime/fallback.py). The CLI, the
desktop app's hosts, doctor, bench and third-party scripts all open models through here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engines.errors import StudioError
from engines.models.lookup import LocatedModel, locate_model
from engines.types import CancelToken, Classification, DeviceChoice, DeviceType, Placement, Policy

if TYPE_CHECKING:
    from engines.chat.loaded import ChatModel
    from engines.chat.requests import ChatEvent
    from engines.chat.service import ChatService
    from engines.runtime.compiled_cache import CacheOutcome, CompiledModelCache
    from engines.runtime.devices import DiscoveryReport
    from engines.runtime.fallback import FallbackOffer, FallbackRunner
    from engines.vision.classifier import ClassifierSpec, ImageClassifier
    from engines.vision.pipeline import EarlyPhotos

log = logging.getLogger(__name__)

Ask = Callable[["FallbackOffer"], DeviceChoice | None]
PathLike = str | os.PathLike[str]


def as_choice(choice: DeviceChoice | str, strict: bool | None = None) -> DeviceChoice:
    """A DeviceChoice from a choice or its text (`npu`, `qnn`, ...); `strict` overrides when given."""
    parsed = DeviceChoice.parse(choice) if isinstance(choice, str) else choice
    if strict is None or strict == parsed.strict:
        return parsed
    return DeviceChoice(policy=parsed.policy, ep=parsed.ep, ep_options=parsed.ep_options, strict=strict)


def as_cache(cache: CompiledModelCache | PathLike | None) -> CompiledModelCache | None:
    from engines.runtime.compiled_cache import CompiledModelCache

    if cache is None or isinstance(cache, CompiledModelCache):
        return cache
    return CompiledModelCache(Path(os.fspath(cache)).expanduser())


class Classifier:
    """An image classifier opened on a device. `classify` / `classify_many` run there; when the device
    fails mid-run the work moves (with `ask`) or a DeviceFailedError carries the offer of where to go."""

    def __init__(self, runner: FallbackRunner[ImageClassifier], located: LocatedModel, notices: list[str]) -> None:
        self._runner = runner
        self.located = located
        self._notices = notices

    # -- what it is and where it runs ------------------------------------------------------------

    @property
    def engine(self) -> ImageClassifier:
        """The classifier on the current device (opened again after a device switch)."""
        return self._runner.session

    @property
    def spec(self) -> ClassifierSpec:
        return self.engine.spec

    @property
    def placement(self) -> Placement:
        return self.engine.placement

    @property
    def choice(self) -> DeviceChoice:
        return self._runner.choice

    @property
    def model_folder(self) -> Path:
        return self.engine.spec.model_path.parent

    @property
    def cache(self) -> CacheOutcome | None:
        """What the compiled-model cache did for the current session (None without a cache)."""
        verified = getattr(self.engine, "verified", None)  # an injected engine may have no session
        return verified.cache if verified is not None else None

    @property
    def create_seconds(self) -> float:
        return self.engine.verified.create_seconds

    @property
    def notices(self) -> list[str]:
        """Plain-language notes: the variant picked, what the cache did, every device switch."""
        cache = self.cache
        return [*self._notices, *(cache.notices if cache else []), *self._runner.notices()]

    @property
    def device_switches(self) -> list[str]:
        return self._runner.notices()

    def switch_to(self, choice: DeviceChoice) -> None:
        """Run on `choice` from the next call on (the user accepted a fallback offer)."""
        self._runner.switch_to(choice)

    # -- work --------------------------------------------------------------------------------------

    def classify(self, source: PathLike | bytes, k: int = 5) -> Classification:
        return self._run(lambda clf: clf.classify(source, k=k))

    def classify_many(
        self,
        paths: Iterable[PathLike],
        k: int = 5,
        cancel: CancelToken | None = None,
        on_result: Callable[[Classification], None] | None = None,
        *,
        early: EarlyPhotos | None = None,
    ) -> list[Classification]:
        """Results in input order, streamed to `on_result`. After a device switch mid-batch, only the
        photos not yet classified run again (nothing is reported twice). `early`: these photos, decoding
        since before the model opened, used by the first attempt (its owner stops it: classify_folder)."""
        items = list(paths)
        done: dict[int, Classification] = {}
        first = [early]

        def work(clf: ImageClassifier) -> None:
            todo = [i for i in range(len(items)) if i not in done]

            def record(position: int, result: Classification) -> None:
                done[todo[position]] = result
                if on_result is not None:
                    on_result(result)

            started, first[0] = first[0], None  # a second attempt (after a device switch) decodes afresh
            extra: dict[str, Any] = {} if started is None else {"early": started}  # (engines without it: fakes)
            clf.classify_many([items[i] for i in todo], k=k, cancel=cancel, on_index=record, **extra)

        self._run(work)
        return [done[i] for i in range(len(items))]

    def run(self, work: Callable[[ImageClassifier], Any]) -> Any:
        """`work(engine)` as one piece of work through the fallback path (benchmarks time a whole loop)."""
        return self._run(work)

    def _run(self, work: Callable[[ImageClassifier], Any]) -> Any:
        from engines.runtime.fallback import DeviceFailedError

        self._runner.drop_if_failed()
        try:
            return self._runner.run(work)
        except DeviceFailedError:
            self._runner.drop()  # the next call plans again without the failed device
            raise


def open_classifier(
    model: PathLike,
    choice: DeviceChoice | str = "auto",
    *,
    strict: bool | None = None,
    cache: CompiledModelCache | PathLike | None = None,
    on_progress: Callable[[str], None] | None = None,
    library: Sequence[PathLike] = (),
    ask: Ask | None = None,
    threads: int = 0,
    warmup: bool = True,
    max_batch: int | None = None,
    report: DiscoveryReport | None = None,
    for_folders: bool = False,
) -> Classifier:
    """Open the classifier `model` (a folder, or a name in the `library` folders) on `choice`.

    * A library model on a choice that lands on a usable NPU runs its QDQ variant when there is one.
    * `cache` (a CompiledModelCache or a folder) keeps compiled NPU models between runs.
    * `strict=True`: the device must take the whole graph, else PlacementError/DeviceUnavailableError.
    * A device failing mid-run: with `ask(offer) -> DeviceChoice | None` the work moves there (try
      `engines.accept_first`); without it, DeviceFailedError carries the offer (`.offer.alternatives`).
    * `threads`: onnxruntime's intra-op threads per run (0: its default, one per physical core). On the
      CPU a folder runs its batches side by side on one thread each; `for_folders` (the classifier is
      opened for folders, on the CPU by name) makes that one-thread session the classifier's own, so a
      job does not make a second one.

    Raises ModelError (missing, unsafe or invalid model), DeviceUnavailableError, PlacementError,
    SessionCreationError, each with a message that says what to do.
    """
    from engines.runtime.devices import discover_for
    from engines.runtime.fallback import HEALTH
    from engines.runtime.sessions import SessionSettings
    from engines.vision.classifier import CLASSIFIER_CONFIG, ClassifierSpec, ImageClassifier

    device = as_choice(choice, strict)
    located = locate_model(model, library)
    # The folder's own checks (manifest, the inside-the-folder rule, the ONNX safety check, the bounded
    # trial) come before anything native is loaded, EP plugins included.
    specs = {located.folder: ClassifierSpec.from_folder(located.folder)}
    found = report if report is not None else discover_for(device)
    compiled = as_cache(cache)
    notices: list[str] = []
    roots = [Path(os.fspath(r)) for r in library]

    def make(where: DeviceChoice) -> ImageClassifier:
        folder = _variant_for(located, where, HEALTH.apply(found), roots, notices)
        if folder not in specs:
            specs[folder] = ClassifierSpec.from_folder(folder)
        spec = specs[folder]
        per_run = 1 if for_folders and threads == 0 and where.wanted_type == DeviceType.CPU else threads
        settings = SessionSettings(
            intra_op_threads=per_run, quantized_model=spec.quantized, config_entries=CLASSIFIER_CONFIG
        )
        return ImageClassifier(
            spec, where, settings, cache=compiled, on_progress=on_progress, warmup=warmup, max_batch=max_batch
        )

    return classifier_over(make, device, located, report=found, ask=ask, notices=notices)


# Tensors decoded ahead while the model opens, at most (~80 photos at 224 x 224).
EARLY_BUDGET_BYTES = 48 << 20


def classify_folder(
    model: PathLike,
    photos: Iterable[PathLike],
    choice: DeviceChoice | str = "auto",
    *,
    k: int = 5,
    cancel: CancelToken | None = None,
    on_result: Callable[[Classification], None] | None = None,
    library: Sequence[PathLike] = (),
    **options: Any,
) -> tuple[Classifier, list[Classification]]:
    """Open `model` for folders (open_classifier's `options`) and classify `photos`, the first photos
    decoding on the other cores while the model opens (its checks, the session, the warm-up keep one
    core busy). The classifier comes back with the results (its placement, notices, cache outcome)."""
    from engines.types import cpu_count
    from engines.vision.classifier import read_preprocess
    from engines.vision.pipeline import EarlyPhotos

    items = list(photos)
    early = None
    if len(items) > 1 and cpu_count() > 1:
        try:
            preprocess = read_preprocess(locate_model(model, library).folder)
        except StudioError:
            preprocess = None  # open_classifier says what is wrong with the model
        if preprocess is not None:
            early = EarlyPhotos(items, preprocess, cpu_count() - 1, EARLY_BUDGET_BYTES)
    try:
        classifier = open_classifier(model, choice, library=library, for_folders=True, **options)
        return classifier, classifier.classify_many(items, k=k, cancel=cancel, on_result=on_result, early=early)
    finally:
        if early is not None:
            early.stop()  # the model did not open, or a device switch left it unused (else a no-op)


def classifier_over(
    make: Callable[[DeviceChoice], Any],
    choice: DeviceChoice,
    located: LocatedModel,
    *,
    report: DiscoveryReport | None = None,
    ask: Ask | None = None,
    notices: list[str] | None = None,
) -> Classifier:
    """A Classifier over any engine factory `make(choice)` (what open_classifier uses; hosts' tests
    inject a fake engine here), opened now so placement and errors are known when this returns."""
    from engines.runtime.fallback import FallbackRunner

    runner: FallbackRunner[Any] = FallbackRunner(make, choice, report=report, ask=ask)
    classifier = Classifier(runner, located, notices if notices is not None else [])
    classifier._run(lambda clf: clf)
    return classifier


def _variant_for(
    located: LocatedModel, where: DeviceChoice, report: DiscoveryReport, roots: list[Path], notices: list[str]
) -> Path:
    """The QDQ variant of a library model when `where` lands on a usable NPU (QDQ on a CPU fallback would
    run slower than float), else the model itself."""
    from engines.models.variants import resolve_variant
    from engines.runtime.planning import DeviceSet, plan_device

    if not located.in_library:
        return located.folder
    try:
        plan = plan_device(where, DeviceSet.from_devices(report.devices))
    except StudioError:
        return located.folder  # strict and missing: session creation says so in its own words
    if plan.device_type != DeviceType.NPU:
        return located.folder
    npu = DeviceChoice(policy=Policy.PREFER_NPU)
    # the NPU EP decides: QNN takes the a16 QDQ variant, OpenVINO and VitisAI only 8-bit ones
    folder = resolve_variant(located.folder, npu, roots or [located.folder.parent], ep=plan.ep)
    if folder != located.folder:
        note = f"The NPU runs {folder.name}, the quantized (QDQ) variant of {located.name}."
        if note not in notices:
            notices.append(note)
    return folder


def open_chat(
    model: PathLike,
    choice: DeviceChoice | str = "auto",
    *,
    strict: bool | None = None,
    library: Sequence[PathLike] = (),
    responsive: bool = False,
    on_event: Callable[[ChatEvent], None] | None = None,
    cancel: CancelToken | None = None,
    check_memory: bool = True,
    available: frozenset[str] | None = None,
) -> ChatService:
    """Open the chat model `model` (a folder or a name in `library`) on `choice`, with the same meaning of
    the choice as `open_classifier`, and return its chat service (engines/chat/service.py): in this
    process or in the bounded engine child, as `runs_in_child` decides (`responsive`: this process must
    keep its other threads running while tokens are generated, as a UI or a server's event loop must).
    `service.generate(ChatRequest.send([], "Hi"), on_event=print)` answers; `on_event` also hears the
    load's `Status` notices. The folder is validated before any native load."""
    from engines.chat.opening import open_service

    located = locate_model(model, library)
    return open_service(located.folder, as_choice(choice, strict), responsive=responsive, on_event=on_event,
                        cancel=cancel, check_memory=check_memory, available=available)  # fmt: skip


def load_chat_model(
    model: PathLike,
    choice: DeviceChoice | str = "auto",
    *,
    strict: bool | None = None,
    library: Sequence[PathLike] = (),
    check_memory: bool = True,
    available: frozenset[str] | None = None,
) -> ChatModel:
    """The onnxruntime-genai chat model itself, loaded in this process (benchmarks and tools that drive
    the tokenizer and generator directly; an untrusted model is tried once first, in a bounded process).
    `model.new_conversation(...).send(text, on_text=..., cancel=...)` chats."""
    from engines.chat.loaded import ChatModel

    located = locate_model(model, library)
    return ChatModel.load(located.folder, as_choice(choice, strict), available=available, check_memory=check_memory)
