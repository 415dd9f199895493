"""A user chat model whose graph hangs while generating (an ONNX `Loop` with a trip count of 10^12 in the
decoder, tests/fixtures/tiny_llm.py `hanging_copy`), in the app's chat engine: the first load is tried
in a bounded process (refused when it hangs from the first token), a model that hangs only later is
stopped at its token bound, Stop always stops (the engine is killed when it does not answer), and closing
the app during a trial or a hang leaves no process behind. Real child processes, short bounds."""

from __future__ import annotations

import itertools
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from app import model_trials, paths
from app.hosts.chat import ChatHost
from engines.chat.bounded import EngineProcess, Reply
from engines.chat.requests import ChatEvent, ChatRequest, Failed, Finished, Status, Text
from engines.chat.types import ChatMessage, ChatOptions
from engines.child import CHILD_MARK, is_child_command
from engines.errors import CancelledError, ModelError
from engines.types import CancelToken, DeviceChoice
from tests.fixtures.tiny_llm import hanging_copy
from tests.reliability.conftest import Recorder

CATEGORY = "Model code"
CPU = DeviceChoice.parse("cpu")
TRIAL_SECONDS = 6.0  # the trial's time limit, and so the untrusted model's token bound
STOP_GRACE = 1.0
TIMEOUT = 60_000
# The trial's longest prompt is 65 tokens (+2 generated); "hi" is ~30 tokens, so an answer to it reaches
# the window after ~50 tokens; a long message alone is past it, so a restarted engine answers.
HANG_FROM, HANG_UNTIL = 80, 100
LONG_MESSAGE = " ".join(["Please tell me more about the weather in the mountains in spring."] * 8)


@pytest.fixture(autouse=True)
def short_bounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("NPU_STUDIO_TRIAL_SECONDS", str(TRIAL_SECONDS))
    monkeypatch.setenv("NPU_STUDIO_STOP_GRACE_SECONDS", str(STOP_GRACE))
    model_trials.configure()  # as the app does at start: bundled models trusted, verdicts in the cache
    yield


@pytest.fixture
def always_hangs(tiny_llm: Path) -> Path:
    return hanging_copy(tiny_llm, paths.user_models_dir() / "always-hangs")


@pytest.fixture
def hangs_later(tiny_llm: Path) -> Path:
    return hanging_copy(tiny_llm, paths.user_models_dir() / "hangs-later", HANG_FROM, HANG_UNTIL)


def _engine_children(name: str = "") -> list[psutil.Process]:
    """This process's chat engine / trial children (by their name on the command line, lean or spawned)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            command = process.cmdline()
        except psutil.Error:
            continue
        if is_child_command(command) and (not name or CHILD_MARK not in command or name in command):
            found.append(process)
    return found


def _no_children_left(before: set[int], wait: float = 5.0) -> list[int]:
    deadline = time.monotonic() + wait
    while True:
        left = [p.pid for p in _engine_children() if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _load(
    engine: EngineProcess,
    folder: Path,
    events: list[ChatEvent] | None = None,
    cancel: CancelToken | None = None,
    abandon: Callable[[], bool] = lambda: False,
) -> Reply:
    return engine.load(str(folder), CPU, (events.append if events is not None else lambda e: None), cancel, abandon)


def _request(
    engine: EngineProcess, message: tuple[Any, ...], events: list[ChatEvent] | None = None,
    cancel: CancelToken | None = None,
) -> Reply:  # fmt: skip
    return engine.request(message, (events.append if events is not None else lambda e: None), cancel)


def _send(text: str, history: list[tuple[str, str]] | None = None, tokens: int = 200, cid: int = 1) -> tuple[Any, ...]:
    messages = [ChatMessage(role, content) for role, content in history or []]
    options = ChatOptions(max_new_tokens=tokens, do_sample=False)
    return ("answer", ChatRequest.send(messages, text, options=options, conversation=cid))


def _error(outcome: Reply) -> Any:
    assert isinstance(outcome, Failed), outcome
    return outcome.error


# --- the chat engine (EngineProcess), as the chat service drives it -------------------------------------


def test_the_trial_refuses_a_model_that_hangs_from_its_first_token(always_hangs: Path, reliability: Recorder) -> None:
    engine = EngineProcess()
    events: list[ChatEvent] = []
    try:
        started = time.monotonic()
        outcome = _load(engine, always_hangs, events)
        elapsed = time.monotonic() - started
        error = _error(outcome)
        message = error.user_text()
        reliability.record(CATEGORY, "the app's chat engine: a user model whose decoder hangs from its first token",
                           "refused by its trial within the trial's bound, with the reason", message)  # fmt: skip
        assert isinstance(error, ModelError) and f"within {TRIAL_SECONDS:.0f} s" in message
        assert any(isinstance(e, Status) and e.text.startswith("Trying always-hangs") for e in events)
        assert TRIAL_SECONDS - 1 < elapsed < TRIAL_SECONDS + 10
        assert engine.last_load is None  # nothing to load again behind the user's back
        assert not _engine_children("npu-studio-trial"), "the trial process outlived its verdict"
    finally:
        engine.close()


def test_a_model_that_hangs_later_is_stopped_at_its_token_bound(hangs_later: Path, reliability: Recorder) -> None:
    engine = EngineProcess()
    texts: list[ChatEvent] = []
    try:
        assert _load(engine, hangs_later)[0] == "loaded"  # type: ignore[index]  # its trial passed
        child = engine._process
        started = time.monotonic()
        outcome = _request(engine, _send("hi"), texts)
        elapsed = time.monotonic() - started
        error = _error(outcome)
        reliability.record(CATEGORY, "the app's chat engine: a user model that passed its trial, then hangs "
                           "mid-answer", "stopped at its token bound (the trial's time limit); not loaded again "
                           "unasked", error.user_text())  # fmt: skip
        assert isinstance(error, ModelError)
        assert "next token" in error.message and f"within {TRIAL_SECONDS:.0f} s" in error.message
        assert any(isinstance(e, Text) for e in texts), "the answer streamed before the hang"
        assert TRIAL_SECONDS < elapsed < TRIAL_SECONDS + 10
        assert not child.is_alive() and engine.last_load is None
        outcome = _request(engine, _send("hi", tokens=2))  # no model in a new engine: it says so
        assert "No chat model is loaded" in _error(outcome).message
    finally:
        engine.close()


def test_stop_kills_a_hung_engine_within_the_grace_and_the_next_message_reloads(
    hangs_later: Path, reliability: Recorder
) -> None:
    engine = EngineProcess()
    events: list[ChatEvent] = []
    cancel = CancelToken()
    try:
        assert _load(engine, hangs_later)[0] == "loaded"  # type: ignore[index]
        child = engine._process
        stop_at: list[float] = []

        def stop_when_hung() -> None:  # Stop once the answer has streamed and no text came for 0.5 s
            while not any(isinstance(e, Text) for e in events):
                time.sleep(0.05)
            count = -1
            while count != len(events):
                count = len(events)
                time.sleep(0.5)
            stop_at.append(time.monotonic())
            cancel.cancel()

        threading.Thread(target=stop_when_hung, daemon=True).start()
        outcome = _request(engine, _send("hi"), events, cancel)
        killed_after = time.monotonic() - stop_at[0]
        error = _error(outcome)
        partial = "".join(e.text for e in events if isinstance(e, Text))
        reliability.record(CATEGORY, "the app's chat engine: Stop while the model's graph hangs mid-answer",
                           f"the engine is killed within the {STOP_GRACE:.0f} s grace; the answer so "
                           "far is kept; the next message reloads the model with the conversation",
                           error.user_text())  # fmt: skip
        reliability.measure("Stop during a hang: engine killed after (chat engine)", f"{killed_after:.2f} s")
        assert isinstance(error, CancelledError) and "restarted" in error.message
        assert STOP_GRACE <= killed_after < STOP_GRACE + 2
        assert not child.is_alive() and engine.last_load == (str(hangs_later), CPU)
        history = [("user", "hi"), ("assistant", partial)]
        outcome = _request(engine, _send(LONG_MESSAGE, history, tokens=4))
        assert isinstance(outcome, Finished), outcome
        stats = outcome.stats
        assert stats.generated_tokens >= 1 and engine._process is not child
        alone = _request(engine, ("count", LONG_MESSAGE))[1] + _request(engine, ("count", partial))[1]  # type: ignore[index]
        assert stats.prompt_tokens > alone, "the restarted engine was given the conversation so far"
    finally:
        engine.close()


@pytest.mark.parametrize("how", ["stop", "close"])
def test_stop_or_closing_ends_a_trial_at_once(how: str, always_hangs: Path, reliability: Recorder) -> None:
    engine = EngineProcess()
    cancel, closing = CancelToken(), threading.Event()
    events: list[ChatEvent] = []
    try:
        def end_when_trying() -> None:
            while not _engine_children("npu-studio-trial"):
                time.sleep(0.05)
            time.sleep(0.3)
            (cancel.cancel if how == "stop" else closing.set)()

        threading.Thread(target=end_when_trying, daemon=True).start()
        started = time.monotonic()
        outcome = _load(engine, always_hangs, events, cancel, closing.is_set)
        elapsed = time.monotonic() - started
        error = _error(outcome)
        what = "Stop" if how == "stop" else "closing the app"
        case = f"the app's chat engine: {what} while a user chat model is tried"
        reliability.record(CATEGORY, case, "the trial process is killed at once; the load says so", error.user_text())
        assert isinstance(error, CancelledError) and "Stopped trying" in error.message
        assert elapsed < TRIAL_SECONDS - 1, "the trial was waited for"
        assert not _engine_children("npu-studio-trial"), "the trial process outlived the Stop"
    finally:
        engine.close()


# --- the app's chat host -----------------------------------------------------------------------------------


def test_the_chat_host_refuses_a_hanging_model_and_goes_on_with_another(
    qtbot: Any, always_hangs: Path, hangs_later: Path, tiny_llm: Path, reliability: Recorder
) -> None:
    host = ChatHost()
    statuses: list[str] = []
    host.status.connect(statuses.append)
    try:
        with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
            host.load(always_hangs, CPU)
        assert "did not finish loading and running once" in failed.args[0].message
        assert any(s.startswith("Trying always-hangs") for s in statuses)
        with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
            host.load(hangs_later, CPU)
        with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
            host.generate("send", 1, "hi", [], "", {"max_new_tokens": 200})
        message = failed.args[0].user_text()
        reliability.record(CATEGORY, "the app's chat host: a model refused by its trial, then one that hangs "
                           "mid-answer", "errors in the view; another model loads and answers", message)  # fmt: skip
        assert "next token" in message
        with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
            host.load(tiny_llm, CPU)
        with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT) as finished:
            host.generate("send", 2, "hi", [], "", {"max_new_tokens": 3})
        assert finished.args[0]["generated_tokens"] >= 1
    finally:
        assert host.shutdown(), "the chat host did not stop"


def test_choosing_another_model_gives_up_a_running_trial(
    qtbot: Any, always_hangs: Path, tiny_llm: Path
) -> None:
    host = ChatHost()
    failures: list[Any] = []
    host.failed.connect(failures.append)
    try:
        host.load(always_hangs, CPU)
        qtbot.waitUntil(lambda: bool(_engine_children("npu-studio-trial")), timeout=TIMEOUT)
        started = time.monotonic()
        with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT) as loaded:
            host.load(tiny_llm, CPU)
        assert loaded.args[0]["name"] == tiny_llm.name
        assert time.monotonic() - started < TRIAL_SECONDS - 1, "the newer choice waited for the old trial"
        assert failures == [], "a load given up for a newer one is not an error"
    finally:
        assert host.shutdown(), "the chat host did not stop"


def test_stop_on_the_chat_host_ends_a_running_trial(qtbot: Any, always_hangs: Path) -> None:
    host = ChatHost()
    try:
        host.load(always_hangs, CPU)
        qtbot.waitUntil(lambda: bool(_engine_children("npu-studio-trial")), timeout=TIMEOUT)
        started = time.monotonic()
        with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
            host.cancel()  # what the chat view's Stop does
        assert isinstance(failed.args[0], CancelledError) and "Stopped trying" in failed.args[0].message
        assert time.monotonic() - started < 2.0
        qtbot.waitUntil(lambda: not _engine_children("npu-studio-trial"), timeout=5_000)
    finally:
        assert host.shutdown(), "the chat host did not stop"


# --- the app itself ----------------------------------------------------------------------------------------


def _show(studio: Any, qtbot: Any) -> None:
    studio.show()
    qtbot.waitUntil(studio.devices.qthread.isRunning, timeout=TIMEOUT)


def _choose(studio: Any, qtbot: Any, name: str) -> None:
    studio.settings.chat_model = name
    studio.load_chat_model()


def _banner_texts(view: Any) -> list[tuple[str, str]]:
    from ui.chat.state import derive

    return [(b.severity, b.message) for b in derive(view.status.inputs).banners]


def test_the_app_refuses_a_model_that_hangs_and_stays_responsive(
    make_studio: Callable[..., Any], qtbot: Any, always_hangs: Path, tiny_llm: Path, reliability: Recorder
) -> None:
    studio = make_studio()
    _show(studio, qtbot)
    view = studio.chat_view
    shown: list[str] = []
    studio.chat.status.connect(lambda t: shown.append(view.status.inputs.loading) if t else None)
    started = time.monotonic()
    _choose(studio, qtbot, "always-hangs")
    ticks: list[float] = []
    timer_started = time.monotonic()
    while view.status.inputs.model_error is None and time.monotonic() - timer_started < TIMEOUT / 1000:
        qtbot.wait(100)  # the UI thread keeps turning while the model is tried
        ticks.append(time.monotonic())
    elapsed = time.monotonic() - started
    error = view.status.inputs.model_error
    reliability.record(CATEGORY, "the app: choosing a user chat model whose decoder hangs from its first token",
                       "a status while it is tried; refused with the reason; the window responds",
                       getattr(error, "user_text", lambda: str(error))())  # fmt: skip
    assert isinstance(error, ModelError) and "did not finish loading and running once" in error.message
    assert any(text.startswith("Trying always-hangs") for text in shown), shown
    assert elapsed < TRIAL_SECONDS + 10
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 1.0, "the window froze"
    assert not _engine_children("npu-studio-trial")
    shutil.copytree(tiny_llm, paths.user_models_dir() / "tiny")  # and another model loads
    _choose(studio, qtbot, "tiny")
    qtbot.waitUntil(lambda: view.status.info.get("name") == "tiny", timeout=TIMEOUT)


def test_stop_in_the_app_during_a_hang_keeps_the_answer_and_the_next_message_answers(
    make_studio: Callable[..., Any], qtbot: Any, hangs_later: Path, reliability: Recorder
) -> None:
    studio = make_studio()
    _show(studio, qtbot)
    view = studio.chat_view
    _choose(studio, qtbot, "hangs-later")
    qtbot.waitUntil(lambda: view.status.info.get("name") == "hangs-later", timeout=TIMEOUT)
    assert view.session.send_text("hi")
    qtbot.waitUntil(lambda: len(view.session.answer.text) > 0, timeout=TIMEOUT)
    length = -1
    while length != len(view.session.answer.text):  # streaming, until the graph hangs
        length = len(view.session.answer.text)
        qtbot.wait(500)
    partial = view.session.answer.text
    child = studio.chat.service.engine._process
    stopped = time.monotonic()
    view.session.stop()
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    took = time.monotonic() - stopped
    answer = view.session.messages[-1]
    banners = _banner_texts(view)
    reliability.record(CATEGORY, "the app: Stop while the model's graph hangs mid-answer",
                       "the engine is killed within the grace; the answer so far is kept as stopped; the next "
                       "message is answered", banners)  # fmt: skip
    reliability.measure("Stop during a hang: answer ended after (app)", f"{took:.2f} s")
    assert STOP_GRACE <= took < STOP_GRACE + 3
    assert not child.is_alive()
    assert answer.role == "assistant" and answer.stop_reason == "cancelled" and answer.text == partial
    assert any(severity == "info" and "restarted" in text for severity, text in banners), banners
    answers = len([m for m in view.session.messages if m.role == "assistant"])
    assert view.session.send_text(LONG_MESSAGE)
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    stored = [m for m in view.session.messages if m.role == "assistant"]
    assert len(stored) == answers + 1 and stored[-1].stop_reason in ("length", "eos", "context")
    assert stored[-2].text == partial  # the stopped answer is still there
    assert view.status.info.get("name") == "hangs-later" and not view.status.inputs.loading  # loaded again, said so


def test_the_app_stops_a_model_that_hangs_later_and_goes_on_with_another(
    make_studio: Callable[..., Any], qtbot: Any, hangs_later: Path, tiny_llm: Path, reliability: Recorder
) -> None:
    shutil.copytree(tiny_llm, paths.user_models_dir() / "tiny")
    studio = make_studio()
    _show(studio, qtbot)
    view = studio.chat_view
    _choose(studio, qtbot, "hangs-later")
    qtbot.waitUntil(lambda: view.status.info.get("name") == "hangs-later", timeout=TIMEOUT)
    child = studio.chat.service.engine._process
    assert view.session.send_text("hi")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    error = view.status.inputs.answer_error
    banners = _banner_texts(view)
    reliability.record(CATEGORY, "the app: a user model that passed its trial, then hangs mid-answer",
                       "stopped at its token bound; the error and 'not loaded' shown; another model loads and "
                       "answers", banners)  # fmt: skip
    assert isinstance(error, ModelError) and "next token" in error.message
    assert any(severity == "error" and "next token" in text for severity, text in banners), banners
    assert not child.is_alive() and not view.status.info  # no model now, says the chip
    assert view.session.messages[-1].role == "assistant" and view.session.messages[-1].text  # the answer so far is kept
    _choose(studio, qtbot, "tiny")
    qtbot.waitUntil(lambda: view.status.info.get("name") == "tiny", timeout=TIMEOUT)
    assert view.session.send_text("hello")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    assert view.status.inputs.answer_error is None
    assert view.session.messages[-1].stop_reason in ("length", "eos", "context")


@pytest.mark.parametrize("when", ["trial", "hang"])
def test_closing_the_app_during_a_trial_or_a_hang_leaves_no_process(
    when: str, make_studio: Callable[..., Any], qtbot: Any, always_hangs: Path, hangs_later: Path,
    reliability: Recorder,
) -> None:  # fmt: skip
    before = {p.pid for p in _engine_children()}
    studio = make_studio()
    _show(studio, qtbot)
    view = studio.chat_view
    if when == "trial":
        _choose(studio, qtbot, "always-hangs")
        qtbot.waitUntil(lambda: bool(_engine_children("npu-studio-trial")), timeout=TIMEOUT)
    else:
        _choose(studio, qtbot, "hangs-later")
        qtbot.waitUntil(lambda: view.status.info.get("name") == "hangs-later", timeout=TIMEOUT)
        assert view.session.send_text("hi")
        qtbot.waitUntil(lambda: len(view.session.answer.text) > 0, timeout=TIMEOUT)
        qtbot.wait(1500)  # hung by now (~50 tokens at a few ms each)
    started = time.monotonic()
    studio.window.close()
    qtbot.waitUntil(lambda: not studio.window.isVisible(), timeout=TIMEOUT)
    assert studio.shutdown()
    took = time.monotonic() - started
    left = _no_children_left(before)
    what = "while a user chat model is tried" if when == "trial" else "while the chat model's graph hangs"
    reliability.record(CATEGORY, f"closing the app {what}", "closes in seconds; no engine or trial process left",
                       "closed in seconds; no process left" if took < 8 and not left
                       else f"closed in {took:.0f} s; {len(left)} process(es) left")  # fmt: skip
    reliability.measure(f"closing the app {what}", f"{took:.2f} s")
    assert not left and took < 8


# --- the CLI: the same engine, the same bounds -------------------------------------------------------------


def test_the_cli_stops_a_model_that_hangs_mid_answer(
    hangs_later: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    from app.cli import run

    before = {p.pid for p in _engine_children()}
    started = time.monotonic()
    code = run(["chat", "--model", str(hangs_later), "--device", "cpu", "--prompt", "hi", "--max-new-tokens", "200"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.strip()
    reliability.record(CATEGORY, "`chat --model`: a user model that passed its trial, then hangs mid-answer",
                       "stopped at its token bound with the reason; exit code not 0", err)  # fmt: skip
    assert code != 0 and "next token" in err and "Traceback" not in err
    assert elapsed < 2 * TRIAL_SECONDS + 15  # its trial (first use) and the bound
    assert not _no_children_left(before)
