"""The turns of the conversation on the Chat view's screen, as the app stores them and asks for them.

A turn (the view's `turn_requested`: send, regenerate, edit or continue) is stored first, on the
conversations host's thread: the question (in a new conversation, titled by it, the first time), or what an
edit or a regenerate replaces. Then the chat host is asked for the answer. The answer is stored, empty, as it
starts (so a close keeps what came), and saved when it ends: finished, stopped, failed, or cut short by the
window closing (`finish`). An answer the store refuses (a read-only or full disk) is kept in memory and
stored later (app/storage/chat_history.py). A question the model finds too long for its context is taken
back into the message box. Every record goes back to the view when it is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from PySide6.QtCore import QObject, SignalInstance

from app.hosts.chat import ChatHost
from app.hosts.conversations import Conversations, ConversationsHost
from app.hosts.jobs import Job
from app.storage.chat_history import ChatHistory
from app.storage.records import Message, StoredConversation
from engines import CancelledError, ContextOverflowError, Placement, StudioError, short_ep_name

log = logging.getLogger(__name__)


class TurnsView(Protocol):
    """What the controller asks of the conversation on screen (ui/chat/session.py)."""

    @property
    def turn_requested(self) -> SignalInstance: ...
    @property
    def stop_requested(self) -> SignalInstance: ...

    def show_question(self, conversation: StoredConversation, messages: Sequence[Message]) -> None: ...
    def show_answer_started(self, answer_id: int) -> None: ...
    def show_turn_ended(
        self, messages: Sequence[Message] | None, stats: Mapping[str, object], stopped: bool
    ) -> None: ...
    def answer_failed(self, error: object) -> None: ...
    def show_turn_failed(self, messages: Sequence[Message] | None, taken_back: str) -> None: ...
    def show_turn_refused(self, error: object) -> None: ...
    def show_storage_error(self, error: object) -> None: ...
    def end_turn(self) -> None: ...


@dataclass
class _Answer:
    """The stored answer's id: set and read only on the store's thread (its jobs run in order)."""

    id: int | None = None


@dataclass
class _Turn:
    kind: str
    text: str
    history: list[tuple[str, str]]
    system_prompt: str
    options: dict[str, object]
    anchor: int
    conversation: int = 0
    written: str = ""  # the answer so far (for a continue: from the stored answer's text)
    continued_from: str | None = None
    model: dict[str, str] = field(default_factory=dict)  # name, device, ep of the model that answers
    answer: _Answer = field(default_factory=_Answer)
    job: Job | None = None  # the chat host's request, once it went out
    stopped: bool = False
    ended: bool = False  # its end (finished, stopped, failed) is being stored


class ChatTurns(QObject):
    """The turns' controller. A failure of the chat host is the answer's when its request's job reports it
    (settled here), else the model's (`on_model_failed`: a load)."""

    def __init__(self, view: TurnsView, host: ConversationsHost, chat: ChatHost, conversations: Conversations,
                 on_model_failed: Callable[[object], None], parent: QObject | None = None) -> None:  # fmt: skip
        super().__init__(parent)
        self.view = view
        self.host = host
        self.chat = chat
        self.conversations = conversations
        self.turn: _Turn | None = None
        self._on_model_failed = on_model_failed
        self._answer_error: object = None  # the last answer's failure (the host reports it twice)
        self._model: dict[str, object] = {}  # the loaded model's info
        view.turn_requested.connect(self.request)
        view.stop_requested.connect(self.stop)
        chat.model_loaded.connect(self._loaded)
        chat.model_unloaded.connect(self._model.clear)
        chat.generation_started.connect(self._started)
        chat.text_generated.connect(self._text)
        chat.generation_finished.connect(lambda stats: self._ended(stats, stopped=False))
        chat.cancelled.connect(lambda stats: self._ended(stats, stopped=True))
        chat.failed.connect(self._failed)

    # --- the request ----------------------------------------------------------------------------------
    def request(self, kind: str, conversation: int, text: str, history: list[tuple[str, str]], system_prompt: str,
                options: dict[str, object], anchor: int) -> None:  # fmt: skip
        turn = _Turn(kind, text, list(history), system_prompt, dict(options), anchor, conversation)
        if kind == "continue":
            turn.answer.id = anchor
            turn.continued_from = next((t for r, t in reversed(history) if r == "assistant"), "")
            turn.written = turn.continued_from
        self.turn = turn
        model = str(self._model.get("name", ""))
        self.host.run(f"storing a {kind}", lambda h: _prepare(h, turn, model),
                      lambda stored: self._prepared(turn, stored), lambda e: self._refused(turn, e))  # fmt: skip

    def _prepared(self, turn: _Turn, stored: tuple[StoredConversation, list[Message]]) -> None:
        if turn is not self.turn:
            return
        conversation, messages = stored
        turn.conversation = conversation.id
        self.view.show_question(conversation, messages)
        turn.job = self.chat.generate(turn.kind, conversation.id, turn.text, turn.history, turn.system_prompt,
                                      turn.options)  # fmt: skip
        turn.job.errored.connect(lambda error: self._answer_failed(turn, error))  # before the host's `failed`
        if turn.stopped:  # Stop came before the request went out: it goes out stopped (its answer: "stopped")
            turn.job.cancel()
        self.conversations.refresh()

    def _refused(self, turn: _Turn, error: StudioError) -> None:
        if turn is self.turn:
            self.turn = None
            self.view.show_turn_refused(error)

    def stop(self) -> None:
        if self.turn is not None:
            self.turn.stopped = True
        self.chat.cancel()

    # --- the answer -----------------------------------------------------------------------------------
    def _loaded(self, info: Mapping[str, object]) -> None:
        self._model = dict(info)

    def _started(self, conversation: int) -> None:
        turn = self.turn
        if turn is None or turn.ended or turn.conversation != conversation:
            return
        turn.model = {key: str(self._model.get(key, "")) for key in ("name", "device", "ep")}
        if turn.kind == "continue":
            return  # the answer is the stored one, written further
        self.host.run("storing the answer", lambda h: _begin(h, turn),
                      lambda answer_id: self._answer_stored(turn, answer_id), self._not_stored)  # fmt: skip

    def _answer_stored(self, turn: _Turn, answer_id: int | None) -> None:
        if turn is self.turn and answer_id is not None:
            self.view.show_answer_started(answer_id)

    def _not_stored(self, error: StudioError) -> None:
        log.warning("could not store the answer: %s", error)  # it is kept when it ends (see _save)
        self.view.show_storage_error(error)

    def _text(self, piece: str) -> None:
        if self.turn is not None and not self.turn.ended:
            self.turn.written += piece

    def _ended(self, stats: Mapping[str, object], stopped: bool) -> None:
        turn = self.turn
        if turn is None or turn.ended:
            return
        turn.ended = True
        text = str(stats.get("text", turn.written))
        data = {k: v for k, v in stats.items() if k != "text"}
        placement = self._model.get("placement")
        if isinstance(placement, Placement):  # the answer's chip says what the header's said: "Asked NPU → Ran on CPU"
            data.update(asked=placement.requested, fell_back=placement.fell_back, fallback_reason=placement.reason)
        reason = str(stats.get("stop_reason", "cancelled" if stopped else "eos"))
        self.host.run("saving the answer", lambda h: _save(h, turn, text, reason, data),
                      lambda saved: self._saved(turn, saved, data, stopped),
                      lambda e: self._saved(turn, (None, e), data, stopped))  # fmt: skip

    def _saved(self, turn: _Turn, saved: tuple[list[Message] | None, StudioError | None], stats: Mapping[str, object],
               stopped: bool) -> None:  # fmt: skip
        if turn is not self.turn:
            return
        self.turn = None
        messages, error = saved
        if error is not None:
            self.view.show_storage_error(error)
        self.view.show_turn_ended(messages, stats, stopped)
        self.conversations.refresh()

    def _failed(self, error: StudioError) -> None:
        """Whatever the chat host failed at: an answer (settled by its turn) or else the model (a load)."""
        if error is not self._answer_error:
            self._on_model_failed(error)

    def _answer_failed(self, turn: _Turn, error: StudioError) -> None:
        self._answer_error = error
        if turn is not self.turn or turn.ended:
            return
        turn.ended = True
        self.view.answer_failed(error)
        take_back = isinstance(error, ContextOverflowError) and not turn.written and turn.kind == "send"
        # A Stop that needed the engine restarted keeps the answer so far as stopped (it can be continued).
        state = "cancelled" if isinstance(error, CancelledError) else "error"
        self.host.run("saving what the answer left", lambda h: _settle(h, turn, take_back, state),
                      lambda settled: self._settled(turn, settled),
                      lambda _e: self._settled(turn, (None, "")))  # fmt: skip

    def _settled(self, turn: _Turn, settled: tuple[list[Message] | None, str]) -> None:
        if turn is self.turn:
            self.turn = None
            self.view.show_turn_failed(*settled)
            self.conversations.refresh()

    def finish(self) -> None:
        """The window closes: the answer being written is saved as stopped, with what came so far, and every
        write is waited for."""
        turn = self.turn
        if turn is not None and not turn.ended and turn.job is not None:
            turn.ended = True
            if turn.continued_from is not None:
                keep = turn.written != turn.continued_from
            else:
                keep = bool(turn.model) or bool(turn.written)  # it started (stored, empty), or wrote something
            if keep:
                text, data = turn.written, dict[str, object]()
                self.host.run("saving the answer at close", lambda h: _save(h, turn, text, "cancelled", data))
        self.turn = None
        self.view.end_turn()
        self.host.drain()


# --- on the store's thread ------------------------------------------------------------------------------


def _prepare(history: ChatHistory, turn: _Turn, model: str) -> tuple[StoredConversation, list[Message]]:
    if turn.kind in ("send", "edit"):
        after = turn.anchor if turn.kind == "edit" else None
        return history.ask(turn.conversation, turn.text, model=model, system_prompt=turn.system_prompt, after=after)
    if turn.kind == "regenerate":
        history.delete_after(turn.conversation, turn.anchor)
    return history.get(turn.conversation), history.messages(turn.conversation)


def _begin(history: ChatHistory, turn: _Turn) -> int | None:
    """Store the answer as it starts (empty). None when the store refuses it (it is kept at the end)."""
    if turn.answer.id is None:
        m = turn.model
        answer = history.begin_answer(turn.conversation, "", model=m["name"], device=m["device"], ep=m["ep"])
        turn.answer.id = answer.id
    return turn.answer.id


def _save(history: ChatHistory, turn: _Turn, text: str, reason: str, stats: dict[str, object]
          ) -> tuple[list[Message] | None, StudioError | None]:  # fmt: skip
    """Save the answer as it ended; an answer the store refuses is kept in memory (and shown) instead."""
    error: StudioError | None = None
    m = turn.model or {"name": "", "device": "", "ep": ""}
    device = str(stats.get("device") or short_ep_name(str(stats.get("ep", "")))) if stats else None
    ep = str(stats.get("ep", "")) if stats else None
    try:
        if turn.answer.id is None:
            began = history.begin_answer(turn.conversation, "", model=m["name"], device=m["device"], ep=m["ep"])
            turn.answer.id = began.id
        history.save_answer(turn.answer.id, text, reason, stats or None, device=device, ep=ep)
    except StudioError as exc:
        log.warning("could not save the answer: %s", exc)
        error = exc
        if turn.answer.id is None:
            history.keep_unsaved(turn.conversation, text, model=m["name"], device=device or m["device"],
                                 ep=ep or m["ep"], stop_reason=reason, stats=stats)  # fmt: skip
    try:
        return history.messages(turn.conversation), error
    except StudioError as exc:
        return None, error or exc


def _settle(history: ChatHistory, turn: _Turn, take_back: bool, state: str) -> tuple[list[Message] | None, str]:
    """What a failed answer leaves: the question taken back (too long for the model), the continued answer as
    it was (a Continue that wrote nothing), or the answer so far, saved as stopped or failed."""
    taken = ""
    try:
        if take_back:
            taken = history.take_back(turn.conversation)
        elif turn.continued_from is not None and turn.written == turn.continued_from:
            pass
        elif turn.answer.id is not None:
            history.save_answer(turn.answer.id, turn.written, state, None, None, None)
        elif turn.written:
            m = turn.model or {"name": "", "device": "", "ep": ""}
            history.keep_unsaved(turn.conversation, turn.written, model=m["name"], device=m["device"], ep=m["ep"],
                                 stop_reason=state, stats={})  # fmt: skip
        return history.messages(turn.conversation), taken
    except StudioError as exc:
        log.warning("could not save what the failed answer left: %s", exc)
        return None, taken
