"""Faults in the desktop app (pytest-qt, offscreen): the window closed during every kind of work, the
model switched during an answer, a generator error and a cancel storm in the chat view, a disk that
stops taking conversations. Real engines wherever they are fast enough (the tiny colour classifier, the
tiny genai model, slowed down at the onnxruntime-genai boundary so that an answer lasts long enough)."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from app import paths
from app.storage.conversations import ConversationStore
from app.storage.settings import Settings, save_settings
from engines.chat.loaded import ChatModel
from engines.chat.model import genai, use_fake_genai
from engines.models.manifest import file_entry, list_model_files
from engines.types import DeviceChoice
from tests.reliability.conftest import Recorder
from tests.reliability.genai_faults import ScriptedGenai
from tests.ui.fakes import FakeChatModel, FakeClassifier, loader_for, opener_for
from tests.unit.tiny_models import colour_classifier

CATEGORY = "Faults"
TIMEOUT = 120_000
ENDINGS = {"cancelled", "length", "eos", "context"}


# --- helpers --------------------------------------------------------------------------------------------


def _user_model(source: Path, name: str) -> Path:
    target = paths.user_models_dir() / name
    shutil.copytree(source, target)
    return target


def _user_colours() -> Path:
    """The tiny colour classifier as a library model of the user's (a manifest with sizes and hashes)."""
    folder = colour_classifier(paths.user_models_dir() / "colours", size=16)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"] = [file_entry(folder, rel) for rel in list_model_files(folder)]
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def _photos(folder: Path, count: int, size: tuple[int, int] = (32, 32)) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    first = folder / "p0000.jpg"
    Image.new("RGB", size, (230, 20, 20)).save(first, quality=90)
    for i in range(1, count):
        os.link(first, folder / f"p{i:04d}.jpg")
    return sorted(str(p) for p in folder.iterdir())


@pytest.fixture
def slow_genai() -> Iterator[ScriptedGenai]:
    """The real onnxruntime-genai, 10 ms a token: the tiny model's answers last a few seconds."""
    og = ScriptedGenai(genai(), delay=0.01)
    use_fake_genai(og)
    yield og
    use_fake_genai(None)


def _tiny_loader(folder: Path, choice: DeviceChoice) -> Any:
    return ChatModel.load(folder, choice)


def _short_answers(max_new_tokens: int = 48) -> None:
    """Settings with short answers (the chat view's options come from the settings at start)."""
    save_settings(Settings(chat_options={"max_new_tokens": max_new_tokens}))


def _show(studio: Any, qtbot: Any) -> None:
    """Show the window and let it start its engines (device discovery first), as it does for a user."""
    studio.show()
    qtbot.waitUntil(studio.devices.qthread.isRunning, timeout=TIMEOUT)


def _close(studio: Any, qtbot: Any) -> tuple[bool, float]:
    """Close the window like a user; then the app's shutdown. (stopped, seconds from close to closed)."""
    started = time.monotonic()
    studio.window.close()
    qtbot.waitUntil(lambda: not studio.window.isVisible(), timeout=TIMEOUT)
    seconds = time.monotonic() - started
    return studio.shutdown(), seconds


def _threads_stopped(studio: Any) -> bool:
    return all(not host.qthread.isRunning() for host in studio.hosts)


def _closed_outcome(stopped: bool, studio: Any, extra: str = "") -> str:
    threads = "every engine thread stopped" if stopped and _threads_stopped(studio) else "A THREAD KEPT RUNNING"
    return f"window closed; {threads}{'; ' + extra if extra else ''}"


def _load_chat(studio: Any, qtbot: Any, name: str) -> None:
    studio.settings.chat_model = name
    studio.load_chat_model()
    qtbot.waitUntil(lambda: studio.chat_view.status.info.get("name") == name, timeout=TIMEOUT)


def _stored(studio: Any) -> list[Any]:
    view = studio.chat_view
    return studio.store.messages(view.session.conversation.id) if view.session.conversation is not None else []


def _reopened_messages(conversation_id: int) -> list[Any]:
    store = ConversationStore(paths.data_dir() / "conversations.db")
    try:
        return store.messages(conversation_id)
    finally:
        store.close()


# --- closing the window during every kind of work ------------------------------------------------------


def test_close_during_device_discovery(
    make_studio: Callable[..., Any], qtbot: Any, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    import engines.runtime.devices

    real = engines.runtime.devices.discover
    entered = threading.Event()

    def slow_discover(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        time.sleep(1.5)  # a driver that takes its time to answer
        return real(*args, **kwargs)

    # The devices host asks the facade (engines.discover), the engines ask their module: the facade first, so
    # that what it restores afterwards is the real function.
    monkeypatch.setattr(engines, "discover", slow_discover)
    monkeypatch.setattr(engines.runtime.devices, "discover", slow_discover)
    studio = make_studio()
    _show(studio, qtbot)
    qtbot.waitUntil(entered.is_set, timeout=TIMEOUT)
    stopped, _ = _close(studio, qtbot)
    reliability.record(
        CATEGORY,
        "closing the window during device discovery",
        "closes; the thread is stopped",
        _closed_outcome(stopped, studio),
    )
    assert stopped and _threads_stopped(studio)


def test_close_while_the_classifier_loads(
    make_studio: Callable[..., Any], qtbot: Any, tmp_path: Path, reliability: Recorder
) -> None:
    entered = threading.Event()
    classifier = FakeClassifier()

    def slow_factory(folder: Path, choice: DeviceChoice) -> FakeClassifier:
        entered.set()
        time.sleep(1.5)  # a first NPU compile takes much longer
        return classifier

    _user_colours()
    studio = make_studio(open_classifier=opener_for(slow_factory))
    studio.settings.classifier = "colours"
    _show(studio, qtbot)
    studio.classify_view.classify_paths(_photos(tmp_path / "photos", 5))
    qtbot.waitUntil(entered.is_set, timeout=TIMEOUT)
    stopped, _ = _close(studio, qtbot)
    extra = f"{classifier.calls} photos classified after the load (the batch was cancelled first)"
    reliability.record(
        CATEGORY,
        "closing the window while the classifier loads (then classifies 5 photos)",
        "closes once the load returns; the queued batch does not run",
        _closed_outcome(stopped, studio, extra),
    )
    assert stopped and _threads_stopped(studio) and classifier.calls == 0


def test_close_during_a_classification_batch(
    make_studio: Callable[..., Any], qtbot: Any, tmp_path: Path, reliability: Recorder
) -> None:
    _user_colours()
    studio = make_studio()  # the real ImageClassifier on ONNX Runtime
    studio.settings.classifier = "colours"
    _show(studio, qtbot)
    view = studio.classify_view
    photos = _photos(tmp_path / "photos", 2000, size=(800, 600))
    view.classify_paths(photos)
    qtbot.waitUntil(lambda: len(view.batch.results.results) >= 20, timeout=TIMEOUT)
    stopped, seconds = _close(studio, qtbot)
    done = len(view.batch.results.results)
    reliability.record(
        CATEGORY,
        "closing the window during a batch of 2000 photos",
        "the batch is cancelled, the window closes",
        _closed_outcome(stopped, studio, "the batch stopped part-way" if done < len(photos) else "the batch had ended"),
    )
    assert stopped and _threads_stopped(studio) and done < len(photos)
    assert seconds < 10


def test_close_while_the_chat_model_loads(make_studio: Callable[..., Any], qtbot: Any, reliability: Recorder) -> None:
    entered = threading.Event()

    def slow_loader(folder: Path, choice: DeviceChoice) -> FakeChatModel:
        entered.set()
        time.sleep(1.5)
        return FakeChatModel()

    studio = make_studio(chat_loader=slow_loader)
    _show(studio, qtbot)
    studio.chat.load("fake-model", studio.choice_model.choice())
    qtbot.waitUntil(entered.is_set, timeout=TIMEOUT)
    stopped, _ = _close(studio, qtbot)
    reliability.record(
        CATEGORY,
        "closing the window while the chat model loads",
        "closes; the load is waited for and its thread stopped",
        _closed_outcome(stopped, studio),
    )
    assert stopped and _threads_stopped(studio)


def test_close_mid_answer_keeps_the_partial_answer(
    make_studio: Callable[..., Any], qtbot: Any, tiny_llm: Path, slow_genai: ScriptedGenai, reliability: Recorder
) -> None:
    _user_model(tiny_llm, "tiny")
    studio = make_studio(chat_loader=_tiny_loader)
    _show(studio, qtbot)
    _load_chat(studio, qtbot, "tiny")
    view = studio.chat_view
    assert view.session.send_text("Tell me a long story.")
    qtbot.waitUntil(lambda: len(view.session.answer.text) > 10 and view.session.answer.key is not None, timeout=TIMEOUT)
    answer_id, conversation_id = view.session.answer.key, view.session.conversation.id
    stopped, _ = _close(studio, qtbot)
    answer = next(m for m in _reopened_messages(conversation_id) if m.id == answer_id)
    reliability.record(
        CATEGORY,
        "closing the window mid-answer (chat engine in the app's process)",
        "the answer so far is saved, marked stopped",
        _closed_outcome(stopped, studio, f"the partial answer is saved with stop reason '{answer.stop_reason}'"),
    )
    assert stopped and _threads_stopped(studio)
    assert answer.stop_reason == "cancelled" and answer.text and answer.model == "tiny"


def test_close_mid_answer_ends_the_chat_engine_process(
    make_studio: Callable[..., Any], qtbot: Any, demo_chat_model: Path, reliability: Recorder
) -> None:
    """The app's default: the chat engine runs in a child process (the demo model, ~100 tokens/s)."""
    _user_model(demo_chat_model, "smol")
    studio = make_studio()
    _show(studio, qtbot)
    _load_chat(studio, qtbot, "smol")
    from engines.chat.bounded import BoundedChat

    service = studio.chat.service
    assert isinstance(service, BoundedChat), service  # the app's chat model never runs in its own process
    child = service.engine._process
    view = studio.chat_view
    assert view.session.send_text("Write a long essay about the history of the sea, with many details.")
    qtbot.waitUntil(lambda: len(view.session.answer.text) > 20 and view.session.answer.key is not None, timeout=TIMEOUT)
    answer_id, conversation_id = view.session.answer.key, view.session.conversation.id
    stopped, _ = _close(studio, qtbot)
    child.join(10)
    answer = next(m for m in _reopened_messages(conversation_id) if m.id == answer_id)
    extra = (
        f"the chat engine process {'ended' if not child.is_alive() else 'IS STILL RUNNING'}; "
        f"the partial answer is saved with stop reason '{answer.stop_reason}'"
    )
    reliability.record(
        CATEGORY,
        "closing the window mid-answer (chat engine in its own process)",
        "the child process ends; the answer so far is saved, marked stopped",
        _closed_outcome(stopped, studio, extra),
    )
    assert stopped and _threads_stopped(studio) and not child.is_alive()
    assert answer.stop_reason == "cancelled" and answer.text


def test_close_during_a_model_import(
    make_studio: Callable[..., Any],
    qtbot: Any,
    tmp_path: Path,
    tiny_llm: Path,
    monkeypatch: pytest.MonkeyPatch,
    reliability: Recorder,
) -> None:
    import engines.models.importer as model_import

    real_copy = model_import.copy_files
    copying = threading.Event()

    def slow_copy(files: Any, dest: Path, *, progress: Any = None, cancel: Any = None) -> dict[str, str]:
        def slow_progress(done: int, total: int) -> None:
            copying.set()
            time.sleep(0.005)  # a slow USB stick
            if progress is not None:
                progress(done, total)

        return real_copy(files, dest, progress=slow_progress, cancel=cancel)

    monkeypatch.setattr(model_import, "copy_files", slow_copy)
    monkeypatch.setattr(model_import, "_CHUNK", 64 * 1024)
    source = tmp_path / "big-model"
    shutil.copytree(tiny_llm, source)
    studio = make_studio()
    _show(studio, qtbot)
    studio.models.import_model(str(source), None, {})
    qtbot.waitUntil(copying.is_set, timeout=TIMEOUT)
    stopped, _ = _close(studio, qtbot)
    library = sorted(p.name for p in paths.user_models_dir().iterdir()) if paths.user_models_dir().is_dir() else []
    extra = f"library afterwards: {', '.join(library) or 'empty (no half-imported model)'}"
    reliability.record(
        CATEGORY,
        "closing the window during a model import",
        "the import is cancelled; nothing half-imported stays in the library",
        _closed_outcome(stopped, studio, extra),
    )
    assert stopped and _threads_stopped(studio) and library == []


def test_close_during_a_benchmark(
    make_studio: Callable[..., Any], qtbot: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, reliability: Recorder
) -> None:
    monkeypatch.setenv("NPU_STUDIO_BUNDLED_MODELS", str(tmp_path / "no-bundled-models"))
    _user_colours()
    studio = make_studio()
    _show(studio, qtbot)
    studio.window.show_view("benchmark")  # the view lists the models when it is shown
    view = studio.bench_view
    qtbot.waitUntil(lambda: bool(view.setup.models), timeout=TIMEOUT)
    view.setup.runs_box.setValue(100_000)
    assert view.request_run()
    qtbot.waitUntil(lambda: view.setup.progress.value() > 0, timeout=TIMEOUT)
    stopped, seconds = _close(studio, qtbot)
    reliability.record(
        CATEGORY,
        "closing the window during a benchmark (100 000 runs)",
        "the run is cancelled, the window closes",
        _closed_outcome(stopped, studio, "the run was cancelled" if not view.busy else "the run WAS STILL GOING"),
    )
    assert stopped and _threads_stopped(studio) and not view.busy
    assert seconds < 10


def test_close_during_a_download(
    make_studio: Callable[..., Any],
    qtbot: Any,
    tmp_path: Path,
    tiny_llm: Path,
    monkeypatch: pytest.MonkeyPatch,
    reliability: Recorder,
) -> None:
    import huggingface_hub.constants as hf_constants

    from app.hosts.models import LibraryPlaces
    from tests.unit.fake_hub import serve, write_catalog
    from tests.unit.netguard import loopback_only

    monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", 64 * 1024)
    places = LibraryPlaces(tmp_path / "no-bundled", paths.user_models_dir(), write_catalog(tmp_path))
    monkeypatch.setattr(LibraryPlaces, "default", classmethod(lambda cls: places))
    with serve(tiny_llm) as (hub, endpoint), loopback_only() as blocked:
        hub.pause = 0.01  # a slow link
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        studio = make_studio()
        studio.settings.allow_downloads = True
        _show(studio, qtbot)
        progress: list[int] = []
        studio.models.progress.connect(lambda _what, done, _total: progress.append(done))
        studio.models.download("tiny-chat-cpu", True)
        qtbot.waitUntil(lambda: bool(progress) and progress[-1] > 1_000_000, timeout=TIMEOUT)
        stopped, _ = _close(studio, qtbot)
    library = sorted(p.name for p in paths.user_models_dir().iterdir() if not p.name.startswith("."))
    reliability.record(
        CATEGORY,
        "closing the window during a model download",
        "the download stops (resumable later); no half-downloaded model in the library",
        _closed_outcome(stopped, studio, f"models in the library: {', '.join(library) or 'none'}"),
    )
    assert stopped and _threads_stopped(studio) and not blocked
    assert library == []


def test_close_during_a_model_verification(
    make_studio: Callable[..., Any], qtbot: Any, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    """Re-hashing a model cannot be cancelled: the close waits for it (at most the hosts' shutdown
    timeout; after that the app exits without waiting)."""
    import engines.models.library as library

    real_verify = library.verify_files
    hashing = threading.Event()

    def slow_verify(*args: Any, **kwargs: Any) -> Any:
        hashing.set()
        time.sleep(2.0)  # a few GB of weights
        return real_verify(*args, **kwargs)

    monkeypatch.setattr(library, "verify_files", slow_verify)
    _user_colours()
    studio = make_studio()
    _show(studio, qtbot)
    verified: list[Any] = []
    studio.models.verified.connect(verified.append)
    studio.models.verify("colours")
    qtbot.waitUntil(hashing.is_set, timeout=TIMEOUT)
    started = time.monotonic()
    stopped, _ = _close(studio, qtbot)
    waited = time.monotonic() - started > 1.0
    extra = "the close waited for the re-hash to end" if waited else "the re-hash was stopped"
    reliability.record(
        CATEGORY,
        "closing the window during a model verification (re-hashing)",
        "closes; the re-hash (not cancellable) ends within the shutdown timeout, nothing is changed",
        _closed_outcome(stopped, studio, extra),
    )
    assert stopped and _threads_stopped(studio)
    assert verified == []  # nothing is delivered to a closed window


def test_close_during_a_diagnostics_export(
    make_studio: Callable[..., Any], qtbot: Any, tmp_path: Path, reliability: Recorder
) -> None:
    """The export runs the doctor (devices, a session on every device, a few runs); it is not
    cancellable, so the close waits for it and the zip it writes is whole."""
    import zipfile

    _user_colours()
    studio = make_studio()
    _show(studio, qtbot)
    progress: list[str] = []
    studio.settings_host.diagnostics_progress.connect(progress.append)
    target = tmp_path / "diagnostics.zip"
    studio.settings_host.export_diagnostics(str(target), paths.user_models_dir() / "colours")
    qtbot.waitUntil(lambda: bool(progress), timeout=TIMEOUT)
    stopped, _ = _close(studio, qtbot)
    whole = target.is_file() and zipfile.ZipFile(target).testzip() is None
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "diagnostics.zip"]
    extra = "the export finished first: the zip is whole" if whole else "NO WHOLE ZIP"
    reliability.record(
        CATEGORY,
        "closing the window during a diagnostics export",
        "closes; no half-written zip is left behind",
        _closed_outcome(stopped, studio, extra + ("" if not leftovers else f"; left behind: {leftovers}")),
    )
    assert stopped and _threads_stopped(studio)
    assert whole and leftovers == []


# --- switching model during an answer --------------------------------------------------------------------


def test_switching_the_device_during_an_answer(
    make_studio: Callable[..., Any], qtbot: Any, tiny_llm: Path, slow_genai: ScriptedGenai, reliability: Recorder
) -> None:
    _user_model(tiny_llm, "tiny")
    _short_answers(48)
    studio = make_studio(chat_loader=_tiny_loader)
    _show(studio, qtbot)
    _load_chat(studio, qtbot, "tiny")
    view = studio.chat_view
    loads: list[dict[str, Any]] = []
    studio.chat.model_loaded.connect(loads.append)
    assert view.session.send_text("Tell me about rivers.")
    qtbot.waitUntil(lambda: len(view.session.answer.text) > 10, timeout=TIMEOUT)
    picker = studio.chat_view.header.picker.combo
    picker.setCurrentIndex(picker.findData("cpu"))  # the user picks another device mid-answer
    qtbot.waitUntil(lambda: not view.session.generating and bool(loads), timeout=TIMEOUT)
    first = _stored(studio)[-1]
    assert view.session.send_text("And lakes?")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    second = _stored(studio)[-1]
    outcome = (
        f"the answer being written ended normally ({first.stop_reason}); the model was reloaded for "
        f"{loads[-1]['placement'].requested}; the next answer: {second.stop_reason}"
    )
    reliability.record(
        CATEGORY,
        "switching the device during an answer",
        "the answer ends cleanly and is saved; the model reloads on the new device; the next answer works",
        outcome,
    )
    assert first.role == "assistant" and first.stop_reason in ENDINGS and first.text
    assert second.role == "assistant" and second.stop_reason in ENDINGS and second.text
    assert [m.role for m in _stored(studio)] == ["user", "assistant", "user", "assistant"]


def test_switching_the_chat_model_during_an_answer(
    make_studio: Callable[..., Any], qtbot: Any, tiny_llm: Path, slow_genai: ScriptedGenai, reliability: Recorder
) -> None:
    _user_model(tiny_llm, "tiny-a")
    _user_model(tiny_llm, "tiny-b")
    _short_answers(48)
    studio = make_studio(chat_loader=_tiny_loader)
    _show(studio, qtbot)
    _load_chat(studio, qtbot, "tiny-a")
    view = studio.chat_view
    assert view.session.send_text("Tell me about mountains.")
    qtbot.waitUntil(lambda: len(view.session.answer.text) > 10, timeout=TIMEOUT)
    studio.settings.chat_model = "tiny-b"  # what picking another chat model does
    studio.load_chat_model()
    qtbot.waitUntil(lambda: not view.session.generating and view.status.info.get("name") == "tiny-b", timeout=TIMEOUT)
    first = _stored(studio)[-1]
    assert view.session.send_text("And valleys?")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    second = _stored(studio)[-1]
    outcome = (
        f"the answer being written ended ({first.stop_reason}) and is saved as written by {first.model}; "
        f"the next answer ({second.stop_reason}) is by {second.model}"
    )
    reliability.record(
        CATEGORY,
        "switching the chat model during an answer",
        "the answer ends cleanly, saved with the model that wrote it; the next answer uses the new model",
        outcome,
    )
    assert first.stop_reason in ENDINGS and first.model == "tiny-a"
    assert second.stop_reason in ENDINGS and second.model == "tiny-b"


# --- chat faults in the app ---------------------------------------------------------------------------------


def test_a_generator_error_mid_answer_in_the_app(
    make_studio: Callable[..., Any], qtbot: Any, tiny_llm: Path, reliability: Recorder
) -> None:
    og = ScriptedGenai(genai(), delay=0.005, error=RuntimeError("DML: DXGI_ERROR_DEVICE_REMOVED 887A0005"), fail_at=8)
    use_fake_genai(og)
    try:
        _user_model(tiny_llm, "tiny")
        _short_answers(48)
        studio = make_studio(chat_loader=_tiny_loader)
        _show(studio, qtbot)
        _load_chat(studio, qtbot, "tiny")
        view = studio.chat_view
        assert view.session.send_text("Describe the sky.")
        qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
        failed = _stored(studio)[-1]
        banner = view.banners.messages()
        og.armed = False
        assert view.session.send_text("Try again, please.")
        qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
        after = _stored(studio)[-1]
    finally:
        use_fake_genai(None)
    outcome = (
        f"banner: {banner[0] if banner else '-'}; the partial answer is saved "
        f"({'with its text' if failed.text else 'EMPTY'}, stop reason '{failed.stop_reason}'); "
        f"the next answer: {after.stop_reason}"
    )
    reliability.record(
        CATEGORY,
        "generator error mid-answer in the chat view (GPU removed)",
        "a banner says what happened; the partial answer is kept, marked error; the next message works",
        outcome,
    )
    assert banner and "0x887A0005" in banner[0]
    assert failed.role == "assistant" and failed.stop_reason == "error" and failed.text
    assert after.role == "assistant" and after.stop_reason in ENDINGS - {"cancelled"}


def test_a_cancel_storm_in_the_chat_view(
    make_studio: Callable[..., Any], qtbot: Any, tiny_llm: Path, slow_genai: ScriptedGenai, reliability: Recorder
) -> None:
    """100 messages, each stopped (Esc) after a random moment, some before the answer starts."""
    import random

    slow_genai.delay = 0.002
    _user_model(tiny_llm, "tiny")
    _short_answers(16)
    studio = make_studio(chat_loader=_tiny_loader)
    _show(studio, qtbot)
    _load_chat(studio, qtbot, "tiny")
    view = studio.chat_view
    rng = random.Random(3)
    rounds = 100
    for i in range(rounds):
        assert view.session.send_text(f"message {i}")
        wait = rng.choice([0, 0, 1, 5, 20, 60])
        if wait:
            qtbot.wait(wait)
        view.session.stop()
        qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
        if i % 25 == 24:
            view.new_conversation()
    conversations = studio.store.list()
    messages = [m for c in conversations for m in studio.store.messages(c.id)]
    assistants = [m for m in messages if m.role == "assistant"]
    reasons = sorted({m.stop_reason for m in assistants})
    counts = {r: sum(1 for m in assistants if m.stop_reason == r) for r in reasons}
    reliability.measure("cancel storm (chat view)", f"{rounds} messages: {counts}")
    roles_ok = all(
        [m.role for m in studio.store.messages(c.id)] == ["user", "assistant"] * (c.message_count // 2)
        for c in conversations
    )
    assert view.session.send_text("Still there?")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    last = _stored(studio)[-1]
    reliability.record(
        CATEGORY,
        f"cancel storm in the chat view: {rounds} messages, each stopped at a random moment",
        "every message gets one saved answer (stopped or complete); the view stays usable",
        f"{len(assistants)} answers saved for {rounds} messages, each stopped or complete; transcripts "
        f"{'alternate user/assistant' if roles_ok else 'ARE OUT OF ORDER'}; the next message: {last.stop_reason}",
    )
    assert len(assistants) == rounds and set(reasons) <= ENDINGS and roles_ok
    assert last.stop_reason in ENDINGS - {"cancelled"}


@pytest.mark.allow_warnings("could not (store|save) the answer")
def test_the_disk_stops_taking_conversations_mid_chat(
    make_studio: Callable[..., Any], qtbot: Any, reliability: Recorder
) -> None:
    """The database turns read-only after the question is stored: the answer the user watched being
    written must stay on screen (and be stored once the disk works again), not vanish."""
    model = FakeChatModel(pieces=["An answer ", "the user ", "reads."], delay=0.3)
    studio = make_studio(chat_loader=loader_for(model))
    _show(studio, qtbot)
    studio.chat.load("fake-model", studio.choice_model.choice())
    view = studio.chat_view
    qtbot.waitUntil(lambda: bool(view.status.info), timeout=TIMEOUT)
    conn = studio.store._require_open().conn
    assert view.session.send_text("A question")
    qtbot.waitUntil(lambda: view.session.conversation is not None, timeout=TIMEOUT)  # the question is stored
    conversation = view.session.conversation.id
    # The answer's row is stored when the answer starts: the disk turns read-only while it is written.
    qtbot.waitUntil(lambda: any(m.role == "assistant" for m in studio.store.messages(conversation)), timeout=TIMEOUT)
    conn.execute("PRAGMA query_only = ON")  # the disk turns read-only
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    on_screen = view.transcript.toPlainText()
    banner = view.banners.messages()
    conn.execute("PRAGMA query_only = OFF")
    shown = "An answer the user reads." in on_screen
    reliability.record(
        CATEGORY,
        "the disk turns read-only during an answer",
        "a banner; the answer stays on screen",
        f"banner: {banner[0] if banner else '-'}; the answer "
        f"{'stays on screen' if shown else 'DISAPPEARS from the screen once it ends'}",
    )
    assert banner and "read-only" in banner[0]
    assert shown, "the finished answer vanished from the transcript"
    # Once the disk works again, the kept answer is stored in its place, before the next question.
    assert view.session.send_text("Next question")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    stored = studio.store.messages(view.session.conversation.id)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1].text == "An answer the user reads."


def test_work_queued_before_the_close_starts_no_thread_after_shutdown(
    make_studio: Callable[..., Any], qtbot: Any, reliability: Recorder
) -> None:
    """The window shows, then closes before its first event-loop turn: the start-up step queued by the
    first paint (device discovery) runs after the shutdown."""
    studio = make_studio()
    studio.show()  # queues the engines' start-up for the next event-loop turn
    studio.window.close()
    assert studio.shutdown()
    try:
        qtbot.wait(50)  # the queued start-up runs now
        restarted = [host.qthread.objectName() for host in studio.hosts if host.qthread.isRunning()]
        reliability.record(
            CATEGORY,
            "closing the window before its engines started (queued start-up runs after the shutdown)",
            "no engine thread starts after the shutdown",
            f"threads started after the shutdown: {', '.join(restarted) or 'none'}"
            + (" (nothing stops them: Qt aborts at exit, 'QThread destroyed while running')" if restarted else ""),
        )
        assert restarted == []
    finally:
        for host in studio.hosts:
            host.qthread.quit()
            host.qthread.wait(10_000)
