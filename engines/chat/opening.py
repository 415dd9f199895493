"""Where a chat model runs, and opening it there: the one rule (`runs_in_child`) and `open_service`.

The CLI, the app's chat host and the server all open their model through `open_service` (the facade's
`engines.open_chat`), so the same rule decides for each of them; they only say whether their process
must stay responsive while tokens are generated.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from engines.chat.requests import ChatEvent
from engines.chat.service import MAX_WAITING, ChatService
from engines.types import CancelToken, DeviceChoice

__all__ = ["IN_PROCESS_VARIABLE", "open_service", "runs_in_child"]

IN_PROCESS_VARIABLE = "NPU_STUDIO_CHAT_IN_PROCESS"


def runs_in_child(folder: str | os.PathLike[str], *, responsive: bool) -> bool:
    """THE rule for where a chat model runs: True for the bounded engine child, False for this process.

    1. `NPU_STUDIO_CHAT_IN_PROCESS=1`: this process, always (debugging, and tests that patch the runtime).
    2. A model that is not ours (not under a trusted root, trials on: `trial.bounded`): the child. Its
       chat template and graph are code from elsewhere; there a crash, a hang or a runaway allocation is
       bounded and reported, and this process lives.
    3. `responsive`: the caller's process must keep its other threads running while tokens are generated
       (the desktop app's UI thread; a server's event loop). onnxruntime-genai holds the GIL for a whole
       token (10-25 ms on two cores), so the model runs in the child there, whatever model it is.
    4. Otherwise (the CLI, scripts, benchmarks, with a bundled model): this process, at full speed.
    """
    from engines.models import trial

    if os.environ.get(IN_PROCESS_VARIABLE) == "1":
        return False
    return trial.bounded(folder) or responsive


def open_service(
    folder: str | os.PathLike[str],
    choice: DeviceChoice,
    *,
    responsive: bool = False,
    on_event: Callable[[ChatEvent], None] | None = None,
    cancel: CancelToken | None = None,
    abandon: Callable[[], bool] | None = None,
    loader: Callable[[Path, DeviceChoice], object] | None = None,
    check_memory: bool = True,
    available: frozenset[str] | None = None,
    max_waiting: int = MAX_WAITING,
) -> ChatService:
    """Load the chat model in `folder` on `choice` where `runs_in_child` says, and return its service.
    `on_event` hears `Status` notices while it loads (trying an untrusted model, loading it); `cancel`
    (Stop) and `abandon()` (the app is closing) end a load that is still trying the model. `loader`: a
    test's own model object (always in this process)."""
    from engines.chat.local import LocalChat

    if loader is not None or not runs_in_child(folder, responsive=responsive):
        return LocalChat.load(folder, choice, on_event=on_event, loader=loader, check_memory=check_memory,
                              available=available, max_waiting=max_waiting)  # fmt: skip
    from engines.chat.bounded import BoundedChat

    return BoundedChat.load(folder, choice, on_event=on_event, cancel=cancel, abandon=abandon,
                            max_waiting=max_waiting)  # fmt: skip
