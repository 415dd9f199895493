"""The answer being written, as it streams in from the chat host: its text so far, drawn into the transcript
at most ~60 times a second (and less often when drawing is slow), with "waiting for other requests" in
its place until its first words. What is stored of it is the app's business (app/hosts/chat_turns.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, QTimer

from ui.chat.text import answer_entry, waiting_words
from ui.chat.transcript import Transcript
from ui.chat.transcript_render import Entry

MIN_RENDER_INTERVAL_MS = 16  # streamed text is drawn at most ~60 times a second


class AnswerStream(QObject):
    def __init__(self, transcript: Transcript, model: Callable[[], Mapping[str, object]], parent: QObject) -> None:
        super().__init__(parent)
        self.transcript = transcript
        self._model = model  # the loaded model's info: the answer's name and device line
        self.text = ""
        self.key: int | None = None  # the stored answer's id, once it is stored
        self.active = False
        self._interval_ms = MIN_RENDER_INTERVAL_MS
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._render)

    def begin(self, text: str = "", key: int | None = None) -> None:
        """A new answer (or, for a Continue, the stored answer `key` written further from `text`)."""
        self.text, self.key, self.active = text, key, True

    def append(self, piece: str) -> None:
        if not self.active:
            return
        self.text += piece
        if not self._timer.isActive():
            self._timer.start(self._interval_ms)

    def waiting(self, ahead: int) -> None:
        """The answer waits for other requests on the same model (the server's) to be answered first."""
        if self.active and not self.text:  # in the answer's place until its first words
            self.transcript.stream_last(self.entry("streaming", text=f"*{waiting_words(ahead)}*"))

    def end(self) -> None:
        self.active = False
        self._timer.stop()
        self._interval_ms = MIN_RENDER_INTERVAL_MS

    def entry(self, state: str, text: str | None = None) -> Entry:
        return answer_entry(self.key if self.key is not None else -1, self.text if text is None else text,
                            self._model(), state)  # fmt: skip

    def _render(self) -> None:
        """Draw the streamed text; the next draw waits at least 3x as long as this one took, so that the UI
        thread spends at most a quarter of its time on a fast stream."""
        if not self.active:
            return
        started = time.perf_counter()
        self.transcript.stream_last(self.entry("streaming"))
        took_ms = (time.perf_counter() - started) * 1000
        self._interval_ms = max(MIN_RENDER_INTERVAL_MS, round(3 * took_ms))
