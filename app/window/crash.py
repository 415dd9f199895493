"""The one excepthook: every uncaught exception is logged, and the desktop app shows a dialog for it
(one at a time) instead of vanishing."""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from types import TracebackType

from PySide6.QtWidgets import QApplication, QMessageBox

from engines import StudioError

log = logging.getLogger(__name__)


class CrashReporter:
    """The one excepthook: logs every uncaught exception and shows a dialog (once at a time)."""

    def __init__(self, show_dialog: bool) -> None:
        self.show_dialog = show_dialog
        self.errors: list[str] = []
        self._showing = False

    def install(self) -> None:
        sys.excepthook = self.excepthook
        threading.excepthook = self.thread_excepthook

    def excepthook(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            app = QApplication.instance()
            if app is not None:
                app.quit()
            return
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        log.critical("uncaught exception\n%s", text)
        self.errors.append(f"{exc_type.__name__}: {exc}")
        if self.show_dialog and not self._showing:
            self._showing = True
            try:
                self._dialog(exc, text)
            finally:
                self._showing = False

    def thread_excepthook(self, args: threading.ExceptHookArgs) -> None:
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        log.critical("uncaught exception in thread %s\n%s", getattr(args.thread, "name", "?"), text)
        self.errors.append(f"{args.exc_type.__name__}: {args.exc_value}")

    def _dialog(self, exc: BaseException, details: str) -> None:
        from app.logs import log_file

        box = QMessageBox()
        box.setIcon(QMessageBox.Icon.Critical)
        box.setWindowTitle("NPU Studio — unexpected error")
        message = exc.user_text() if isinstance(exc, StudioError) else f"{type(exc).__name__}: {exc}"
        box.setText(f"Something went wrong: {message}")
        box.setInformativeText(
            f"Your conversations are saved. The details are in the log file:\n{log_file()}\n\n"
            "You can keep working, or quit and start NPU Studio again."
        )
        box.setDetailedText(details)
        keep = box.addButton("Keep working", QMessageBox.ButtonRole.AcceptRole)
        quit_button = box.addButton("Quit", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(keep)
        box.exec()
        if box.clickedButton() is quit_button:
            app = QApplication.instance()
            if app is not None:
                app.quit()
