"""UI test set-up: headless Qt, no QThread may outlive its test, no unexpected WARNING logs, and small
fake engines for the host boundary (the real ones are used where a test says so)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QThread

from tests.ui.fakes import FakeChatModel

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "assets" / "samples"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "allow_warnings(pattern): WARNING logs matching the regex are expected")


# --- QThreads must not outlive a test ---------------------------------------------------------------

_started: list[QThread] = []
_original_start = QThread.start


def _recording_start(self: QThread, *args: Any) -> None:
    _started.append(self)
    _original_start(self, *args)


@pytest.fixture(autouse=True)
def no_running_qthreads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any test that leaves a QThread running (and stop it, so the next test is not affected)."""
    monkeypatch.setattr(QThread, "start", _recording_start)
    _started.clear()
    yield
    leaked = []
    for thread in list(_started):
        try:
            running = thread.isRunning()
        except RuntimeError:  # the C++ object is gone: it was stopped and deleted
            continue
        if running:
            leaked.append(thread.objectName() or repr(thread))
            thread.quit()
            thread.wait(10_000)
    _started.clear()
    assert not leaked, f"QThread(s) still running after the test: {', '.join(leaked)}"


# --- unexpected warnings fail the test -------------------------------------------------------------


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def no_unexpected_warnings(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that logs a WARNING (or worse) it did not declare with @pytest.mark.allow_warnings."""
    collector = _Collector()
    root = logging.getLogger()
    root.addHandler(collector)
    try:
        yield
    finally:
        root.removeHandler(collector)
    allowed = [re.compile(m.args[0]) for m in request.node.iter_markers("allow_warnings")]
    unexpected = [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in collector.records
        if not any(p.search(r.getMessage()) for p in allowed)
    ]
    assert not unexpected, "unexpected warnings:\n" + "\n".join(unexpected)


@pytest.fixture
def fake_chat() -> FakeChatModel:
    return FakeChatModel()


@pytest.fixture
def make_studio(qtbot: Any) -> Iterator[Callable[..., Any]]:
    """Build the real app (Studio) with optional fake engines; always shut down at the end."""
    from PySide6.QtWidgets import QApplication

    from app.gui import Studio

    made: list[Any] = []

    def make(**kwargs: Any) -> Any:
        app = QApplication.instance()
        kwargs.setdefault("preload", False)
        studio = Studio(app, **kwargs)  # type: ignore[arg-type]
        qtbot.addWidget(studio.window)
        made.append(studio)
        return studio

    yield make
    for studio in made:
        assert studio.shutdown(), "a host thread did not stop"


def wait_until(qtbot: Any, condition: Callable[[], bool], timeout: int = 60_000) -> None:
    qtbot.waitUntil(condition, timeout=timeout)
