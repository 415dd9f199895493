"""The real onnxruntime_genai with faults at its boundary: slow tokens, or an error on the N-th token.

Install with `engines.chat.model.use_fake_genai(ScriptedGenai(genai(), ...))`; everything but the
generator's `generate_next_token` is the real module.
"""

from __future__ import annotations

import time
from typing import Any


class ScriptedGenai:
    """`delay` seconds before each token; while `armed`, the `fail_at`-th token (counted over all
    generators) raises `error`."""

    def __init__(self, real: Any, *, delay: float = 0.0, error: BaseException | None = None, fail_at: int = 0) -> None:
        self._real = real
        self.delay = delay
        self.error = error
        self.fail_at = fail_at
        self.armed = error is not None
        self.steps = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def Generator(self, model: Any, params: Any) -> Any:  # the og API's name
        return _ScriptedGenerator(self._real.Generator(model, params), self)


class _ScriptedGenerator:
    def __init__(self, inner: Any, owner: ScriptedGenai) -> None:
        self._inner = inner
        self._owner = owner

    def generate_next_token(self) -> None:
        owner = self._owner
        owner.steps += 1
        if owner.delay:
            time.sleep(owner.delay)
        if owner.armed and owner.error is not None and owner.steps == owner.fail_at:
            raise owner.error
        self._inner.generate_next_token()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
