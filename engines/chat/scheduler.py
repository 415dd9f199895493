"""The engine's loop over the turns of several callers on one loaded model: answers made at once, stepped
in turn, and a fair line for the rest.

The chat window, the CLI and the server's clients share one loaded model (one set of weights, one device).
onnxruntime-genai makes one token of one generator per call, so the engine makes several answers at once by
stepping them in turn, a token each (round robin), each with its own generator (`ChatSession`). A new
request no longer waits for every answer before it: at the next step it takes a free slot, reads its prompt
and makes its first token, then joins the round. Past the slots (engines/chat/slots.py) turns wait in line,
first come first served, and each hears how many turns are ahead of it whenever that changes (`Waiting`).
A turn stopped while it waits leaves the line at once (it ends `Finished`, stop reason "cancelled", nothing
generated); one stopped while it is answered ends at its next step, within one token of its own.

The same loop runs in this process (`LocalChat`'s engine thread) and in the bounded engine child (its main
loop). Events leave through each turn's sink, from the engine's thread.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from engines.chat.requests import ChatRequest, EventSink, Failed, Waiting
from engines.chat.session import ChatSession, Turn, not_started
from engines.errors import StudioError

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


@dataclass
class _Waiting:
    request: ChatRequest
    sink: EventSink
    told: int = -1  # the `ahead` it heard last


class Scheduler:
    """Up to `slots` answers at once, one token each per round; the rest wait in line."""

    def __init__(self, session: ChatSession, slots: int) -> None:
        self.session = session
        self.slots = max(1, slots)
        self._line: deque[_Waiting] = deque()
        self._active: list[Turn] = []

    @property
    def idle(self) -> bool:
        return not self._line and not self._active

    @property
    def answering(self) -> int:
        return len(self._active)

    @property
    def waiting(self) -> int:
        return len(self._line)

    def add(self, request: ChatRequest, sink: EventSink) -> None:
        """Queue a turn; it starts at a round with a free slot, after the turns queued before it."""
        self._line.append(_Waiting(request, sink))

    def round(self) -> None:
        """One step of the engine: turns stopped while waiting leave the line; free slots take the first
        waiting turns (each reads its prompt and makes its first token now); the turns still waiting hear
        where they are; every other answer makes one token; slots that answers freed meanwhile are taken
        at once."""
        self._leave_stopped()
        fresh = self._admit()
        self._tell_positions()
        for turn in [t for t in self._active if t not in fresh]:
            self._step(turn)
        if self._admit():
            self._tell_positions()

    def _admit(self) -> list[Turn]:
        fresh: list[Turn] = []
        while self._line and len(self._active) < self.slots:
            entry = self._line.popleft()
            try:
                turn = self.session.begin(entry.request, entry.sink)
            except StudioError as exc:
                entry.sink(Failed(exc))
                continue
            self._active.append(turn)
            fresh.append(turn)
            self._step(turn)
        return fresh

    def close(self, error: StudioError) -> None:
        """The engine stops: every turn still answering or waiting ends with `error`."""
        for turn in self._active:
            turn.abandon()
            turn.sink(Failed(error))
        for entry in self._line:
            entry.sink(Failed(error))
        self._active.clear()
        self._line.clear()

    def _step(self, turn: Turn) -> None:
        try:
            done = turn.step()
        except StudioError as exc:
            self._active.remove(turn)
            turn.sink(Failed(exc, str(getattr(exc, "partial_text", "") or ""), getattr(exc, "stats", None)))
            return
        except Exception as exc:  # a bug: the caller still hears how its turn ended
            log.exception("a chat turn failed")
            self._active.remove(turn)
            turn.abandon()
            turn.sink(Failed(StudioError(f"Unexpected error: {type(exc).__name__}: {exc}",
                                         "The other answers go on; the details are in the log file.")))
            return
        if done is not None:
            self._active.remove(turn)
            turn.sink(done)

    def _leave_stopped(self) -> None:
        for entry in [e for e in self._line if e.request.cancel is not None and e.request.cancel.cancelled]:
            self._line.remove(entry)
            entry.sink(not_started(self.session.info, entry.request))

    def _tell_positions(self) -> None:
        for index, entry in enumerate(self._line):
            ahead = len(self._active) + index
            if ahead != entry.told:
                entry.told = ahead
                entry.sink(Waiting(ahead))
