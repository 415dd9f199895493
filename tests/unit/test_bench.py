"""Benchmark: statistics and ratios, interleaving and lockstep pairing on fake clocks, fallback and
unavailable devices in the results (fake onnxruntime at the runtime boundary), progress, cancel,
history, and the `npu-studio bench` command on a tiny model."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import run as cli
from app.commands.bench import ProgressBar
from app.storage import bench_history
from app.storage.bench_history import BenchHistory
from engines.bench.data import BenchConfig, BenchProgress, BenchRun, parse_devices
from engines.bench.export import CSV_COLUMNS, csv_text
from engines.bench.genai import RawGenaiLoop, chat_numbers, lockstep_answer
from engines.bench.runner import interleave, model_kind, run_benchmark
from engines.bench.stats import LatencyStats, paired_overhead, percentile, rate_ratio, throughput
from engines.errors import CancelledError, StudioError
from engines.types import CancelToken, DeviceType
from tests.unit.fake_ort import CPU, DML, FakeOrt, directml_laptop
from tests.unit.tiny_models import colour_classifier

# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


@given(
    st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=60),
    st.floats(min_value=0, max_value=100),
)
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-9)


def test_latency_stats_of_one_to_a_hundred() -> None:
    stats = LatencyStats.of([float(v) for v in range(100, 0, -1)])
    assert stats.count == 100 and stats.min_ms == 1 and stats.max_ms == 100 and stats.mean_ms == 50.5
    assert (stats.p50_ms, stats.p90_ms) == (50.5, pytest.approx(90.1))
    assert stats.p99_ms == pytest.approx(99.01)


def test_statistics_refuse_empty_input() -> None:
    with pytest.raises(ValueError):
        LatencyStats.of([])
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_paired_overhead_sees_through_noise_that_hits_both() -> None:
    # A slow spell (the 30 and 50 ms pairs) hits engine and raw alike; the engine adds 0.5 ms.
    raw = [10.0, 30.0, 10.0, 50.0, 10.0]
    engine = [r + 0.5 for r in raw]
    overhead, ratio = paired_overhead(engine, raw)
    assert overhead == pytest.approx(0.5)
    assert ratio == pytest.approx((10.0 + 0.5) / 10.0)


def test_paired_overhead_can_be_negative_and_needs_pairs() -> None:
    overhead, ratio = paired_overhead([9.0, 9.0, 9.0], [10.0, 10.0, 10.0])
    assert overhead == -1.0 and ratio == pytest.approx(0.9)
    with pytest.raises(ValueError):
        paired_overhead([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        paired_overhead([], [])


def test_rates_and_ratios() -> None:
    assert throughput(16, 0.5) == 32 and throughput(3, 0) == 0
    assert rate_ratio(97.0, 100.0) == pytest.approx(0.97)
    with pytest.raises(ValueError):
        rate_ratio(1.0, 0.0)


def test_parse_devices() -> None:
    assert parse_devices("all") == (DeviceType.NPU, DeviceType.GPU, DeviceType.CPU)
    assert parse_devices(" CPU, npu,cpu ") == (DeviceType.CPU, DeviceType.NPU)
    with pytest.raises(StudioError, match="Unknown device 'tpu'"):
        parse_devices("cpu,tpu")
    with pytest.raises(StudioError, match="No device"):
        parse_devices(",")


def test_config_validation_lists_every_problem() -> None:
    with pytest.raises(StudioError) as caught:
        BenchConfig(models=(), runs=1, batch=0, chat_prompt="  ")
    text = str(caught.value)
    for words in ("at least one model", "runs must be", "batch must be", "prompt is empty"):
        assert words in text


# --------------------------------------------------------------------------------------------
# Interleaving and lockstep, on fake clocks
# --------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_interleave_alternates_and_times_each_call() -> None:
    clock = FakeClock()
    order: list[str] = []

    def call(name: str, seconds: float) -> Callable[[], None]:
        def fn() -> None:
            order.append(name)
            clock.advance(seconds)

        return fn

    steps: list[int] = []
    times = interleave({"a": call("a", 0.002), "b": call("b", 0.003)}, 3, burst=1, clock=clock, on_step=steps.append)
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert times["a"] == pytest.approx([2.0, 2.0, 2.0]) and times["b"] == pytest.approx([3.0, 3.0, 3.0])
    assert steps == [1, 2, 3]


def test_interleave_stops_when_cancelled() -> None:
    token = CancelToken()
    calls = 0

    def fn() -> None:
        nonlocal calls
        calls += 1
        if calls == 4:
            token.cancel()

    with pytest.raises(CancelledError):
        interleave({"a": fn, "b": fn}, 100, cancel=token)
    assert calls == 4


class FakeGenerator:
    """Yields tokens 10, 11, 12, ... and the end-of-sequence token 2 after `length` tokens."""

    def __init__(self, clock: FakeClock, step_s: float, length: int) -> None:
        self.clock, self.step_s, self.length = clock, step_s, length
        self.tokens: list[int] = []

    def append_tokens(self, tokens: list[int]) -> None:
        self.clock.advance(0.05)

    def is_done(self) -> bool:
        return bool(self.tokens) and self.tokens[-1] == 2

    def generate_next_token(self) -> None:
        self.clock.advance(self.step_s)
        self.tokens.append(2 if len(self.tokens) == self.length else 10 + len(self.tokens))

    def get_next_tokens(self) -> list[int]:
        return [self.tokens[-1]]


class FakeStream:
    """Every third token is half a character: no text until the next token completes it."""

    def decode(self, token: int) -> str:
        return "" if token % 3 == 0 else f"<{token}>"


def fake_og(clock: FakeClock, step_s: float, length: int) -> Any:
    return SimpleNamespace(
        GeneratorParams=lambda model: SimpleNamespace(set_search_options=lambda **kw: None),
        Generator=lambda model, params: FakeGenerator(clock, step_s, length),
    )


class FakeConversation:
    """Answers with the same tokens as FakeGenerator, `step_s` per token, streaming like the engine."""

    def __init__(self, clock: FakeClock, step_s: float, length: int) -> None:
        self.clock, self.step_s, self.length = clock, step_s, length

    def send(self, prompt: str, on_text: Callable[[str], None], cancel: CancelToken | None = None) -> Any:
        stream = FakeStream()
        start = self.clock()
        for i in range(self.length):
            self.clock.advance(self.step_s)
            piece = stream.decode(10 + i)
            if piece:
                on_text(piece)
        return SimpleNamespace(
            prompt_tokens=5,
            generated_tokens=self.length,
            time_to_first_token_s=self.step_s,
            prefill_tokens_per_s=5 / self.step_s,
            decode_tokens_per_s=0.0,
            total_s=self.clock() - start,
        )


def test_lockstep_pairs_engine_and_raw_pieces_token_for_token() -> None:
    clock = FakeClock()
    tokenizer = SimpleNamespace(create_stream=FakeStream)
    raw = RawGenaiLoop(fake_og(clock, 0.012, 9), None, tokenizer, {}, eos_token_ids=(2,), clock=clock)
    answer = lockstep_answer(FakeConversation(clock, 0.010, 9), "hi", raw, [1, 2, 3, 4, 5], clock=clock)
    # Tokens 10..18; 12, 15 and 18 are half characters, so pieces cover 1 or 2 tokens: [10] [11]
    # [12 13] [14] [15 16] [17]. Pieces 2 to 6 are timed, each against the raw loop's same piece.
    assert answer.tokens == [1, 2, 1, 2, 1]
    assert [round(s * 1000, 6) for s in answer.engine_s] == [10, 20, 10, 20, 10]
    assert [round(s * 1000, 6) for s in answer.raw_s] == [12, 24, 12, 24, 12]
    assert answer.raw_ttft_s == pytest.approx(0.05 + 0.012) and answer.same_text
    assert answer.per_token_ms() == pytest.approx([10, 10, 10, 10, 10])
    numbers = chat_numbers([answer, answer])
    assert numbers.decode_tokens == 14
    assert numbers.decode_tokens_per_s == pytest.approx(100.0)
    assert numbers.raw_decode_tokens_per_s == pytest.approx(1000 / 12)
    assert numbers.decode_ratio == pytest.approx(1.2)  # the engine is faster than this raw loop


def test_lockstep_without_raw_times_the_engine_alone() -> None:
    clock = FakeClock()
    answer = lockstep_answer(FakeConversation(clock, 0.010, 9), "hi", None, [], clock=clock)
    assert answer.raw_s == [] and len(answer.engine_s) == 5
    numbers = chat_numbers([answer])
    assert numbers.decode_ratio is None and numbers.raw_decode_tokens_per_s is None


# --------------------------------------------------------------------------------------------
# Runs on a fake onnxruntime: fallback and unavailable devices are in the results
# --------------------------------------------------------------------------------------------


def runnable(fake: FakeOrt) -> FakeOrt:
    """The fake decides placement; a real CPU session underneath does the arithmetic."""
    import onnxruntime

    base: Any = fake.InferenceSession

    class Session(base):  # type: ignore[misc, valid-type]
        def __init__(self, path: str, sess_options: Any = None, providers: Any = None) -> None:
            super().__init__(path, sess_options, providers)
            self.real = onnxruntime.InferenceSession(path, providers=[CPU])

        def get_inputs(self) -> Any:
            return self.real.get_inputs()

        def get_outputs(self) -> Any:
            return self.real.get_outputs()

        def run(self, names: Any, feed: Any) -> Any:
            return self.real.run(names, feed)

        def io_binding(self) -> Any:
            return self.real.io_binding()

        def run_with_iobinding(self, binding: Any) -> None:
            self.real.run_with_iobinding(binding)

    fake.InferenceSession = Session
    fake.OrtValue = onnxruntime.OrtValue  # type: ignore[attr-defined]
    return fake


@pytest.fixture
def use(fake_runtime: Callable[[FakeOrt], FakeOrt]) -> Callable[[FakeOrt], FakeOrt]:
    def install(fake: FakeOrt) -> FakeOrt:
        fake_runtime(runnable(fake))
        return fake

    return install


@pytest.fixture
def classifier(tmp_path: Path) -> Path:
    return colour_classifier(tmp_path / "colours")


def small(models: tuple[Path, ...], devices: str = "all", **kwargs: Any) -> BenchConfig:
    values: dict[str, Any] = {"runs": 6, "batch": 4, "warmup": 1, "chat_tokens": 6, "chat_rounds": 1}
    values.update(kwargs)
    return BenchConfig(models=models, devices=parse_devices(devices), **values)


def test_a_gpu_run_that_fell_back_to_the_cpu_says_so(use: Callable[[FakeOrt], FakeOrt], classifier: Path) -> None:
    use(directml_laptop(supported_ops={CPU: None}))  # DirectML takes no node of this graph
    progress: list[BenchProgress] = []
    streamed: list[Any] = []
    result = run_benchmark(small((classifier,)), on_progress=progress.append, on_result=streamed.append)
    npu, gpu, cpu = result.results
    assert (npu.device, npu.status) == ("NPU", "unavailable") and any(ep in npu.reason for ep in ("QNN", "OpenVINO"))
    assert (gpu.device, gpu.status, gpu.ep) == ("GPU", "ok", DML)
    assert gpu.fell_back and gpu.ran_on.startswith("CPU") and gpu.label == "GPU → CPU"
    assert "ran every node on CPU" in gpu.fallback_reason and gpu.placement["fell_back"] is True
    assert (cpu.status, cpu.fell_back, cpu.label) == ("ok", False, "CPU")
    for r in (gpu, cpu):
        assert r.latency is not None and r.latency.count == 6 and len(r.samples_ms) == 6
        assert r.raw_latency is not None and r.overhead_ratio is not None and r.overhead_ratio > 0
        assert r.throughput_batch1 and r.throughput_batch_n and r.batch == 4
        assert r.resources is not None and r.resources.peak_rss_mb > 0 and r.resources.cpu_percent >= 0
        assert r.sessions is not None and r.sessions.first_status == r.sessions.cached_status == "not-needed"
    assert "nothing to compile" in cpu.sessions.note  # type: ignore[union-attr]
    assert streamed == list(result.results)
    fractions = [p.fraction for p in progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and progress[-1].jobs == 3
    assert {p.stage for p in progress} == {f"colours on the {d}" for d in ("NPU", "GPU", "CPU")}


def test_a_partial_fallback_is_a_split_placement(use: Callable[[FakeOrt], FakeOrt], classifier: Path) -> None:
    use(directml_laptop(supported_ops={CPU: None, DML: {"Conv", "Relu", "Add", "GlobalAveragePool"}}))
    (gpu,) = run_benchmark(small((classifier,), "gpu")).results
    assert gpu.fell_back and gpu.label == "GPU (split)"
    assert gpu.placement["nodes_per_ep"] == {DML: 5, CPU: 1} and "Gemm" in gpu.fallback_reason
    assert any("IOBinding" in note for note in gpu.notes)  # the engine binds I/O where DirectML runs


def test_a_device_that_fails_is_reported_and_the_run_goes_on(
    use: Callable[[FakeOrt], FakeOrt], classifier: Path
) -> None:
    use(directml_laptop(create_error="DXGI_ERROR_DEVICE_REMOVED 0x887A0005"))
    gpu, cpu = run_benchmark(small((classifier,), "gpu,cpu")).results
    assert gpu.status == cpu.status == "failed"
    assert "0x887A0005" in gpu.reason or "removed" in gpu.reason.lower()


def test_a_device_lost_mid_measurement_goes_through_the_one_fallback_path(
    use: Callable[[FakeOrt], FakeOrt], classifier: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engines.runtime.fallback import HEALTH
    from engines.vision.classifier import ImageClassifier

    fake = use(directml_laptop())
    calls = {"n": 0}
    infer = ImageClassifier.infer

    def lose_the_gpu(self: ImageClassifier, batch: Any) -> Any:
        calls["n"] += 1
        if self.placement.primary_ep == DML and calls["n"] > 3:
            raise RuntimeError("DirectML: DXGI_ERROR_DEVICE_REMOVED (0x887A0005)")
        return infer(self, batch)

    monkeypatch.setattr(ImageClassifier, "infer", lose_the_gpu)
    gpu, cpu = run_benchmark(small((classifier,), "gpu,cpu")).results
    assert gpu.status == "failed" and "0x887A0005" in gpu.reason
    assert HEALTH.is_failed(DML), "marked unusable for the rest of the run, as in the CLI and the app"
    assert cpu.status == "ok"
    again = run_benchmark(small((classifier,), "gpu"), report=None).results[0]
    assert again.status == "unavailable" and "failed earlier in this run" in again.reason
    assert fake.sessions


def test_cancel_stops_the_run(use: Callable[[FakeOrt], FakeOrt], classifier: Path) -> None:
    use(directml_laptop())
    token = CancelToken()

    def on_progress(p: BenchProgress) -> None:
        if "measuring" in p.detail:
            token.cancel()

    with pytest.raises(CancelledError):
        run_benchmark(small((classifier,), "cpu", runs=1000), on_progress=on_progress, cancel=token)


def test_results_survive_json_and_csv(use: Callable[[FakeOrt], FakeOrt], classifier: Path) -> None:
    use(directml_laptop(supported_ops={CPU: None}))
    result = run_benchmark(small((classifier,), "npu,gpu"))
    again = BenchRun.from_dict(json.loads(json.dumps(result.as_dict())))
    assert again == result
    lines = csv_text([result, result]).splitlines()
    assert lines[0].split(",") == list(CSV_COLUMNS) and len(lines) == 5
    assert ",GPU,ok," in lines[2] and ",yes," in lines[2] and ",NPU,unavailable," in lines[1]


def test_a_chat_model_on_a_gpu_genai_cannot_use_falls_back_visibly(
    use: Callable[[FakeOrt], FakeOrt], tiny_llm: Path
) -> None:
    use(directml_laptop())  # discovery finds DirectML; this onnxruntime-genai build has no DML
    (gpu,) = run_benchmark(small((tiny_llm,), "gpu", chat_tokens=8)).results
    assert (gpu.status, gpu.kind, gpu.ep) == ("ok", "chat", DML)
    assert gpu.fell_back and gpu.label == "GPU → CPU" and "DirectML" in gpu.fallback_reason
    assert gpu.chat is not None and gpu.chat.decode_ratio is not None and gpu.chat.decode_tokens > 0
    assert gpu.latency_unit == "ms per token" and gpu.throughput_batch_n is None


def test_model_kind_tells_classifiers_chat_models_and_others_apart(classifier: Path, tmp_path: Path) -> None:
    assert model_kind(classifier) == "vision"
    chat = tmp_path / "chat"
    chat.mkdir()
    (chat / "genai_config.json").write_text("{}")
    assert model_kind(chat) == "chat"
    with pytest.raises(StudioError, match="neither an image classifier"):
        model_kind(tmp_path)
    with pytest.raises(StudioError, match="not found"):
        model_kind(tmp_path / "missing")


# --------------------------------------------------------------------------------------------
# History and the command line
# --------------------------------------------------------------------------------------------


def a_run(run_id: str) -> BenchRun:
    return BenchRun(run_id, 1.0, 2.0, {"platform": "x"}, {"runs": 5}, ())


def test_history_appends_reads_and_skips_damaged_lines(tmp_path: Path) -> None:
    history = BenchHistory(tmp_path / "h.jsonl")
    assert history.runs() == []
    history.append(a_run("one"))
    with open(history.path, "a", encoding="utf-8") as handle:
        handle.write('{"run_id": "half\n')
    history.append(a_run("two"))
    assert [r.run_id for r in history.runs()] == ["one", "two"]
    assert history.get("two") == a_run("two") and history.get("nope") is None
    history.clear()
    assert history.runs() == []


def test_history_keeps_the_newest_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_history, "MAX_RUNS", 3)
    history = BenchHistory(tmp_path / "h.jsonl")
    for i in range(5):
        history.append(a_run(str(i)))
    assert [r.run_id for r in history.runs()] == ["2", "3", "4"]


def test_progress_bar_on_a_terminal_and_in_a_log() -> None:
    steps = [BenchProgress(0.0, "m on the CPU"), BenchProgress(0.5, "m on the CPU", "measuring 3/6")]
    log = io.StringIO()
    bar = ProgressBar(log, interactive=False)
    for p in steps:
        bar.update(p)
    assert log.getvalue() == "[  0%] m on the CPU\n"
    tty = io.StringIO()
    bar = ProgressBar(tty, interactive=True, min_interval=0)
    for p in steps:
        bar.update(p)
    bar.close()
    assert "\r[############------------]  50%  m on the CPU measuring 3/6" in tty.getvalue()


def test_cli_json_csv_and_history(classifier: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--model", str(classifier), "--devices", "cpu", "--runs", "5", "--batch", "2"]
    assert cli([*args, "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    (result,) = data["results"]
    assert (result["model"], result["device"], result["status"]) == ("colours", "CPU", "ok")
    assert result["latency"]["count"] == 5 and result["overhead_ratio"] > 0
    assert "colours on the CPU" in captured.err  # progress goes to stderr, not into the JSON
    assert cli([*args, "--csv", "--no-progress"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("run_id,model,kind,device") and len(rows) == 2
    assert len(BenchHistory().runs()) == 2
    assert cli([*args, "--no-save", "--no-progress"]) == 0
    assert "vs raw session.run" in capsys.readouterr().out and len(BenchHistory().runs()) == 2


def test_cli_bad_input_is_one_line(classifier: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["bench", "--model", str(classifier), "--devices", "tpu"]) == 2
    assert "Unknown device 'tpu'" in capsys.readouterr().err
    assert cli(["bench", "--model", str(classifier), "--runs", "2"]) == 2
    assert "runs must be between" in capsys.readouterr().err
    assert cli(["bench", "--model", "no-such-model"]) == 2
    assert "not installed" in capsys.readouterr().err


def test_cli_exit_code_when_no_device_ran(classifier: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["bench", "--model", str(classifier), "--devices", "npu", "--no-progress", "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["status"] == "unavailable" and result["reason"]
