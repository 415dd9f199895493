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

from app.hosts.bench import BenchHost, load_bench_view, wire_bench_view
from app.storage.bench_history import BenchHistory
from engines.bench.data import BenchModel, BenchProgress, BenchRun, DeviceResult
from engines.bench.stats import LatencyStats
from engines.errors import CancelledError, StudioError
from engines.types import CancelToken
from tests.unit.tiny_models import colour_classifier
from ui.bench.view import BenchView


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
    setup, results = view.setup, view.results
    setup.runs_box.setValue(10)
    setup.batch_box.setValue(2)
    assert setup.run_button.isEnabled() and not setup.cancel_button.isEnabled()
    assert view.request_run()
    assert view.busy and setup.cancel_button.isEnabled() and not setup.run_button.isEnabled()
    qtbot.waitUntil(lambda: not view.busy, timeout=120_000)

    run = view.current
    assert run is not None and [r.device for r in run.results] == ["NPU", "GPU", "CPU"]
    table = results.table
    chips = [table.chip(row) for row in range(table.rowCount())]
    assert [c.text if c else "" for c in chips][2].startswith("CPU · ")  # the placement chip: CPU, every node
    assert chips[0] is not None and chips[0].text == "NPU: not on this machine"  # not a silent skip...
    assert chips[0].details == run.results[0].reason  # ...and the reason is its details (the tooltip)
    assert run.results[0].reason in table.item(0, 0).toolTip()
    cpu = run.results[2]
    assert results.charts is not None
    assert cpu.latency is not None and results.charts.bar_heights == [cpu.latency.p50_ms]
    assert results.charts.curves == ["CPU"] and results.chart_stack.currentWidget() is results.charts
    assert progress.calls and progress.calls[-1][0].fraction == 1.0 and "Finished" in setup.stage_label.text()
    assert [r.run_id for r in BenchHistory(tmp_path / "history.jsonl").runs()] == [run.run_id]
    assert results.history_box.count() == 1

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
    qtbot.waitUntil(lambda: view.setup.progress.value() > 0, timeout=10_000)
    view.request_cancel()
    qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    assert cancelled.calls == [()]
    assert "Cancelled" in view.setup.stage_label.text() and view.setup.run_button.isEnabled()
    assert BenchHistory(tmp_path / "history.jsonl").runs() == [] and view.current is None


def test_a_failed_run_is_a_banner_and_the_view_can_run_again(
    make_view: Callable[..., tuple[BenchView, BenchHost]], classifier: BenchModel, qtbot: Any
) -> None:
    def runner(config: Any, **_: Any) -> BenchRun:
        raise StudioError("Model folder not found: /gone.", "Pick a model folder that exists.")

    view, _host = make_view([classifier], runner)
    view.request_run()
    qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    assert view.banners.messages() == ["Model folder not found: /gone."] and view.setup.run_button.isEnabled()


def test_fallbacks_are_labelled_in_table_and_chart(make_view: Callable[..., tuple[BenchView, BenchHost]]) -> None:
    view, _host = make_view([])
    run = a_run("r1", result("NPU", 0, status="unavailable"), result("GPU", 9.0, fell_back=True), result("CPU", 8))
    view.show_run(run)
    table, charts = view.results.table, view.results.charts
    gpu = table.chip(1)
    assert gpu is not None and gpu.text == "Asked GPU → Ran on CPU" and gpu.kind == "warn"
    assert "DirectML was requested" in gpu.details and "DirectML was requested" in table.item(1, 0).toolTip()
    assert charts is not None and charts.bar_labels == ["NPU", "GPU → CPU", "CPU"]
    assert charts.bar_heights == pytest.approx([9.2, 8.2])
    assert "NPU: unavailable" in charts.caption.text()


def test_history_selection_and_clear(make_view: Callable[..., tuple[BenchView, BenchHost]], qtbot: Any) -> None:
    view, _host = make_view([])
    old, new = a_run("old", result("CPU", 20)), a_run("new", result("CPU", 10))
    view.set_history([old, new])
    results = view.results
    assert view.current is new and results.history_box.count() == 2  # newest first, shown
    assert results.history_box.currentData() == "new" and results.history_box.currentText().endswith("(latest)")
    results.history_box.setCurrentIndex(1)
    assert view.current is old and results.charts is not None and results.charts.bar_heights == pytest.approx([20.2])
    results.clear_button.click()
    qtbot.waitUntil(lambda: results.history_box.count() == 0, timeout=10_000)
    assert view.current is None and results.table.rowCount() == 0
    assert results.chart_stack.currentWidget() is results.empty and not results.table.isVisibleTo(view)


def test_nothing_to_run_without_a_model_or_device(
    make_view: Callable[..., tuple[BenchView, BenchHost]], classifier: BenchModel
) -> None:
    view, _host = make_view([classifier])
    for box in view.setup.device_boxes.values():
        box.setChecked(False)
    assert not view.setup.run_button.isEnabled()
    view.setup.device_boxes[next(iter(view.setup.device_boxes))].setChecked(True)
    assert view.setup.run_button.isEnabled()
    empty, _ = make_view([])
    assert not empty.setup.run_button.isEnabled() and "No models to benchmark." in empty.banners.messages()


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
    model_list = view.setup.model_list
    texts = [model_list.item(row).text() for row in range(model_list.count())]
    assert texts == [
        "EfficientNet-Lite0 · classifier",
        "EfficientNet-Lite0 · QDQ for the NPU · classifier",
        "EfficientNet-Lite0 · my-build · classifier",
    ]
    assert qdq.title in model_list.item(1).toolTip()


def chat_result(device: str, per_token: float) -> DeviceResult:
    from engines.bench.data import ChatNumbers, Resources, SessionTimes

    samples = tuple(per_token + (i % 7) * 0.5 for i in range(40))
    return DeviceResult(
        "smollm2-135m-instruct",
        "chat",
        device,
        "ok",
        ran_on="CPU",
        placement={"requested": device, "asked_onnxruntime_for": ["CPUExecutionProvider"],
                   "active_eps": ["CPUExecutionProvider"], "nodes_per_ep": {}, "fell_back": device != "CPU",
                   "reason": "No usable NPU on this machine." if device != "CPU" else ""},
        sessions=SessionTimes(4.35, 3.68),
        latency_unit="ms per token",
        latency=LatencyStats.of(samples),
        samples_ms=samples,
        resources=Resources(31.6, 8, 412.0),
        chat=ChatNumbers(3, 20, 64, 210.0, 95.0, 6.7, decode_ratio=0.99),
    )


def test_each_number_is_written_at_its_own_mark(qtbot: Any) -> None:
    from ui.bench.charts import BenchCharts

    charts = BenchCharts()
    qtbot.addWidget(charts)
    slow, fast = result("CPU", 76.1), result("GPU", 9.0, fell_back=True)
    charts.show_results([fast, slow])
    marks = {text: (x, y) for text, x, y in charts.marks}
    for x, r in enumerate((fast, slow)):
        assert r.latency is not None
        p50, p99 = f"{r.latency.p50_ms:.1f}", f"p99 {r.latency.p99_ms:.1f}"
        assert marks[p50][1] == pytest.approx(r.latency.p50_ms)  # the p50 number at the top of its bar
        assert marks[p99][1] == pytest.approx(r.latency.p99_ms)  # the p99 number at its dot
        assert abs(marks[p50][0] - x) < 0.5 and marks[p99][0] == x  # over its own device


def test_a_chat_model_gets_chat_columns_and_the_chip_says_where_it_ran(qtbot: Any) -> None:
    from ui.bench.table import BenchTable

    table = BenchTable()
    qtbot.addWidget(table)
    table.show_results([chat_result("NPU", 148.0), chat_result("CPU", 140.0)])
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers[0] == "Ran on" and "First token\nms" in headers and "Decode\ntokens/s" in headers
    assert "Batch 1\nimages/s" not in headers
    npu = table.chip(0)
    assert npu is not None and npu.text == "Asked NPU → Ran on CPU" and npu.kind == "warn"
    assert [table.item(1, c).text() for c in (2, 4)] == ["210", "6.7"]
    table.show_results([result("CPU", 8.0)])
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert "Batch 1\nimages/s" in headers and "First token\nms" not in headers


@pytest.mark.parametrize("size", [(1280, 720), (1366, 768)])
def test_the_benchmark_fits_the_window_without_scrolling(make_studio: Any, qtbot: Any, size: tuple[int, int]) -> None:
    """The charts (axes included) and the table's rows above the fold, no column cut, no sideways table."""
    from PySide6.QtWidgets import QApplication

    from ui.common.layout_check import check_layout

    studio = make_studio()
    window = studio.window
    window.showNormal()
    window.resize(*size)
    with qtbot.waitSignals([studio.bench.history_loaded, studio.bench.models_listed], timeout=30_000):
        window.show_view("benchmark")  # what showing it loads comes first; the run below is shown after
    reason = "OpenVINO: OpenVINO 1.8.1 (bundled plugin) is registered but found no Intel NPU. " * 3
    run = a_run(
        "r1",
        DeviceResult("m", "vision", "NPU", "unavailable", reason=reason),
        result("GPU", 80.0, fell_back=True),
        result("CPU", 76.1),
        DeviceResult("smollm2-135m-instruct", "chat", "GPU", "unavailable", reason="DirectML needs Windows."),
        chat_result("NPU", 148.0),
        chat_result("CPU", 140.0),
    )
    view = studio.bench_view
    view.runs = [run]
    view.show_run(run)
    for model in range(view.results.model_box.count()):
        view.results.model_box.setCurrentIndex(model)
        for _ in range(3):
            QApplication.processEvents()
        problems = [str(p) for p in check_layout(window, roomy=True)]
        assert problems == [], f"{view.results.shown_model()} at {size}: {problems}"
        assert view.results.table.rowCount() == 3
