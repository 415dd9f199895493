"""The first load and run of an untrusted model happen in a bounded child process.

A model folder carries code that native libraries execute: ONNX graphs (a `Loop` with a trip count
of 10^12 never returns), and a Jinja chat template that onnxruntime-genai renders natively (a recursive
macro overflows the C++ stack and kills the process with SIGSEGV; nested `range(100000)` loops spin
with Ctrl+C ignored; `range(10**8)` allocates gigabytes then aborts with `bad_alloc`). None of that can
be stopped from Python inside the process that runs it, so before a model is opened for real it is
*tried* once in a child process:

- the child loads the model on the CPU, renders the chat template for a few conversation shapes and
  generates two tokens (a chat model), or creates a session and runs one input (a classifier);
- time: the parent waits at most `seconds`, then kills the child (portable: `Process.kill` is SIGKILL
  on POSIX and TerminateProcess on Windows, no job objects needed);
- memory: on POSIX the child limits itself with `resource.setrlimit(RLIMIT_AS)` before it imports a
  runtime, so a runaway allocation fails inside the child; Windows has no rlimit, there the time bound
  and the parent's kill are the protection (documented limit);
- Ctrl+C / SIGTERM in the parent (which waits in Python, in short polls) kill the child and propagate;
- a child that dies from a signal, runs out of its memory or time, or fails is a `ModelError` that
  names what happened; the caller never dies with it.

Why a trial and not every call in a child: a model that passed runs in-process at full speed, with
the engine's streaming, fallback and cancel unchanged (the app's chat engine already lives in its own
process, engines/chat/bounded.py). The verdict is cached, keyed by the folder's content (the manifest's
and configs' bytes, which hold the file hashes, plus each file's size and, for weights, the
manifest's hash or modification time), in memory and in a small JSON file the app names
(`configure`), so a verified model is tried once, not at every start. Folders under a trusted root
(the bundled demo models) are never tried. A runtime replaced by a test fake is not tried either.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from engines import jsonfile, shared_files
from engines.errors import CancelledError, ModelError, StorageError

log = logging.getLogger(__name__)

CLASSIFIER, CHAT = "classifier", "chat"
DEFAULT_SECONDS = 60.0
SECONDS_PER_GB = 30.0  # loading a larger model legitimately takes longer
BASE_MEMORY = 3 << 29  # 1.5 GB of address space for Python + a runtime (a chat trial peaks at ~0.4 GB)
_SMALL_FILE = 1 << 20  # files this small (configs, manifest, template, labels) are hashed whole
_POLL_S = 0.05
_SAMPLE_CONVERSATIONS: tuple[list[dict[str, str]], ...] = (
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hi"}],
    [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3 + 3? ünïcødé"},
    ],
)

_lock = threading.Lock()
_passed: set[str] = set()
_state: dict[str, Any] = {"trusted": (), "verdicts": None, "enabled": True}


def configure(*, trusted: Iterable[Path] = (), verdicts: Path | None = None, enabled: bool = True) -> None:
    """Folders under `trusted` are never tried; passed verdicts persist in `verdicts` (a JSON file)."""
    with _lock:
        _state["trusted"] = tuple(Path(p).resolve() for p in trusted)
        _state["verdicts"] = verdicts
        _state["enabled"] = enabled and os.environ.get("NPU_STUDIO_MODEL_TRIAL") != "0"


def settings() -> dict[str, Any]:
    """This process's configuration as plain data, for a child process that must judge folders the same way
    (`configure(**settings(), enabled=False)` there: a child tries nothing itself)."""
    with _lock:
        return {"trusted": tuple(_state["trusted"]), "verdicts": _state["verdicts"]}


def _limits(folder: Path) -> tuple[float, int]:
    size = _folder_bytes(folder)
    seconds = float(os.environ.get("NPU_STUDIO_TRIAL_SECONDS") or DEFAULT_SECONDS + SECONDS_PER_GB * size / (1 << 30))
    memory = int(os.environ.get("NPU_STUDIO_TRIAL_MEMORY") or BASE_MEMORY + 3 * size)
    return seconds, memory


def time_limit(folder: str | os.PathLike[str]) -> float:
    """The seconds the trial of `folder` may take (60 s + 30 s per GB; NPU_STUDIO_TRIAL_SECONDS: fixed).
    Also the longest an untrusted model may keep the app's chat engine waiting for one token."""
    return _limits(Path(folder))[0]


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path, _ in _model_files(folder))


def _model_files(folder: Path) -> list[tuple[Path, str]]:
    """(path, relative name) of the folder's files, sorted; a link counts when it stays inside (a Hugging
    Face snapshot's files are all links into its repository's blobs: engines/models/paths.py)."""
    from engines.models.paths import resolve_inside

    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        with contextlib.suppress(OSError, ModelError):
            if path.is_symlink():
                resolve_inside(folder, rel)
            if path.is_file():
                found.append((path, rel))
    return found


def content_key(folder: Path, kind: str) -> str:
    """What the verdict is about: every file's name and size, small files' bytes, large files' manifest
    hash (or modification time when the manifest does not list it)."""
    listed: dict[str, str] = {}
    import hashlib  # here, not at import: the chat engine's child imports this module and never hashes

    digest = hashlib.sha256(f"trial-v1\0{kind}\0".encode())
    from engines.models.manifest import MANIFEST_NAME, read_manifest

    with contextlib.suppress(ModelError):
        manifest = read_manifest(folder, require_schema=False)
        # Not the manifest's bytes (an import rewrites them): what shapes the trial, and the file hashes.
        digest.update(json.dumps(manifest.classifier, sort_keys=True, default=str).encode())
        listed.update((item.path, item.sha256) for item in manifest.files if item.sha256 is not None)
    for path, rel in _model_files(folder):
        if path.name == MANIFEST_NAME:
            continue
        info = path.stat()
        digest.update(f"{rel}\0{info.st_size}\0".encode("utf-8", "surrogateescape"))
        if info.st_size <= _SMALL_FILE:
            digest.update(path.read_bytes())
        else:
            digest.update(f"{listed.get(rel, '')}\0{info.st_mtime_ns}".encode())
    return digest.hexdigest()


def _trusted(folder: Path) -> bool:
    from engines.models.paths import is_within

    return any(is_within(folder, root) for root in _state["trusted"])


def is_trusted(folder: str | os.PathLike[str]) -> bool:
    """Is `folder` under a trusted root (the bundled models)?"""
    return _trusted(Path(folder))


def bounded(folder: str | os.PathLike[str]) -> bool:
    """Should the engine for `folder` run in a bounded child process (an untrusted model, trials on,
    the real runtime)?"""
    with _lock:
        enabled = _state["enabled"] and os.environ.get("NPU_STUDIO_MODEL_TRIAL") != "0"
    return enabled and not _trusted(Path(folder)) and not _faked()


def _faked() -> bool:
    from engines import runtime
    from engines.chat import model as chat_model

    return runtime.is_fake() or chat_model.genai_is_fake()


def _load_verdicts(file: Path | None) -> dict[str, Any]:
    if file is None:
        return {}
    try:
        data = jsonfile.read_object(file, max_bytes=4 << 20)
    except jsonfile.JsonFileError:
        return {}
    passed = data.get("passed")
    return passed if isinstance(passed, dict) else {}


def _save_verdict(file: Path | None, key: str, folder: Path) -> None:
    if file is None:
        return

    def add(data: dict[str, Any]) -> dict[str, Any]:  # under the file's lock: other processes add theirs too
        passed = data.get("passed")
        passed = dict(passed) if isinstance(passed, dict) else {}
        passed[key] = {"folder": str(folder), "when": time.time()}
        if len(passed) > 500:  # keep the newest; an old model tried again costs a few seconds
            newest = sorted(passed.items(), key=lambda kv: kv[1].get("when", 0) if isinstance(kv[1], dict) else 0)
            passed = dict(newest[-500:])
        return {"schema": 1, "passed": passed}

    try:
        shared_files.update_json(file, add, max_bytes=4 << 20)
    except (OSError, StorageError) as exc:  # a read-only cache: the model is tried again next time, nothing worse
        log.info("could not record the trial verdict in %s: %s", file, exc)


def ensure_tried(
    folder: str | os.PathLike[str],
    kind: str,
    *,
    model_file: str = "",
    input_size: tuple[int, int] = (224, 224),
    should_stop: Callable[[], bool] | None = None,
    on_trying: Callable[[], None] | None = None,
) -> None:
    """Try the model in `folder` in a bounded child process unless it is trusted or passed before;
    ModelError when the trial crashes, hangs past its time, runs out of memory or fails. `on_trying()`
    is called when a trial really starts (not for a cached verdict); `should_stop()` true stops it
    (CancelledError, nothing recorded)."""
    root = Path(folder)
    if not bounded(root):
        return
    from engines import child  # (multiprocessing: only where a model may be tried)

    if child.in_child():
        return  # (a child process, such as the app's chat engine or a trial, starts no children)
    with _lock:
        verdicts = _state["verdicts"]
    key = content_key(root, kind)
    with _lock:
        if key in _passed:
            return
    if key in _load_verdicts(verdicts):
        with _lock:
            _passed.add(key)
        return
    seconds, memory = _limits(root)
    if on_trying is not None:
        on_trying()
    run_bounded(_trial, (str(root), kind, model_file, input_size), seconds=seconds, memory=memory,
                what=f"The model in {root}", should_stop=should_stop)
    with _lock:
        _passed.add(key)
    _save_verdict(verdicts, key, root)


# --- the bounded child -----------------------------------------------------------------------------


def run_bounded(
    target: Any,
    args: tuple[Any, ...],
    *,
    seconds: float,
    memory: int,
    what: str,
    should_stop: Callable[[], bool] | None = None,
) -> Any:
    """`target(*args)` in a child (engines/child.py) limited to `seconds` and (POSIX) `memory` bytes of address
    space; its return value, or a ModelError saying how it failed. Ctrl+C / SIGTERM kill the child, and so
    does `should_stop()` turning true (checked at each poll, 50 ms): then CancelledError."""
    from engines import child

    process, parent = child.start(_child_main, (memory, target, args), name="npu-studio-trial", duplex=False)
    deadline = time.monotonic() + seconds
    try:
        while True:
            if parent.poll(_POLL_S):
                try:
                    outcome = parent.recv()
                except (EOFError, OSError):
                    outcome = None
                break
            if not process.is_alive():
                outcome = None
                break
            if should_stop is not None and should_stop():
                raise CancelledError(f"Stopped trying {what[0].lower()}{what[1:]}.")
            if time.monotonic() > deadline:
                raise ModelError(
                    f"{what} did not finish loading and running once within {seconds:.0f} s; it was stopped. "
                    "Its graph or chat template may loop without end.",
                    "Use a model from a source you trust; NPU Studio will not run this one.",
                )
    finally:
        if process.is_alive():
            process.kill()
        process.join(5.0)
        parent.close()
    if outcome is None:
        raise _died(what, process.exitcode, memory)
    status, payload = outcome
    if status == "ok":
        return payload
    if status == "memory":
        raise ModelError(
            f"{what} needed more than {memory / (1 << 30):.1f} GB of memory to load and run once ({payload}).",
            "Its graph or chat template allocates without bound; use a model from a source you trust.",
        )
    raise ModelError(f"{what} failed when loaded and run once: {payload}",
                     "Rebuild or re-download the model; NPU Studio will not run this one.")


def _died(what: str, code: int | None, memory: int) -> ModelError:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        detail = f"it crashed the process that tried it ({name})"
    else:
        detail = f"the process that tried it ended unexpectedly (exit code {code})"
    return ModelError(
        f"{what} cannot be used: {detail}. A hostile or broken graph or chat template does this "
        f"(memory bound {memory / (1 << 30):.1f} GB).",
        "Use a model from a source you trust; NPU Studio will not run this one.",
    )


def _child_main(conn: Any, memory: int, target: Any, args: tuple[Any, ...]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl+C reaches both processes
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        result = target(*args)
        conn.send(("ok", result))
    except MemoryError as exc:
        conn.send(("memory", f"MemoryError {exc}".strip()))
    except Exception as exc:
        # An exception is not what the trial guards against: the engine meets the same error in-process,
        # safely, and explains it in its own words. Only running out of memory counts here.
        text = str(exc).strip().splitlines()[0][:400] if str(exc).strip() else type(exc).__name__
        conn.send(("memory" if "bad_alloc" in text else "ok", f"raised: {text}"))
    finally:
        conn.close()


def _trial(folder: str, kind: str, model_file: str, input_size: tuple[int, int]) -> str:
    if kind == CHAT:
        return _try_chat(folder)
    return _try_classifier(Path(folder) / (model_file or "model.onnx"), input_size)  # (an absolute file wins)


def _try_chat(folder: str) -> str:
    from engines.runtime import import_genai

    og = import_genai()  # after onnxruntime, as the Windows ML genai build needs

    config = og.Config(folder)
    config.clear_providers()  # the CPU: the trial is about the model's code, not a device
    model = og.Model(config)
    tokenizer = og.Tokenizer(model)
    prompt = ""
    for conversation in _SAMPLE_CONVERSATIONS:
        prompt = str(tokenizer.apply_chat_template(json.dumps(conversation), add_generation_prompt=True))
    tokens = tokenizer.encode(prompt)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(tokens) + 2, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(tokens)
    while not generator.is_done():
        generator.generate_next_token()
    return "ok"


def _try_classifier(model_path: Path, input_size: tuple[int, int]) -> str:
    import numpy as np

    from engines.runtime import load

    ort = load("onnxruntime")  # (the one import of each runtime: telemetry off)
    ort.set_default_logger_severity(3)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    feeds = {}
    dtypes = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(uint8)": np.uint8,
              "tensor(int8)": np.int8, "tensor(double)": np.float64, "tensor(int64)": np.int64}
    for item in session.get_inputs():
        dims = list(item.shape)
        fixed = []
        for index, dim in enumerate(dims):
            if isinstance(dim, int) and dim > 0:
                fixed.append(min(dim, 4096))
            elif index == 0:
                fixed.append(1)
            elif index >= len(dims) - 2:
                fixed.append(input_size[index - (len(dims) - 2)])
            else:
                fixed.append(3)
        feeds[item.name] = np.zeros(fixed, dtype=dtypes.get(item.type, np.float32))
    session.run(None, feeds)
    return "ok"
