"""The chat's answer as it streams in from the chat host: stored as soon as it starts (empty), drawn at
most ~60 times a second, saved when it ends (finished, stopped, failed), kept in memory when the
store refuses it, and a message too long for the context taken back into the message box.

A mixin of ChatView (ui.chat_view): it works on the view's conversation state, declared below."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QTimer

from app.chat_history import ChatHistory
from app.storage import Message, StoredConversation
from engines.errors import CancelledError, ContextOverflowError, StudioError
from engines.types import Placement, short_ep_name
from ui.chat_banners import ChatBanners
from ui.chat_composer import MessageBox
from ui.chat_state import ChatInputs
from ui.chat_text import answer_entry, message_entries
from ui.generation_panel import GenerationPanel
from ui.transcript import Entry, Transcript
from ui.widgets import BannerArea

log = logging.getLogger(__name__)

MIN_RENDER_INTERVAL_MS = 16  # streamed text is drawn at most ~60 times a second


class AnswerStream:
    history: ChatHistory
    conversation: StoredConversation | None
    messages: list[Message]
    generating: bool
    answer_id: int | None
    answer_text: str
    model_info: dict[str, Any]
    inputs: ChatInputs
    banners: BannerArea
    state_banners: ChatBanners
    transcript: Transcript
    input: MessageBox
    panel: GenerationPanel
    _refused_text: str
    _continued_from: str | None
    _render_timer: QTimer
    _render_interval_ms: int
    rederive: Callable[[], None]
    refresh_list: Callable[[], None]
    _show_context: Callable[[dict[str, Any] | None], None]
    _update_actions: Callable[[], None]
    _last_user: Callable[[], Message | None]

    def _store_answer(self) -> None:
        """Store the answer being written (empty until it ends, so that a close keeps what came)."""
        if self.conversation is None or self.answer_id is not None:
            return
        info = self.model_info
        try:
            answer = self.history.begin_answer(
                self.conversation.id,
                self.answer_text,
                model=str(info.get("name", "")),
                device=str(info.get("device", "")),
                ep=str(info.get("ep", "")),
            )
        except StudioError as exc:
            log.warning("could not store the answer: %s", exc)
            self.banners.show_error(exc)
            return
        self.answer_id = answer.id
        self.messages.append(answer)

    def on_generation_started(self, conversation_id: int) -> None:
        if self.generating and self.conversation is not None and conversation_id == self.conversation.id:
            self._store_answer()

    def on_text(self, piece: str) -> None:
        if not self.generating:
            return
        self.answer_text += piece
        if not self._render_timer.isActive():
            self._render_timer.start(self._render_interval_ms)

    def _render_stream(self) -> None:
        """Draw the streamed text; the next draw waits at least 3x as long as this one took, so that
        the UI thread spends at most a quarter of its time on a fast stream."""
        if not self.generating:
            return
        started = time.perf_counter()
        self.transcript.stream_last(self._entry_for_answer("streaming", ""))
        took_ms = (time.perf_counter() - started) * 1000
        self._render_interval_ms = max(MIN_RENDER_INTERVAL_MS, round(3 * took_ms))

    def on_finished(self, stats: dict[str, Any]) -> None:
        self._end(stats, "")

    def on_cancelled(self, stats: dict[str, Any]) -> None:
        self._end(stats, "stopped")

    def on_failed(self, error: object) -> None:
        """A failure while answering (or a request that could not start). A message the engine found
        too long for the context is taken back: not kept in the history, and put back into the box. A
        Stop that needed the engine restarted (CancelledError) keeps the answer so far as stopped, so it
        can be continued, like any other Stop."""
        if self.generating:
            ended = "cancelled" if isinstance(error, CancelledError) else "error"
            if isinstance(error, ContextOverflowError) and not self.answer_text and self._take_back():
                pass
            elif self._continued_from is not None and self.answer_text == self._continued_from:
                pass  # a Continue that wrote nothing: the answer stays as it was (and can be continued)
            elif self.answer_id is not None:
                self._save_answer(self.answer_text, ended, None)
            elif self.answer_text:
                self._keep_unsaved(self.answer_text, ended, {})
            self.generating = False
            self._reload_messages()
            self._render_all()
            self._update_actions()
        self.inputs.answer_error = error
        self.rederive()

    def _take_back(self) -> bool:
        """Remove the refused message (and its empty answer) from the store; put its text back."""
        user = self._last_user()
        if self.conversation is None or user is None or not self._refused_text:
            return False
        before = [m for m in self.messages if m.id < user.id]
        try:
            self.history.delete_after(self.conversation.id, before[-1].id if before else 0)
        except StudioError as exc:
            log.warning("could not remove the refused message: %s", exc)
            return False
        self.messages = before
        self.answer_id = None
        if not self.input.toPlainText().strip():
            self.input.setPlainText(self._refused_text)
        return True

    def shutdown(self) -> None:
        """Closing the window: keep the partial answer, marked as stopped."""
        self.panel.flush()
        if self.generating:
            if self.answer_id is None and self.answer_text:
                self._store_answer()
            self._save_answer(self.answer_text, "cancelled", None)
            self.generating = False

    def _end(self, stats: dict[str, Any], state: str) -> None:
        if not self.generating:
            return
        self._render_timer.stop()
        self._render_interval_ms = MIN_RENDER_INTERVAL_MS
        text = str(stats.get("text", self.answer_text))
        self.answer_text = text
        data = {k: v for k, v in stats.items() if k != "text"}
        placement = self.model_info.get("placement")
        if isinstance(placement, Placement):
            data["asked"] = placement.requested  # for the answer's chip: "Asked NPU → Ran on CPU"
        stop_reason = str(stats.get("stop_reason", "cancelled" if state else "eos"))
        self._store_answer()
        if self.answer_id is None:
            self._keep_unsaved(text, stop_reason, data)
        self._save_answer(text, stop_reason, data)
        self.generating = False
        self.state_banners.drop("busy")
        if not state:
            self.inputs.answer_error = None  # an answer came: the last failure no longer holds
        self._reload_messages()
        self._render_all()
        self._show_context(data)
        self._update_actions()
        self.refresh_list()
        self.rederive()

    def _save_answer(self, text: str, stop_reason: str, stats: dict[str, Any] | None) -> None:
        if self.answer_id is None:
            return
        try:
            self.history.save_answer(
                self.answer_id,
                text,
                stop_reason,
                stats,
                device=str(stats.get("device") or short_ep_name(str(stats.get("ep", "")))) if stats else None,
                ep=str(stats.get("ep", "")) if stats else None,
            )
        except StudioError as exc:
            log.warning("could not save the answer: %s", exc)
            self.banners.show_error(exc)

    def _reload_messages(self) -> None:
        if self.conversation is None:
            return
        try:
            self.messages = self.history.messages(self.conversation.id)
        except StudioError as exc:
            self.banners.show_error(exc)

    def _keep_unsaved(self, text: str, stop_reason: str, stats: dict[str, Any]) -> None:
        """The store refused the answer: keep it in memory (and on screen) rather than lose it."""
        if self.conversation is None:
            return
        info = self.model_info
        self.history.keep_unsaved(
            self.conversation.id,
            text,
            model=str(info.get("name", "")),
            device=str(stats.get("device") or info.get("device", "")),
            ep=str(stats.get("ep") or info.get("ep", "")),
            stop_reason=stop_reason,
            stats=stats,
        )

    def _entry_for_answer(self, state: str, footer: str) -> Entry:
        return answer_entry(self.answer_id or -1, self.answer_text, self.model_info, state, footer)

    def _render_all(self) -> None:
        entries = message_entries(self.messages, self.generating)
        if self.generating:
            if entries and self.answer_id is not None and entries[-1].key == self.answer_id:
                entries.pop()
            entries.append(self._entry_for_answer("streaming", ""))
        self.transcript.set_entries(entries)
