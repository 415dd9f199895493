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


def test_every_benchmark_prints_the_versions_it_runs_with() -> None:
    scripts = sorted(perf_report.REPO.glob("tests/bench/bench_*.py"))
    assert len(scripts) >= 10
    missing = [p.name for p in scripts if "environment.banner()" not in p.read_text(encoding="utf-8")]
    assert missing == [], "these benchmarks do not say which package versions they measured"


def test_a_recorded_run_carries_its_package_versions(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.bench import environment

    monkeypatch.setattr(perf_report, "DOC", tmp_path / "PERFORMANCE.md")
    monkeypatch.setattr(perf_report, "DATA", tmp_path / "performance.json")
    snapshot = {
        "python": "3.11.7", "packages": {"onnxruntime": "1.32.0", "ml-dtypes": "0.7.0"}, "lock": "linux.txt",
        "matches_lock": False, "differences": ["ml-dtypes is 0.7.0, the lock has 0.6.0"],
    }  # fmt: skip
    monkeypatch.setattr(environment, "snapshot", lambda: snapshot)
    perf_report.record("memory", {f.key: 1.0 for f in BENCHMARKS["memory"].figures}, "cmd")
    data = perf_report.load()
    assert data["memory"]["environment"] == snapshot
    text = (tmp_path / "PERFORMANCE.md").read_text(encoding="utf-8")
    assert "Package versions: Python 3.11.7, onnxruntime 1.32.0, ml-dtypes 0.7.0; **not the locked set** " \
        "(ml-dtypes is 0.7.0, the lock has 0.6.0)." in text


def test_the_banner_warns_when_the_environment_is_not_the_lock(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from installer import lockfile
    from tests.bench import environment

    lock = lockfile.running_lock()
    if lock is None:
        pytest.skip("no lock for this platform")
    main, no_deps = lockfile.read_lock(lock)
    exact = {p.name: p.version for p in [*main, *no_deps]}
    monkeypatch.setattr(lockfile, "installed_versions", lambda: dict(exact))
    assert environment.banner()["matches_lock"]
    assert "WARNING" not in capsys.readouterr().out
    monkeypatch.setattr(lockfile, "installed_versions", lambda: {**exact, "numpy": "1.0.0"})
    snap = environment.banner()
    out = capsys.readouterr().out
    assert not snap["matches_lock"] and "WARNING: this environment is not the locked one" in out
    assert f"numpy is 1.0.0, the lock has {exact['numpy']}" in out
