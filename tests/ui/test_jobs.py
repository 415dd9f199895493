"""The generic job runner: a function submitted to a host runs in the host's own thread and reports
started / sent / returned or errored / finished, in that order, in the GUI thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import Signal

from app.hosts.jobs import Host, Job, JobContext, Worker
from engines.errors import ModelError

TIMEOUT = 10_000


@pytest.fixture
def host() -> Iterator[Host]:
    made = Host(Worker(), "test-host")
    yield made
    assert made.shutdown()


class CountingHost(Host):
    counted = Signal(int)


def test_a_job_runs_in_the_host_thread_and_reports_in_order(qtbot: Any) -> None:
    host = CountingHost(Worker(), "counting-host")
    seen: list[tuple[str, object]] = []
    main = threading.current_thread().name

    def work(context: JobContext) -> str:
        for i in range(3):
            context.send(host.counted, i)
        return threading.current_thread().name

    host.counted.connect(lambda v: seen.append(("sent", v)))
    job = host.submit("counting", work)
    job.returned.connect(lambda v: seen.append(("returned", v)))
    with qtbot.waitSignals([job.started, job.returned, job.finished], order="strict", timeout=TIMEOUT):
        pass
    assert host.shutdown()
    assert [kind for kind, _ in seen] == ["sent", "sent", "sent", "returned"]
    assert [v for kind, v in seen if kind == "sent"] == [0, 1, 2]
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
    qtbot.waitUntil(release.is_set, timeout=TIMEOUT)  # the job starts on the next event loop turn
    with qtbot.waitSignal(job.returned, timeout=TIMEOUT) as blocker:
        job.cancel()
    assert blocker.args == [True]



class _EchoHost(Host):
    """A host with one extra operation: one method that submits one function, nothing else."""

    counted = Signal(int)

    def count_to(self, n: int) -> Job:
        def count(context: JobContext) -> int:
            for i in range(1, n + 1):
                context.send(self.counted, i)
            return n

        return self.submit("counting", count)


def test_a_new_operation_is_one_method(qtbot: Any) -> None:
    host = _EchoHost(Worker(), "echo-host")
    try:
        counts: list[int] = []
        host.counted.connect(counts.append)
        job = host.count_to(3)
        signals = [(job.started, "started"), (host.counted, "1"), (host.counted, "2"), (host.counted, "3"),
                   (job.returned, "returned"), (job.finished, "finished")]
        with qtbot.waitSignals(signals, order="strict", timeout=TIMEOUT) as blocker:
            pass
        assert counts == [1, 2, 3]
        assert [list(record.args) for record in blocker.all_signals_and_args][1:5] == [[1], [2], [3], [3]]
    finally:
        assert host.shutdown()


def test_nothing_a_job_sends_is_delivered_after_shutdown(qtbot: Any) -> None:
    host = _EchoHost(Worker(), "echo-host")
    counts: list[int] = []
    host.counted.connect(counts.append)
    release = threading.Event()

    def slow(context: JobContext) -> None:
        release.wait(5)
        context.send(host.counted, 99)

    host.submit("slow", slow)
    qtbot.wait(20)  # the job reaches the host's thread
    release.set()
    assert host.shutdown()
    qtbot.wait(50)
    assert counts == []
