"""The chat header does not jump: the chip's words change with every load ("CPU", "Loading on NPU…", "Asked
NPU → Ran on CPU", "Chat model not loaded"), and neither picker moves; the chip is never cut, at 1000 px
either (widget geometry and font metrics)."""

from __future__ import annotations

from typing import Any

import pytest

from engines.errors import DeviceUnavailableError
from engines.types import CPU_EP, Placement
from tests.ui.fakes import FakeChatModel, loader_for

TIMEOUT = 60_000


@pytest.mark.parametrize("width", [1000, 1280])
def test_the_chip_changes_without_moving_the_pickers_and_is_never_cut(make_studio: Any, qtbot: Any, width: int) -> None:
    studio = make_studio(chat_loader=loader_for(FakeChatModel()))
    studio.show()
    studio.window.resize(width, 720)
    studio.window.show_view("chat")
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    header, chip = view.header, view.header.model_badge

    def places() -> tuple[int, ...]:
        xs = (w.mapTo(view, w.rect().topLeft()).x() for w in (header.model_picker, header.picker))
        return (*xs, header.height())

    qtbot.waitUntil(lambda: "·" in header.model_picker.combo.currentText(), timeout=TIMEOUT)  # the library is listed
    qtbot.wait(50)
    before = places()
    fallback = Placement("NPU", (CPU_EP,), (CPU_EP,), fell_back=True, reason="No usable NPU on this machine.")
    states = [
        lambda: view.show_model_loading("Loading on NPU (strict)…"),
        lambda: view.on_model_failed(DeviceUnavailableError("No usable NPU for chat.", "Turn strict mode off.")),
        lambda: view.on_model_loaded(dict(view.status.info) | {"placement": fallback}),
        lambda: view.show_model_loading("Loading on Best performance…"),
        lambda: view.on_model_loaded(dict(view.status.info) | {"placement": Placement("CPU", (CPU_EP,), (CPU_EP,))}),
    ]
    for state in states:
        state()
        qtbot.wait(30)  # laid out again
        assert places() == before, chip.text()
        label = chip.label
        assert chip.isVisible() and label.width() >= label.fontMetrics().horizontalAdvance(label.text()), label.text()
        assert chip.mapTo(view, chip.rect().topRight()).x() <= view.width()  # inside the view, not cut off
