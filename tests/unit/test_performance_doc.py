"""docs/PERFORMANCE.md lists every figure the benchmarks produce (names and units, not their noisy values)."""

from __future__ import annotations

import pytest

from tests.bench import perf_report
from tests.bench.perf_report import BENCHMARKS, DOC, documented_figures, render


def test_the_committed_document_lists_every_declared_figure_with_its_unit() -> None:
    documented = documented_figures(DOC.read_text(encoding="utf-8"))
    missing = [
        f"{key}: {f.name} ({f.unit})"
        for key, bench in BENCHMARKS.items()
        for f in bench.figures
        if (f.name, f.unit) not in documented
    ]
    assert not missing, (
        "docs/PERFORMANCE.md lacks figures the benchmarks produce; run them with --record and commit it: "
        + "; ".join(missing)
    )


def test_the_document_shows_the_published_anchors() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name, value, _ in perf_report.ANCHORS:
        assert name in text and value in text


def test_a_new_figure_makes_an_old_document_fail() -> None:
    old = render({})
    bench = BENCHMARKS["memory"]
    grown = perf_report.Benchmark(
        bench.title, bench.script, bench.about, (*bench.figures, perf_report.Figure("x", "new figure", "ms"))
    )
    documented = documented_figures(old)
    assert all((f.name, f.unit) in documented for f in bench.figures)
    assert ("new figure", "ms") not in documented
    assert any((f.name, f.unit) not in documented for f in grown.figures)


def test_record_refuses_a_run_that_lacks_or_adds_a_figure(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perf_report, "DOC", tmp_path / "PERFORMANCE.md")
    monkeypatch.setattr(perf_report, "DATA", tmp_path / "performance.json")
    values = {f.key: 1.0 for f in BENCHMARKS["memory"].figures}
    with pytest.raises(ValueError, match="missing \\['total_mb'\\]"):
        perf_report.record("memory", {k: v for k, v in values.items() if k != "total_mb"}, "cmd")
    with pytest.raises(ValueError, match="undeclared \\['surprise'\\]"):
        perf_report.record("memory", {**values, "surprise": 2.0}, "cmd")
    perf_report.record("memory", values, "python tests/bench/bench_memory.py --record")
    text = (tmp_path / "PERFORMANCE.md").read_text(encoding="utf-8")
    assert "| all processes RSS | MB | 1.0 |" in text
    assert "`python tests/bench/bench_memory.py --record`" in text
