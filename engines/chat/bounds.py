"""Bounds on the chat engine's child process (engines/chat/bounded.py) for models that are not ours.

A chat template is code the model folder brings, and onnxruntime-genai renders it natively: a render
that recurses kills the process (SIGSEGV), one that loops never returns (Ctrl+C cannot reach it) and
one that allocates takes all memory. The first load of an untrusted model is tried once
(engines/models/trial.py), but a template can misbehave only on some input (a word in the user's
message, a long history). So every render runs in the child, and:

- time: the child reports the start and the end of each render; the parent kills a child whose render
  takes longer than `render_seconds` (10 s plus one per 20 000 characters of conversation);
- memory: on POSIX the child limits its own address space at each load (`RLIMIT_AS`, soft limit only,
  so the next load may raise it again) to what it has mapped already + twice the weights + twice the
  KV cache the context needs + 1.5 GB; an exploding render then fails with bad_alloc inside the child.
  Windows has no rlimit; there the time bound and the parent's kill are the protection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

from engines.errors import GenerationError, ModelError, StudioError

log = logging.getLogger(__name__)

RENDER_BASE_S = 10.0
RENDER_CHARS_PER_S = 20_000
MEMORY_MARGIN = 3 << 29  # 1.5 GB above the weights and the context


def render_seconds(characters: int) -> float:
    """How long a render of `characters` of conversation may take (NPU_STUDIO_RENDER_SECONDS: the base)."""
    try:
        base = float(os.environ.get("NPU_STUDIO_RENDER_SECONDS") or RENDER_BASE_S)
    except ValueError:
        base = RENDER_BASE_S
    return base + max(0, characters) / RENDER_CHARS_PER_S


def render_timeout_error(seconds: float) -> StudioError:
    return ModelError(
        f"The model's chat template did not finish rendering in {seconds:.0f} s; this model folder is unsafe. "
        "The chat engine was stopped.",
        "Choose another model; use model folders from a source you trust.",
    )


def died_error(code: int | None, rendering: bool) -> StudioError:
    """The child ended without a word: in a render, the template did it."""
    name = f"exit code {code}"
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            name = signal.Signals(-code).name
    if rendering:
        return ModelError(
            f"The model's chat template crashed the chat engine ({name}) while rendering the conversation; "
            "this model folder is unsafe.",
            "Choose another model; use model folders from a source you trust.",
        )
    return GenerationError(
        f"The chat engine stopped unexpectedly ({name}).",
        "Send the message again to restart it; if it keeps happening, choose the CPU.",
    )


def _mapped_bytes() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def _kv_cache_bytes(folder: Path) -> int:
    """The KV cache a full context needs (fp32, a generous guess; 0 when the config does not say)."""
    try:
        model = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))["model"]
        decoder = model["decoder"]
        values = [int(model["context_length"]), int(decoder["num_hidden_layers"]),
                  int(decoder["num_key_value_heads"]), int(decoder["head_size"])]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return 0
    length, layers, heads, size = (min(max(v, 0), 1 << 20) for v in values)
    return 2 * length * layers * heads * size * 4


def _weights_bytes(folder: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            with contextlib.suppress(OSError):
                if path.is_file():
                    total += path.stat().st_size
    return total


def memory_bound(folder: Path) -> int:
    """The address space the child may use with the model in `folder` (NPU_STUDIO_CHAT_MEMORY: fixed)."""
    fixed = os.environ.get("NPU_STUDIO_CHAT_MEMORY")
    if fixed and fixed.isdigit():
        return int(fixed)
    return _mapped_bytes() + 2 * _weights_bytes(folder) + 2 * _kv_cache_bytes(folder) + MEMORY_MARGIN


def limit_memory(folder: Path) -> int | None:
    """Set this process's soft address-space limit for `folder` (POSIX); the bound, or None."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    bound = memory_bound(folder)
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            bound = min(bound, hard)
        resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    except (ValueError, OSError) as exc:
        log.info("could not bound the chat engine's memory: %s", exc)
        return None
    log.info("chat engine memory bound: %.1f GB", bound / (1 << 30))
    return bound


def lift_memory_limit() -> None:
    """Before loading another model: measure what is mapped without the old bound in the way."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def ignore_interrupts() -> Any:
    """Ctrl+C reaches every process of the terminal's group: in the child, the parent decides."""
    with contextlib.suppress(ValueError, OSError, AttributeError):
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    return None
