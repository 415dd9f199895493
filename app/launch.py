"""Starting the desktop app: the QApplication, the crash reporter, the Studio (app/gui.py), the self-test,
and a staged exit."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer

from app.gui import Studio, create_application
from app.window.crash import CrashReporter
from app.window.placement import headless


def run_gui(self_test: bool = False, screenshots: str | None = None, report: str | None = None) -> int:
    """`npu-studio` / `npu-studio gui` / `npu-studio --self-test`: run the desktop app."""
    if self_test and not os.environ.get("NPU_STUDIO_HOME"):
        # The self-test must not touch the user's settings or conversations.
        os.environ["NPU_STUDIO_HOME"] = tempfile.mkdtemp(prefix="npu-studio-selftest-")
    app = create_application()
    crashes = CrashReporter(show_dialog=not (self_test or headless()))
    crashes.install()
    studio = Studio(app, preload=os.environ.get("NPU_STUDIO_NO_PRELOAD") != "1")
    studio.crashes = crashes.errors
    probe = os.environ.get("NPU_STUDIO_STARTUP_PROBE")
    if probe:
        _install_startup_probe(studio, Path(probe))
    runner = None
    if self_test:
        from app.selftest.run import SelfTest

        runner = SelfTest(studio, screenshots=screenshots, report=report)
        runner.start()
    studio.show()
    code = app.exec()
    if runner is not None:
        code = runner.exit_code
    stopped = studio.shutdown()
    logging.shutdown()
    if not stopped:
        # A worker stuck in native code: exit without destroying its running QThread (which would abort).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _install_startup_probe(studio: Studio, out: Path) -> None:
    """Benchmarks: write when the window was shown (and, with preloading, when each model was ready or
    failed), then close the window, or keep it open for the caller to measure and end
    (NPU_STUDIO_STARTUP_STAY=1)."""
    import json

    state: dict[str, Any] = {"pid": os.getpid()}
    wait_models = os.environ.get("NPU_STUDIO_STARTUP_WAIT_MODELS") == "1"
    stay = os.environ.get("NPU_STUDIO_STARTUP_STAY") == "1"
    pending = {"vision", "chat"} if wait_models else set()

    def write_and_maybe_quit() -> None:
        out.write_text(json.dumps(state), encoding="utf-8")
        if not pending and not stay:
            QTimer.singleShot(0, studio.window.close)

    def shown() -> None:
        state["shown_at"] = time.time()
        state["runtime_loaded_at_show"] = studio.runtime_loaded_at_show
        write_and_maybe_quit()

    def ready(which: str, failed: bool = False) -> None:
        if which in pending:
            pending.discard(which)
            state[f"{which}_ready_at"] = time.time()
            if failed:
                state[f"{which}_failed"] = True
            write_and_maybe_quit()

    studio.window.first_shown.connect(shown)
    studio.vision.model_loaded.connect(lambda *_: ready("vision"))
    studio.chat.model_loaded.connect(lambda *_: ready("chat"))
    studio.vision.failed.connect(lambda *_: ready("vision", failed=True))
    studio.chat.failed.connect(lambda *_: ready("chat", failed=True))
