"""The Benchmark view with its host thread: a short real run (charts, table, history, CSV and PNG
export), cancel, failures, fallbacks and the history list."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject
from PySide6.QtGui import QImage

from app.bench_history import BenchHistory
from app.bench_host import BenchHost, load_bench_view, wire_bench_view
from engines.bench.data import BenchModel, BenchProgress, BenchRun, DeviceResult
from engines.bench.stats import LatencyStats
from engines.errors import CancelledError, StudioError
from engines.types import CancelToken
from tests.unit.tiny_models import colour_classifier
from ui.bench_view import BenchView


class Spy(QObject):
    """Records a worker's signal in the GUI thread (a queued connection, like the view's own)."""

    def __init__(self, signal: Any) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []
        signal.connect(self.record)

    def record(self, *args: Any) -> None:
        self.calls.append(args)


@pytest.fixture
def classifier(tmp_path: Path) -> BenchModel:
    folder = colour_classifier(tmp_path / "colours")
    return BenchModel("colours", "Colours (tiny)", "vision", folder)


@pytest.fixture
def make_view(qtbot: Any, tmp_path: Path) -> Iterator[Callable[..., tuple[BenchView, BenchHost]]]:
    hosts: list[BenchHost] = []

    def make(models: list[BenchModel], runner: Any = None) -> tuple[BenchView, BenchHost]:
        view = BenchView()
        view.resize(1100, 800)
        qtbot.addWidget(view)
        view.show()
        host = BenchHost(history=BenchHistory(tmp_path / "history.jsonl"), runner=runner, models=lambda: models)
        hosts.append(host)
        listed, loaded = Spy(host.models_listed), Spy(host.history_loaded)
        wire_bench_view(view, host)
        load_bench_view(host)
        qtbot.waitUntil(lambda: bool(listed.calls and loaded.calls), timeout=10_000)
        return view, host

    yield make
    for host in hosts:
        assert host.shutdown(), "the bench host thread did not stop"


def result(device: str, p50: float, *, status: str = "ok", fell_back: bool = False) -> DeviceResult:
    if status != "ok":
        return DeviceResult("m", "vision", device, status, reason=f"No {device} here.")
    samples = tuple(p50 + (i % 5) * 0.1 for i in range(20))
    return DeviceResult(
        "m",
        "vision",
        device,
        "ok",
        ran_on="CPU — all 6 nodes" if fell_back else f"{device} — all 6 nodes",
        fell_back=fell_back,
        fallback_reason="DirectML was requested, but ONNX Runtime ran every node on CPU." if fell_back else "",
        latency_unit="ms per image",
        latency=LatencyStats.of(samples),
        samples_ms=samples,
        overhead_ratio=1.01,
        throughput_batch1=1000 / p50,
    )


def a_run(run_id: str, *results: DeviceResult) -> BenchRun:
    return BenchRun(run_id, time.time(), 1.0, {}, {}, tuple(results))


def test_a_short_real_run_fills_table_charts_history_and_exports(
    make_view: Callable[..., tuple[BenchView, BenchHost]], classifier: BenchModel, qtbot: Any, tmp_path: Path
) -> None:
    view, host = make_view([classifier])
    progress = Spy(host.progressed)
    view.runs_box.setValue(10)
    view.batch_box.setValue(2)
    assert view.run_button.isEnabled() and not view.cancel_button.isEnabled()
    assert view.request_run()
    assert view.busy and view.cancel_button.isEnabled() and not view.run_button.isEnabled()
    qtbot.waitUntil(lambda: not view.busy, timeout=120_000)

    run = view.current
    assert run is not None and [r.device for r in run.results] == ["NPU", "GPU", "CPU"]
    assert view.table.rowCount() == 3 and view.table.item(2, 1).text() == "CPU"
    assert view.table.item(0, 2).text().startswith("unavailable: ")  # the reason, not a silent skip
    cpu = run.results[2]
    assert cpu.latency is not None and view.charts.bar_heights == [cpu.latency.p50_ms]
    assert view.charts.curves == ["CPU"] and view.chart_stack.currentWidget() is view.charts
    assert progress.calls and progress.calls[-1][0].fraction == 1.0 and "Finished" in view.stage_label.text()
    assert [r.run_id for r in BenchHistory(tmp_path / "history.jsonl").runs()] == [run.run_id]
    assert view.history_list.count() == 1

    csv_path = tmp_path / "out.csv"
    assert view.export_csv(csv_path) == 3
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert [r["device"] for r in rows] == ["NPU", "GPU", "CPU"] and rows[2]["p50_ms"]
    png_path = tmp_path / "charts.png"
    view.export_png(png_path)
    image = QImage(str(png_path))
    assert not image.isNull() and image.width() > 300 and image.height() > 200


def test_cancel_stops_the_run_and_keeps_nothing(
    make_view: Callable[..., tuple[BenchView, BenchHost]], classifier: BenchModel, qtbot: Any, tmp_path: Path
) -> None:
    def runner(config: Any, *, on_progress: Any, on_result: Any, cancel: CancelToken) -> BenchRun:
        step = 0
        while not cancel.cancelled:
            step += 1
            on_progress(BenchProgress(min(0.9, step / 1000), "colours on the CPU", f"measuring {step}"))
            time.sleep(0.01)
        raise CancelledError("Benchmark cancelled.")

    view, host = make_view([classifier], runner)
    cancelled = Spy(host.cancelled)
    view.request_run()
    qtbot.waitUntil(lambda: view.progress.value() > 0, timeout=10_000)
    view.request_cancel()
    qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    assert cancelled.calls == [()]
    assert "Cancelled" in view.stage_label.text() and view.run_button.isEnabled()
    assert BenchHistory(tmp_path / "history.jsonl").runs() == [] and view.current is None


def test_a_failed_run_is_a_banner_and_the_view_can_run_again(
    make_view: Callable[..., tuple[BenchView, BenchHost]], classifier: BenchModel, qtbot: Any
) -> None:
    def runner(config: Any, **_: Any) -> BenchRun:
        raise StudioError("Model folder not found: /gone.", "Pick a model folder that exists.")

    view, _host = make_view([classifier], runner)
    view.request_run()
    qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    assert view.banners.messages() == ["Model folder not found: /gone."] and view.run_button.isEnabled()


def test_fallbacks_are_labelled_in_table_and_chart(make_view: Callable[..., tuple[BenchView, BenchHost]]) -> None:
    view, _host = make_view([])
    run = a_run("r1", result("NPU", 0, status="unavailable"), result("GPU", 9.0, fell_back=True), result("CPU", 8))
    view.show_run(run)
    assert view.table.item(1, 1).text() == "GPU → CPU"
    assert "fell back: DirectML was requested" in view.table.item(1, 2).text()
    assert view.charts.bar_labels == ["NPU", "GPU → CPU", "CPU"]
    assert view.charts.bar_heights == pytest.approx([9.2, 8.2])
    assert "NPU: unavailable" in view.charts.caption.text()


def test_history_selection_and_clear(make_view: Callable[..., tuple[BenchView, BenchHost]], qtbot: Any) -> None:
    view, _host = make_view([])
    old, new = a_run("old", result("CPU", 20)), a_run("new", result("CPU", 10))
    view.set_history([old, new])
    assert view.current is new and view.history_list.count() == 2  # newest first, shown
    view.history_list.setCurrentRow(1)
    assert view.current is old and view.charts.bar_heights == pytest.approx([20.2])
    view.clear_button.click()
    qtbot.waitUntil(lambda: view.history_list.count() == 0, timeout=10_000)
    assert view.current is None and view.table.rowCount() == 0 and view.chart_stack.currentWidget() is view.empty


def test_nothing_to_run_without_a_model_or_device(
    make_view: Callable[..., tuple[BenchView, BenchHost]], classifier: BenchModel
) -> None:
    view, _host = make_view([classifier])
    for box in view.device_boxes.values():
        box.setChecked(False)
    assert not view.run_button.isEnabled()
    view.device_boxes[next(iter(view.device_boxes))].setChecked(True)
    assert view.run_button.isEnabled()
    empty, _ = make_view([])
    assert not empty.run_button.isEnabled() and "No models to benchmark." in empty.banners.messages()


def test_a_second_build_of_a_model_is_listed_by_what_sets_it_apart(qtbot: Any, tmp_path: Path) -> None:
    plain = BenchModel("efficientnet-lite0", "EfficientNet-Lite0 (ImageNet-1k)", "vision", tmp_path / "a")
    qdq = BenchModel(
        "efficientnet-lite0-qdq",
        "EfficientNet-Lite0 (ImageNet-1k), QDQ for the NPU (uint16 activations, uint8 weights)",
        "vision",
        tmp_path / "b",
    )
    other = BenchModel("my-build", "EfficientNet-Lite0", "vision", tmp_path / "c")
    view = BenchView()
    qtbot.addWidget(view)
    view.set_models([plain, qdq, other])
    texts = [view.model_list.item(row).text() for row in range(view.model_list.count())]
    assert texts == [
        "EfficientNet-Lite0 · classifier",
        "EfficientNet-Lite0 · QDQ for the NPU · classifier",
        "EfficientNet-Lite0 · my-build · classifier",
    ]
    assert view.model_list.item(1).toolTip().startswith(qdq.title)
