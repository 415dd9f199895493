"""Reliability suite set-up.

Each test records the cases it tries with the `reliability` fixture: the bad input or fault, what NPU
Studio must do, and what the user saw. A case passes when its test passes. When the whole suite ran
(nothing deselected, every file collected, no --long-soak), the session writes `docs/RELIABILITY.md`
(tests/reliability/report.py); `test_report.py` runs last and fails when the committed file does not
list what the tests recorded.

Also here: `--long-soak` (or NPU_STUDIO_LONG_SOAK=1) for the long soak, and `native_guard`, which
proves that a refusal happened before any native load of the model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.report import CATEGORIES, PASS, REPORT, Case, render

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REPORT_TEST = "test_report.py::test_the_committed_report_lists_every_recorded_case"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long-soak",
        action="store_true",
        default=False,
        help="run the long soak (also NPU_STUDIO_LONG_SOAK=1); the report is not rewritten",
    )


def long_soak(config: pytest.Config) -> bool:
    return bool(config.getoption("--long-soak", default=False)) or os.environ.get("NPU_STUDIO_LONG_SOAK") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "allow_warnings(pattern): WARNING logs matching the regex are expected")
    config.stash[_STATE] = _State()


# --- recording --------------------------------------------------------------------------------------


@dataclass
class _Recorded:
    category: str
    case: str
    expected: str
    outcome: str
    nodeid: str
    passed: bool | None = None


@dataclass
class _State:
    cases: list[_Recorded] = field(default_factory=list)
    collected: set[str] = field(default_factory=set)  # reliability test ids
    finished: set[str] = field(default_factory=set)
    deselected: bool = False
    files: set[str] = field(default_factory=set)  # reliability test files collected
    measurements: dict[str, str] = field(default_factory=dict)
    basetemp: str = ""


_STATE = pytest.StashKey[_State]()


def _is_reliability(item: pytest.Item) -> bool:
    return HERE in Path(str(item.path)).resolve().parents


def shorten(text: str, basetemp: str) -> str:
    """Outcome text without the run's temporary paths (the report must not change from run to run)."""
    text = str(text)
    if basetemp:
        text = re.sub(re.escape(basetemp) + r"[/\\][^/\\\s'\")]+", "<tmp>", text)
    text = re.sub(r"\b\d{8}-\d{6}\b", "<time>", text)  # backup names: settings.json.bad-20260101-120000
    text = re.sub(r"(\.import-[^/\\\s]+-)p\d+(?:s[0-9a-z]+)?-[a-z0-9_]{8}\b", r"\1<random>", text)  # pid, start, random
    text = re.sub(r"(\.import-[^/\\\s]+-)[a-z0-9_]{8}\b", r"\1<random>", text)  # tempfile.mkdtemp suffixes
    return text.replace(str(REPO), "<repo>")


class Recorder:
    """What a test hands to `reliability`: `record(...)` one case; `measure(...)` a number for the summary."""

    def __init__(self, state: _State, nodeid: str) -> None:
        self._state = state
        self._nodeid = nodeid

    def record(self, category: str, case: str, expected: str, outcome: object) -> None:
        if category not in CATEGORIES:
            raise ValueError(f"unknown report category {category!r}")
        if any((c.category, c.case) == (category, case) for c in self._state.cases):
            raise ValueError(f"case recorded twice: [{category}] {case}")
        text = shorten(str(outcome), self._state.basetemp)
        self._state.cases.append(_Recorded(category, case, expected, text, self._nodeid))

    def measure(self, name: str, value: str) -> None:
        self._state.measurements[name] = value


@pytest.fixture
def reliability(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recorder:
    state = request.config.stash[_STATE]
    state.basetemp = str(tmp_path_factory.getbasetemp())
    return Recorder(state, request.node.nodeid)


def recorded_cases(config: pytest.Config) -> list[Case]:
    """Cases of the tests that finished so far (a case of a failed test is a FAIL)."""
    state = config.stash[_STATE]
    return [
        Case(c.category, c.case, c.expected, c.outcome, PASS if c.passed else "FAIL")
        for c in state.cases
        if c.passed is not None
    ]


def complete_run(config: pytest.Config) -> bool:
    """Did this session collect and run every reliability test (so the report may be written)?"""
    state = config.stash[_STATE]
    files = {p.relative_to(HERE).as_posix() for p in HERE.rglob("test_*.py")}
    return (
        not state.deselected
        and files <= state.files
        and bool(state.collected)
        and state.collected <= state.finished | {i for i in state.collected if i.endswith(REPORT_TEST)}
        and not long_soak(config)
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if not _is_reliability(item):
        return report
    state = item.config.stash[_STATE]
    mine = [c for c in state.cases if c.nodeid == item.nodeid]
    if report.when == "call" or (report.when == "setup" and not report.passed):
        for case in mine:
            case.passed = report.passed
        state.finished.add(item.nodeid)
    elif report.when == "teardown" and report.failed:
        for case in mine:
            case.passed = False
    return report


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[_STATE]
    for item in items:
        if _is_reliability(item):
            state.collected.add(item.nodeid)
            state.files.add(Path(str(item.path)).resolve().relative_to(HERE).as_posix())
    # The report check runs after every other test, so that it sees all their cases.
    last = [i for i in items if i.nodeid.endswith(REPORT_TEST)]
    items[:] = [i for i in items if i not in last] + last


def pytest_deselected(items: list[pytest.Item]) -> None:
    if not items:
        return
    config = items[0].config
    if any(_is_reliability(i) for i in items):
        config.stash[_STATE].deselected = True


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash[_STATE]
    if not state.collected or not complete_run(config):
        return
    text = render(recorded_cases(config))
    old = REPORT.read_text(encoding="utf-8") if REPORT.is_file() else ""
    if text != old:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(text, encoding="utf-8")
        state.measurements["report"] = f"{REPORT.relative_to(REPO)} rewritten: review and commit it"
    else:
        state.measurements["report"] = f"{REPORT.relative_to(REPO)} is up to date"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash[_STATE]
    if not state.measurements:
        return
    terminalreporter.section("reliability")
    for name, value in state.measurements.items():
        terminalreporter.write_line(f"{name}: {value}")


# --- CLI runs in one process ------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_cli_logging() -> Generator[None, None, None]:
    """Each in-process `app.cli.run` sets logging up once per process, on the stderr of the moment (a
    capture that is closed by the next test): start every test from the logging it found."""
    import logging

    from app import logs

    root = logging.getLogger()
    handlers, level, configured = list(root.handlers), root.level, logs._configured
    logs._configured = False
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    logs._configured = configured


# --- proving "before any native load" -------------------------------------------------------------


@dataclass
class NativeGuard:
    """Traps on the calls that hand a model to native code; `calls` lists the ones that were reached."""

    calls: list[str] = field(default_factory=list)

    def trap(self, what: str) -> Any:
        def reached(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(f"{what}({args[0] if args else ''})")
            raise RuntimeError(f"{what} reached: the model got to native code")

        return reached


@pytest.fixture
def native_guard(monkeypatch: pytest.MonkeyPatch) -> NativeGuard:
    import onnxruntime
    import onnxruntime_genai

    guard = NativeGuard()
    monkeypatch.setenv("NPU_STUDIO_CHAT_IN_PROCESS", "1")  # `chat --model` opens the model here, where the traps are
    for name in ("InferenceSession", "ModelCompiler", "register_execution_provider_library"):
        monkeypatch.setattr(onnxruntime, name, guard.trap(f"onnxruntime.{name}"), raising=False)
    for name in ("Config", "Model", "register_execution_provider_library"):
        monkeypatch.setattr(onnxruntime_genai, name, guard.trap(f"onnxruntime_genai.{name}"), raising=False)
    return guard
