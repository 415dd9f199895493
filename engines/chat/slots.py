"""How many answers one loaded chat model makes at once.

Each answer being made has its own onnxruntime-genai generator, and each generator holds a KV cache sized
for the whole context window (~94 MB for the demo model at 2048 tokens; a 3.8B model at 4096 tokens in
fp16 needs ~1.6 GB). The engine steps the answers in turn, a token each (engines/chat/scheduler.py), so a
new request is read at the next step instead of after every answer before it. Answers beyond the slots
wait in line. The slots are what a quarter of the free memory holds, at most `MAX_SLOTS`:
a small model serves four clients at once, a large one on a small laptop one at a time, as before.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["MAX_SLOTS", "SLOTS_VARIABLE", "slots_for"]

log = logging.getLogger(__name__)

MAX_SLOTS = 4
MEMORY_SHARE = 0.25  # of the free memory at load time, for the KV caches of answers made at once
SLOTS_VARIABLE = "NPU_STUDIO_CHAT_SLOTS"  # a fixed number (1: one answer at a time, first come first served)


def slots_for(folder: str | os.PathLike[str]) -> int:
    """Answers the model in `folder` makes at once (1 when its memory needs cannot be told)."""
    fixed = os.environ.get(SLOTS_VARIABLE, "").strip()
    if fixed:
        try:
            return max(1, min(int(fixed), 64))
        except ValueError:
            log.warning("%s=%r is not a whole number; ignored", SLOTS_VARIABLE, fixed)
    from engines.errors import StudioError
    from engines.models.fit import estimate_fit

    try:
        fit = estimate_fit(Path(folder))
    except (StudioError, OSError) as exc:
        log.info("answers at once for %s: 1 (%s)", folder, exc)
        return 1
    if fit.kv_cache_bytes <= 0:
        return 1
    slots = max(1, min(MAX_SLOTS, int(fit.available_bytes * MEMORY_SHARE) // fit.kv_cache_bytes))
    log.info("answers at once for %s: %d (KV cache %d MB each)", Path(folder).name, slots, fit.kv_cache_bytes >> 20)
    return slots
