"""docs/RELIABILITY.md cannot go stale silently: this test runs after every other one (conftest.py moves
it to the end) and compares what they recorded with the committed report."""

from __future__ import annotations

import pytest

from tests.reliability.conftest import complete_run, recorded_cases
from tests.reliability.report import CATEGORIES, PASS, REPORT, Case, cell, differences, parse, render


def test_the_committed_report_lists_every_recorded_case(request: pytest.FixtureRequest) -> None:
    assert REPORT.is_file(), f"{REPORT} is missing: run `pytest tests/reliability` and commit the file it writes"
    committed = parse(REPORT.read_text(encoding="utf-8"))
    assert committed, "the report lists no case"
    recorded = recorded_cases(request.config)
    problems = differences(recorded, committed, complete=complete_run(request.config))
    assert not problems, (
        f"{REPORT.name} does not match what the reliability tests recorded ({len(problems)} differences):\n  "
        + "\n  ".join(problems[:40])
        + "\nRun `pytest tests/reliability` (the whole suite rewrites the report) and commit docs/RELIABILITY.md."
    )


def test_the_report_round_trips_through_markdown() -> None:
    cases = [
        Case("Images", "a | pipe, a \\ backslash", "refused", "npu-studio: error: C:\\x | y\nz", PASS),
        Case("Faults", "second", "works", "ok", "FAIL"),
    ]
    parsed = parse(render(cases))
    assert [(c.category, c.case, c.result) for c in parsed] == [(c.category, c.case, c.result) for c in cases]
    assert [c.outcome for c in parsed] == [cell(c.outcome).replace("\\\\", "\\").replace("\\|", "|") for c in cases]
    assert differences(cases, parsed, complete=True) == []
    assert differences(cases[:1], parsed, complete=True) == ["no longer tried: [Faults] second"]
    assert "changed outcome" in differences([Case("Images", cases[0].case, "refused", "other", PASS)], parsed,
                                            complete=False)[0]  # fmt: skip
    assert all(category in CATEGORIES for category in {c.category for c in cases})
