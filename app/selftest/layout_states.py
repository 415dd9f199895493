"""The states the layout pass checks every view in (app.selftest.layout_shots): the ones that stretch
a layout the most, set up the way a user would (the device picker, a folder of photos, the Strict box):

- "npu": the NPU asked for (on a machine without one, every chip reads "Asked NPU → Ran on CPU ·
  94/94 nodes"), a photo classified, the chat model loaded, the Benchmark showing results;
- "batch": a folder of photos with long file names classified (the results table, its chips and top-5
  lists);
- "strict": Strict ticked (with the keyboard focus on it) while the NPU is asked for.

Views are reached through the app (app.gui.Studio) and Qt's own classes: app never imports ui."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QFrame, QLabel, QWidget

from app import paths

if TYPE_CHECKING:
    from app.gui import Studio

Steps = Generator[None, None, str]
PHOTO_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
LONG_NAME = "{stem} - from the family album, summer 2024"  # a long name a camera roll or a user gives
STEP_TIMEOUT_S = 120.0


def _wait(condition: Callable[[], bool], timeout: float = STEP_TIMEOUT_S) -> Generator[None, None, bool]:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        yield
    return True


def chip_texts(view: QWidget) -> list[str]:
    """The lines of the placement chips shown in `view`."""
    texts: list[str] = []
    for chip in view.findChildren(QFrame, "PlacementChip"):
        if chip.isVisibleTo(view):
            texts.extend(label.text() for label in chip.findChildren(QLabel) if label.text())
    return texts


def _samples() -> list[Path]:
    folder = paths.assets_dir() / "samples"
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in PHOTO_SUFFIXES) if folder.is_dir() else []


def _classify(studio: Studio, targets: list[str]) -> Generator[None, None, bool]:
    view = studio.classify_view
    yield from _wait(lambda: not view.busy)
    view.classify_paths(targets)
    yield  # the request reaches the host
    return (yield from _wait(lambda: not view.busy))


def _load_chat(studio: Studio) -> Generator[None, None, bool]:
    """Load the chat model for the current choice and wait for it (loaded or failed). Without the chat
    model installed nothing is loaded (the app says so in a banner): there is nothing to wait for."""
    if not studio.chat_folder().is_dir():
        return False
    done: list[object] = []
    studio.chat.model_loaded.connect(done.append)
    studio.chat.failed.connect(done.append)
    try:
        studio.load_chat_model()
        return (yield from _wait(lambda: bool(done)))
    finally:
        studio.chat.model_loaded.disconnect(done.append)
        studio.chat.failed.disconnect(done.append)


def _enter_npu(studio: Studio) -> Steps:
    studio.choice_model.set_strict(False)
    studio.choice_model.set_text("npu")
    chat_ready = yield from _load_chat(studio)
    samples = _samples()
    classified = bool(samples) and (yield from _classify(studio, [str(samples[0])]))
    studio.window.show_view("benchmark")
    bench = studio.bench_view
    shown = yield from _wait(lambda: bench.current is not None, 30)  # the last run of the history
    said = [
        f"chat model {'loaded' if chat_ready else 'not loaded'}",
        f"photo {'classified' if classified else 'not classified'}",
        f"benchmark {'with results' if shown else 'empty (no run in the history)'}",
        "chips: " + " | ".join(chip_texts(studio.classify_view) + chip_texts(studio.chat_view)),
    ]
    return "; ".join(said)


def _enter_batch(studio: Studio) -> Steps:
    folder = Path(tempfile.mkdtemp(prefix="npu-studio-layout-batch-"))
    for number, sample in enumerate(_samples()):
        shutil.copy2(sample, folder / (LONG_NAME.format(stem=sample.stem) + f" ({number}){sample.suffix}"))
    (folder / "notes.txt").write_text("not a photo\n", encoding="utf-8")
    classified = yield from _classify(studio, [str(folder)])
    return f"{len(_samples())} photos with long names {'classified' if classified else 'not classified'}"


def _enter_strict(studio: Studio) -> Steps:
    studio.choice_model.set_text("npu")
    studio.choice_model.set_strict(True)
    yield from _load_chat(studio)
    return "Strict ticked, NPU asked for; chips: " + " | ".join(
        chip_texts(studio.classify_view) + chip_texts(studio.chat_view)
    )


def _focus_strict(studio: Studio, key: str) -> Generator[None, None, None]:
    """The keyboard focus on the Strict box of the view shown (right after a user ticks it)."""
    view = studio.window.view(key)
    boxes = [b for b in view.findChildren(QCheckBox) if b.isVisibleTo(view) and b.accessibleName().startswith("Strict")]
    if boxes:
        studio.window.activateWindow()
        boxes[0].setFocus(Qt.FocusReason.TabFocusReason)
        yield


def _no_focus(_studio: Studio, _key: str) -> Generator[None, None, None]:
    yield from ()


@dataclass(frozen=True)
class State:
    name: str
    enter: Callable[[Studio], Steps]
    views: tuple[str, ...] | None = None  # None: every view
    focus: Callable[[Studio, str], Generator[None, None, None]] = field(default=_no_focus)


STATES: tuple[State, ...] = (
    State("npu", _enter_npu),
    State("batch", _enter_batch, ("classify",)),
    State("strict", _enter_strict, ("devices", "classify", "chat", "settings"), _focus_strict),
)


def enter_state(studio: Studio, state: State) -> Steps:
    return (yield from state.enter(studio))


def leave_states(studio: Studio, choice: tuple[str, bool]) -> None:
    """Back to the device choice (text, strict) the pass started with."""
    studio.choice_model.set_strict(choice[1])
    studio.choice_model.set_text(choice[0])
