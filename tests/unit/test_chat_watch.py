"""The deadlines the chat engine's parent keeps for a request (engines/chat/watch.py), on a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import model_trials, paths
from engines.chat import watch as chat_watch
from engines.chat.watch import Watch
from engines.errors import CancelledError, ModelError
from engines.models import trial


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(chat_watch.time, "monotonic", lambda: now[0])
    return now


def test_an_answer_may_wait_for_each_token_only_so_long(clock: list[float]) -> None:
    watch = Watch("answer", 10.0, 3.0)
    clock[0] += 9.9
    assert watch.check(False, False) is None
    watch.saw(("text", "a"))  # a token came: the bound starts again
    clock[0] += 9.9
    assert watch.check(False, False) is None
    clock[0] += 0.2
    verdict = watch.check(False, False)
    assert verdict is not None and verdict.forget and isinstance(verdict.error, ModelError)
    assert "next token" in verdict.error.message


def test_the_first_token_is_named_as_such(clock: list[float]) -> None:
    watch = Watch("answer", 5.0, 3.0)
    watch.saw(("started", 1))
    clock[0] += 5.1
    verdict = watch.check(False, False)
    assert verdict is not None and "first token" in verdict.error.message


def test_waiting_in_line_behind_other_answers_is_not_a_hang(clock: list[float]) -> None:
    watch = Watch("answer", 5.0, 3.0)
    watch.saw(("event",))  # Waiting: its place in line changed
    clock[0] += 60.0  # other answers take their time
    assert watch.check(False, False) is None
    watch.saw(("started",))  # the engine took it: from now on its tokens are due
    clock[0] += 5.1
    verdict = watch.check(False, False)
    assert verdict is not None and "first token" in verdict.error.message


def test_a_render_has_its_own_bound_and_suspends_the_token_bound(
    clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPU_STUDIO_RENDER_SECONDS", "20")
    watch = Watch("answer", 5.0, 3.0)
    watch.saw(("rendering", 100))
    clock[0] += 10.0  # past the token bound, inside the render's
    assert watch.check(False, False) is None
    watch.saw(("rendered", 100))
    clock[0] += 4.9
    assert watch.check(False, False) is None


def test_stop_kills_after_the_grace_without_forgetting_the_model(clock: list[float]) -> None:
    watch = Watch("answer", None, 3.0)  # a bundled model: no token bound
    clock[0] += 3600.0
    assert watch.check(False, False) is None
    assert watch.check(True, False) is None
    clock[0] += 2.9
    assert watch.check(True, False) is None
    clock[0] += 0.2
    verdict = watch.check(True, False)
    assert verdict is not None and not verdict.forget and isinstance(verdict.error, CancelledError)
    assert "restarted" in verdict.error.message and "kept" in verdict.error.message


def test_a_load_is_not_bounded_per_token_nor_killed_by_stop(clock: list[float]) -> None:
    watch = Watch("load", 5.0, 3.0)  # an NPU compile may take minutes; Stop ends only the trial before it
    clock[0] += 600.0
    assert watch.check(True, False) is None


def test_closing_kills_what_is_still_busy_after_a_second(clock: list[float]) -> None:
    watch = Watch("load", None, 3.0)
    assert watch.check(False, True) is None
    clock[0] += chat_watch.ABANDON_S + 0.1
    verdict = watch.check(False, True)
    assert verdict is not None and isinstance(verdict.error, CancelledError)


def test_only_models_that_are_not_bundled_get_a_token_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NPU_STUDIO_TRIAL_SECONDS", "7")
    model_trials.configure()
    user = tmp_path / "user-llm"
    user.mkdir()
    assert chat_watch.token_bound(str(user)) == trial.time_limit(user) == 7.0
    assert chat_watch.token_bound(str(paths.bundled_models_dir() / "smollm2-135m-instruct")) is None


def test_the_time_limit_grows_with_the_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NPU_STUDIO_TRIAL_SECONDS", raising=False)
    (tmp_path / "weights.bin").write_bytes(b"\0" * (1 << 20))
    assert trial.time_limit(tmp_path) == pytest.approx(trial.DEFAULT_SECONDS + trial.SECONDS_PER_GB / 1024)


def test_the_stop_grace_has_a_test_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPU_STUDIO_STOP_GRACE_SECONDS", raising=False)
    assert chat_watch.stop_grace() == chat_watch.STOP_GRACE_S
    monkeypatch.setenv("NPU_STUDIO_STOP_GRACE_SECONDS", "0.5")
    assert chat_watch.stop_grace() == 0.5
    monkeypatch.setenv("NPU_STUDIO_STOP_GRACE_SECONDS", "soon")
    assert chat_watch.stop_grace() == chat_watch.STOP_GRACE_S
