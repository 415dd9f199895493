"""Opening a session through the compiled-model cache: a hit loads the context model, a miss compiles it
first, a cached entry that no longer loads (an SDK or driver update) is rebuilt once, and when compiling
is not possible the plain model runs, with a notice saying why. The cache itself (keys, entries, the
folder layout) is `engines.runtime.compiled_cache`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engines.errors import StorageError
from engines.runtime.compiled_cache import CacheKey, CacheOutcome, CompiledModelCache, StatusCallback

log = logging.getLogger(__name__)


def load_through_cache(
    cache: CompiledModelCache,
    key: CacheKey,
    source: Path,
    open_model: Callable[[Path], Any],
    compile_into: Callable[[Path], None],
    explain: Callable[[BaseException], str],
    on_progress: StatusCallback | None = None,
) -> tuple[Any, CacheOutcome]:
    """Open a session through the cache: a hit loads the context model; a miss compiles it first; a
    cached entry that no longer loads is deleted and rebuilt once, with a notice. When compiling is
    not possible the plain model is opened (its errors propagate to the caller unchanged).

    `open_model(path)` creates a session (raising native errors); `compile_into(path)` writes a
    context model; `explain(exc)` turns a native error into plain words for the notices."""
    outcome = CacheOutcome(status="miss", ep=key.ep, key=key.digest)
    entry, notice = cache.lookup(key)
    if notice:
        outcome.notices.append(notice)
    if entry is not None:
        started = time.perf_counter()
        try:
            session = open_model(entry.context_model)
        except Exception as exc:
            cache.remove(entry.digest)
            outcome.status = "rebuilt"
            outcome.notices.append(
                f"The compiled model in the cache no longer loads ({explain(exc)}). "
                "It was deleted and is being compiled again."
            )
            log.warning("stale compiled cache entry %s removed: %s", entry.digest, exc)
        else:
            outcome.status = "hit"
            outcome.load_seconds = time.perf_counter() - started
            outcome.first_compile_seconds = entry.compile_seconds
            return session, outcome
    try:
        entry = cache.store(key, source, compile_into, on_progress)
    except StorageError as exc:
        return _open_plain(open_model, source, outcome, exc.user_text())
    except Exception as exc:
        return _open_plain(
            open_model,
            source,
            outcome,
            f"Compiling for the device failed ({explain(exc)}); running the model without a compiled copy.",
        )
    outcome.compile_seconds = entry.compile_seconds
    outcome.first_compile_seconds = entry.compile_seconds
    started = time.perf_counter()
    try:
        session = open_model(entry.context_model)
    except Exception as exc:
        cache.remove(entry.digest)
        return _open_plain(
            open_model,
            source,
            outcome,
            f"The freshly compiled model did not load ({explain(exc)}); it was deleted and the model runs "
            "without a compiled copy.",
        )
    outcome.load_seconds = time.perf_counter() - started
    return session, outcome


def _open_plain(
    open_model: Callable[[Path], Any], source: Path, outcome: CacheOutcome, notice: str
) -> tuple[Any, CacheOutcome]:
    outcome.status = "unavailable"
    outcome.compile_seconds = 0.0
    outcome.notices.append(notice)
    log.warning("compiled cache not used: %s", notice)
    started = time.perf_counter()
    session = open_model(source)
    outcome.load_seconds = time.perf_counter() - started
    return session, outcome
