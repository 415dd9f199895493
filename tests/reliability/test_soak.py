"""A bounded soak: 2,000 classifications on the demo classifier and 100 chat turns in one process, as
the app's workers run them (`ImageClassifier`, and `ChatSession`, the code of the chat engine child).

After a warm-up, resident memory may grow by at most 10 %, and no thread or open file may be left
behind. `--long-soak` (or NPU_STUDIO_LONG_SOAK=1) runs 20,000 classifications and 1,000 chat turns on
the demo chat model instead; the short soak always runs without it.
"""

from __future__ import annotations

import gc
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from PIL import Image

from engines.chat.requests import ChatRequest, Text
from engines.chat.session import ChatSession
from engines.chat.types import ChatMessage, ChatOptions
from engines.errors import ImageError
from engines.types import CancelToken, DeviceChoice
from engines.vision.classifier import ImageClassifier
from tests.reliability.conftest import Recorder, long_soak

CATEGORY = "Soak"
MAX_GROWTH = 0.10


@dataclass(frozen=True)
class Plan:
    classifications: int
    chat_turns: int
    warmup_classifications: int = 200
    warmup_turns: int = 20  # one whole conversation


SHORT = Plan(2_000, 100)
LONG = Plan(20_000, 1_000)


@dataclass(frozen=True)
class Snapshot:
    rss: int
    python_threads: frozenset[str]
    native_threads: int
    open_files: int

    @classmethod
    def take(cls) -> Snapshot:
        gc.collect()
        process = psutil.Process()
        names = frozenset(f"{t.name}#{t.ident}" for t in threading.enumerate())
        return cls(process.memory_info().rss, names, process.num_threads(), process.num_fds())


def _photos(samples: Path, folder: Path) -> list[Path]:
    """The sample photos as JPEGs (as most photos are), the PNGs themselves, and two bad files."""
    folder.mkdir()
    photos: list[Path] = []
    for sample in sorted(samples.glob("*")):
        if sample.suffix.lower() not in {".png", ".jpg"}:
            continue
        jpeg = folder / f"{sample.stem}.jpg"
        with Image.open(sample) as img:
            img.convert("RGB").save(jpeg, quality=90)
        photos += [jpeg, jpeg, jpeg, sample]
    (folder / "empty.jpg").write_bytes(b"")
    (folder / "notes.jpg").write_text("not a photo")
    return [*photos, folder / "empty.jpg", folder / "notes.jpg"]


def token_canceller(token: CancelToken) -> Callable[[str], None]:
    def on_text(_piece: str) -> None:
        token.cancel()

    return on_text


def streamed(on_text: Callable[[str], None]) -> Callable[[object], None]:
    """An event sink that hands the answer's text to `on_text`."""
    return lambda event: on_text(event.text) if isinstance(event, Text) else None


class Work:
    """Classifications (single photos, batches, bytes) and chat turns, in the proportions of the plan."""

    def __init__(self, classifier: ImageClassifier, chat: ChatSession, photos: list[Path]) -> None:
        self.classifier = classifier
        self.chat = chat
        self.photos = photos
        self.rng = random.Random(5)
        self.classified = 0
        self.errors = 0
        self.turns = 0
        self.cancelled = 0
        self._conversation = 0
        self._history: list[tuple[str, str]] = []

    def classify(self, count: int) -> None:
        done = 0
        while done < count:
            kind = self.rng.random()
            if kind < 0.5:  # a batch, as a folder drop does
                batch = [self.rng.choice(self.photos) for _ in range(min(16, count - done))]
                results = self.classifier.classify_many(batch, k=5)
                self.errors += sum(1 for r in results if r.error)
                done += len(batch)
                continue
            photo = self.rng.choice(self.photos)
            try:
                if kind < 0.8:
                    self.classifier.classify(photo, k=5)
                else:  # a pasted image
                    self.classifier.classify(photo.read_bytes(), k=5)
            except ImageError:
                self.errors += 1
            done += 1
        self.classified += count

    def close_conversation(self) -> None:
        """Close the open conversation (its generator and KV cache go): memory is compared between
        such moments, not mid-conversation when the cache holds a whole history."""
        self.chat.forget(self._conversation)
        self._conversation += 1
        self._history = []

    def chat_turns(self, count: int) -> None:
        for _ in range(count):
            if self._history and self.turns % 20 == 0:  # a new conversation now and then
                self.close_conversation()
            token = CancelToken()
            # One turn in five is stopped as soon as its answer shows (the first text reaching the UI).
            on_text = token_canceller(token) if self.rng.random() < 0.2 else (lambda _piece: None)
            text = f"Question number {self.turns}: what is {self.turns} plus one?"
            history = [ChatMessage(role, content) for role, content in self._history]
            request = ChatRequest.send(history, text, options=ChatOptions(max_new_tokens=24),
                                       conversation=self._conversation, cancel=token)  # fmt: skip
            done = self.chat.answer(request, streamed(on_text))
            self.cancelled += done.stop_reason == "cancelled"
            self._history += [("user", text), ("assistant", done.text)]
            self.turns += 1


def _soak(
    plan: Plan, classifier_folder: Path, chat_folder: Path, photos: list[Path], measure: Callable[[str, str], None]
) -> tuple[Snapshot, Snapshot, Work, float]:
    choice = DeviceChoice.parse("cpu")
    classifier = ImageClassifier.from_folder(classifier_folder, choice)
    chat = ChatSession.load(chat_folder, choice)
    work = Work(classifier, chat, photos)
    work.classify(plan.warmup_classifications)
    work.chat_turns(plan.warmup_turns)
    work.close_conversation()
    before = Snapshot.take()
    started = time.perf_counter()
    # interleaved, as a user switches between the views
    rounds = 10
    for i in range(rounds):
        work.classify((plan.classifications - plan.warmup_classifications) // rounds)
        work.chat_turns((plan.chat_turns - plan.warmup_turns) // rounds)
        if i == rounds // 2:
            measure("soak: RSS half-way (a conversation open)", f"{Snapshot.take().rss / 2**20:.0f} MiB")
    seconds = time.perf_counter() - started
    work.close_conversation()
    after = Snapshot.take()
    chat.close()
    return before, after, work, seconds


def test_soak(
    request: pytest.FixtureRequest,
    demo_classifier: Path,
    tiny_llm: Path,
    samples: Path,
    tmp_path: Path,
    reliability: Recorder,
) -> None:
    long = long_soak(request.config)
    plan = LONG if long else SHORT
    chat_folder = request.getfixturevalue("demo_chat_model") if long else tiny_llm
    photos = _photos(samples, tmp_path / "photos")
    before, after, work, seconds = _soak(plan, demo_classifier, chat_folder, photos, reliability.measure)
    growth = (after.rss - before.rss) / before.rss
    new_threads = sorted(after.python_threads - before.python_threads)
    reliability.measure(
        "soak",
        f"{work.classified} classifications ({work.errors} bad files), {work.turns} chat turns "
        f"({work.cancelled} stopped) in {seconds:.0f} s after warm-up",
    )
    reliability.measure(
        "soak: RSS after warm-up -> end", f"{before.rss / 2**20:.0f} -> {after.rss / 2**20:.0f} MiB ({growth:+.1%})"
    )
    reliability.measure(
        "soak: threads (python / native) and open files",
        f"{len(before.python_threads)}/{before.native_threads} -> {len(after.python_threads)}/"
        f"{after.native_threads} threads, {before.open_files} -> {after.open_files} open files",
    )
    ok_memory = growth <= MAX_GROWTH
    ok_threads = not new_threads and after.native_threads <= before.native_threads
    ok_files = after.open_files <= before.open_files
    model = "the demo chat model" if long else "the tiny chat model"
    reliability.record(
        CATEGORY,
        f"{plan.classifications:,} classifications (demo classifier; singles, batches, bytes, bad files) "
        f"and {plan.chat_turns:,} chat turns ({model}, one in five stopped) in one process",
        "RSS grows by at most 10 % after warm-up; no thread and no open file left behind",
        f"RSS growth {'within' if ok_memory else 'OVER'} 10 %; "
        f"{'no new threads' if ok_threads else 'NEW THREADS: ' + ', '.join(new_threads)}; "
        f"{'no new open files' if ok_files else 'OPEN FILES LEFT BEHIND'}",
    )
    assert work.classified == plan.classifications and work.turns == plan.chat_turns
    assert work.errors > 0 and work.cancelled > 0  # the error and cancel paths were part of the soak
    assert ok_memory, f"RSS grew {growth:.1%}"
    assert ok_threads, new_threads
    assert ok_files, (before.open_files, after.open_files)
