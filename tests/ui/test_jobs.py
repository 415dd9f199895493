"""The generic job runner: a function submitted to a host runs in the host's own thread and reports
started / yielded / returned or errored / finished, in that order, in the GUI thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.jobs import Host, JobContext, Worker
from engines.errors import ModelError

TIMEOUT = 10_000


@pytest.fixture
def host() -> Iterator[Host]:
    made = Host(Worker(), "test-host")
    yield made
    assert made.shutdown()


def test_a_job_runs_in_the_host_thread_and_reports_in_order(host: Host, qtbot: Any) -> None:
    seen: list[tuple[str, object]] = []
    main = threading.current_thread().name

    def work(context: JobContext) -> str:
        for i in range(3):
            context.yield_(i)
        return threading.current_thread().name

    job = host.submit("counting", work)
    job.yielded.connect(lambda v: seen.append(("yielded", v)))
    job.returned.connect(lambda v: seen.append(("returned", v)))
    with qtbot.waitSignals([job.started, job.returned, job.finished], order="strict", timeout=TIMEOUT):
        pass
    assert [kind for kind, _ in seen] == ["yielded", "yielded", "yielded", "returned"]
    assert [v for kind, v in seen if kind == "yielded"] == [0, 1, 2]
    ran_in = seen[-1][1]
    assert ran_in != main, "the function ran in the host's thread, not the GUI thread"


def test_an_error_is_errored_and_reaches_the_host_failed_signal(host: Host, qtbot: Any) -> None:
    def broken(context: JobContext) -> None:
        raise ModelError("The model file is damaged.", "Re-import it.")

    failures: list[object] = []
    errors: list[object] = []
    host.failed.connect(failures.append)
    job = host.submit("breaking", broken)
    job.errored.connect(errors.append)
    with qtbot.waitSignals([job.started, job.errored, job.finished], order="strict", timeout=TIMEOUT):
        pass
    [error] = errors
    assert isinstance(error, ModelError) and error.hint == "Re-import it."
    qtbot.waitUntil(lambda: bool(failures), timeout=TIMEOUT)
    assert failures[0] is error


def test_cancel_reaches_the_running_function(host: Host, qtbot: Any) -> None:
    release = threading.Event()

    def wait_for_cancel(context: JobContext) -> bool:
        release.set()
        for _ in range(1000):
            if context.cancelled:
                return True
            threading.Event().wait(0.005)
        return False

    job = host.submit("waiting", wait_for_cancel)
    assert release.wait(5)
    with qtbot.waitSignal(job.returned, timeout=TIMEOUT) as blocker:
        job.cancel()
    assert blocker.args == [True]

