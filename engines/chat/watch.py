"""What the parent watches while the chat engine's child process (engines/chat/bounded.py) works on a request.

The child runs native code the parent cannot interrupt: onnxruntime-genai holds the GIL for a whole
`generate_next_token`, and a model's graph can loop in it without end (an ONNX `Loop` with a huge trip
count, perhaps only for some inputs). So the parent keeps the deadlines and kills the child when one
passes; the next request starts a new child. Per request:

- the trial: before an untrusted model's first load the parent tries it once in a bounded process
  (engines/models/trial.py, the same trial and verdict cache as the CLI); Stop and closing end it at once;
- a chat template render: its own bound (engines/chat/bounds.py); Stop waits `CANCEL_RENDER_S` for it;
- Stop while generating: the child stops between two tokens (10-25 ms each); one that has not answered
  within `stop_grace()` is stuck in native code and is killed (the model is loaded again, with the
  conversation, on the next message);
- an untrusted model while generating: the first token and each next one must come within the trial's
  time limit (`trial.time_limit`); past it the child is killed and that model is not loaded again unasked.
  Bundled models have no such bound: a long prompt on a slow device legitimately takes long.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines import errors
from engines.chat import bounds as chat_bounds
from engines.errors import ModelError, StudioError

# Stop waits this long for the child to stop between tokens. A token takes 10-25 ms on two cores and a
# few hundred ms for a large model on a slow device; a prompt's first pass can take a second or two.
# Three seconds cover all of that with room to spare, and still feel like Stop worked.
STOP_GRACE_S = 3.0
CANCEL_RENDER_S = 0.5  # a render never looks at the cancel flag: do not wait long for it
ABANDON_S = 1.0  # the app is closing: what is still busy after this is killed


def stop_grace() -> float:
    """Seconds Stop waits before the engine is killed (NPU_STUDIO_STOP_GRACE_SECONDS: another value)."""
    try:
        return max(0.0, float(os.environ.get("NPU_STUDIO_STOP_GRACE_SECONDS") or STOP_GRACE_S))
    except ValueError:
        return STOP_GRACE_S


def token_bound(folder: str) -> float | None:
    """How long an answer may wait for its next token with the model in `folder`: the trial's time limit
    for a model that is not ours (the same rule as the trial: `trial.bounded`), None for ours."""
    from engines.models import trial

    return trial.time_limit(folder) if trial.bounded(folder) else None


def try_first(folder: str, on_status: Callable[[str], None], should_stop: Callable[[], bool]) -> None:
    """Before the child loads an untrusted model for the first time: check the folder's rules (nothing
    native runs a refused folder), then try it once in a bounded process (cached verdict)."""
    from engines.chat.folder import validate_model_folder
    from engines.models import trial

    if not trial.bounded(folder):
        return
    validate_model_folder(folder)
    name = Path(folder).name
    trial.ensure_tried(
        folder,
        trial.CHAT,
        should_stop=should_stop,
        on_trying=lambda: on_status(f"Trying {name} once in a separate, time-limited process (not a bundled model)…"),
    )


def stopped_error(grace: float) -> StudioError:
    return errors.CancelledError(
        f"Stopped. The chat engine did not stop within {grace:.0f} s, so it was restarted; the answer so far "
        "is kept.",
        "Send a message to go on: the model is loaded again with the conversation.",
    )


def hang_error(seconds: float, first: bool) -> StudioError:
    which = "its first token" if first else "its next token"
    return ModelError(
        f"The model did not produce {which} within {seconds:.0f} s; its graph may loop without end on this "
        "conversation. The chat engine was stopped and this model unloaded.",
        "Choose another model; use model folders from a source you trust.",
    )


@dataclass
class Verdict:
    """A deadline passed: the child must be killed; `forget` also drops the loaded model."""

    error: StudioError
    forget: bool = False


class Watch:
    """The deadlines of one request, fed with the child's events and checked at each poll. An answer's
    token bound starts when the child takes it (`Started`): waiting in line behind other answers is not
    a hang."""

    def __init__(self, op: str, token_seconds: float | None, grace: float) -> None:
        self.generating = op == "answer"
        self.token_seconds = token_seconds if self.generating else None
        self.grace = grace
        self.render_bound = 0.0
        self.render_deadline: float | None = None  # while the child renders a chat template
        self.token_deadline: float | None = None  # from the start of the answer
        self.tokens_seen = False
        self.cancel_deadline: float | None = None
        self.abandon_deadline: float | None = None

    @property
    def rendering(self) -> bool:
        return self.render_deadline is not None

    def saw(self, event: tuple[Any, ...]) -> None:
        """An event came from the child: the child is alive and moving."""
        now = time.monotonic()
        kind = event[0] if event else ""
        if kind == "rendering":
            self.render_bound = chat_bounds.render_seconds(int(event[1]))
            self.render_deadline = now + self.render_bound
        elif kind == "rendered":
            self.render_deadline = None
            self.cancel_deadline = None  # a Stop during the render: the generation looks at it from now on
        elif kind == "text":
            self.tokens_seen = True
        if self.token_seconds is not None and (kind in ("started", "text") or self.token_deadline is not None):
            self.token_deadline = now + self.token_seconds

    def check(self, cancelled: bool, abandoned: bool) -> Verdict | None:
        now = time.monotonic()
        if abandoned:
            self.abandon_deadline = self.abandon_deadline or now + ABANDON_S
            if now > self.abandon_deadline:
                return Verdict(errors.CancelledError("Closed while the chat engine was busy."))
        if self.render_deadline is not None and now > self.render_deadline:
            return Verdict(chat_bounds.render_timeout_error(self.render_bound), forget=True)
        if self.rendering and cancelled:
            self.cancel_deadline = self.cancel_deadline or now + CANCEL_RENDER_S
            if now > self.cancel_deadline:
                return Verdict(errors.CancelledError("Stopped while the chat template rendered."))
        elif self.generating and cancelled:
            self.cancel_deadline = self.cancel_deadline or now + self.grace
            if now > self.cancel_deadline:
                return Verdict(stopped_error(self.grace))
        if not self.rendering and self.token_deadline is not None and now > self.token_deadline:
            assert self.token_seconds is not None
            return Verdict(hang_error(self.token_seconds, not self.tokens_seen), forget=True)
        return None
