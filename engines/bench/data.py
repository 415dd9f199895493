"""Benchmark settings and results as plain data, to and from JSON (statistics: `engines.bench.stats`,
CSV: `engines.bench.export`).

Nothing here imports a runtime (or numpy): the UI, the history store and the CLI read these types
without loading ONNX Runtime. The measuring itself is in `engines.bench.runner`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from engines.bench.stats import LatencyStats
from engines.errors import StudioError
from engines.runtime.planning import RANKING
from engines.types import DeviceType, check_thread_count

VISION = "vision"
CHAT = "chat"

OK = "ok"
UNAVAILABLE = "unavailable"
FAILED = "failed"

DEFAULT_PROMPT = "Write a short story about a robot who learns to paint."
ALL_DEVICES = RANKING  # every device type, in the planner's order


def parse_devices(text: str) -> tuple[DeviceType, ...]:
    """`all` or a comma-separated list of `npu`, `gpu`, `cpu` (order kept, duplicates dropped)."""
    key = text.strip().lower()
    if key in {"", "all"}:
        return ALL_DEVICES
    found: list[DeviceType] = []
    for part in (p.strip() for p in key.split(",")):
        if not part:
            continue
        try:
            device = DeviceType(part.upper())
        except ValueError:
            raise StudioError(
                f"Unknown device '{part}' in --devices.", "Use all, or a comma-separated list of npu, gpu and cpu."
            ) from None
        if device not in found:
            found.append(device)
    if not found:
        raise StudioError("No device given in --devices.", "Use all, or a comma-separated list of npu, gpu and cpu.")
    return tuple(found)


@dataclass(frozen=True)
class BenchModel:
    """A model the benchmark can run, as the app lists it."""

    name: str
    title: str
    kind: str  # VISION | CHAT
    folder: Path


@dataclass(frozen=True)
class BenchConfig:
    """What to measure. `runs` is the number of timed calls per path (engine and raw each) at batch 1;
    chat models are timed over `chat_rounds` answers of up to `chat_tokens` tokens (greedy)."""

    models: tuple[Path, ...]
    devices: tuple[DeviceType, ...] = ALL_DEVICES
    runs: int = 200
    batch: int = 8
    warmup: int = 3
    threads: int = 0  # intra-op threads for vision sessions (0: ONNX Runtime's default)
    chat_prompt: str = DEFAULT_PROMPT
    chat_tokens: int = 64
    chat_rounds: int = 3
    compare_raw: bool = True

    def __post_init__(self) -> None:
        problems = []
        if not self.models:
            problems.append("choose at least one model")
        if not self.devices:
            problems.append("choose at least one device")
        if not 5 <= self.runs <= 100_000:
            problems.append("runs must be between 5 and 100000")
        if not 1 <= self.batch <= 256:
            problems.append("batch must be between 1 and 256")
        if not 0 <= self.warmup <= 1000:
            problems.append("warm-up must be between 0 and 1000 calls")
        try:
            check_thread_count(self.threads)
        except StudioError as exc:
            problems.append(exc.message[0].lower() + exc.message[1:].rstrip("."))
        if not 2 <= self.chat_tokens <= 4096:
            problems.append("chat tokens must be between 2 and 4096")
        if not 1 <= self.chat_rounds <= 100:
            problems.append("chat rounds must be between 1 and 100")
        if not self.chat_prompt.strip():
            problems.append("the chat prompt is empty")
        if problems:
            raise StudioError("Invalid benchmark settings: " + "; ".join(problems) + ".")

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["models"] = [str(m) for m in self.models]
        data["devices"] = [d.value for d in self.devices]
        return data


@dataclass(frozen=True)
class BenchProgress:
    """Where a run is: `fraction` of the whole run (0..1), a stage ("efficientnet-lite0 on CPU:
    measuring") that changes a few times per device, and a detail that changes often ("23/50")."""

    fraction: float
    stage: str
    detail: str = ""
    job: int = 0  # 1-based (model, device) job
    jobs: int = 0

    @property
    def text(self) -> str:
        return f"{self.stage} {self.detail}".strip()


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionTimes:
    """Session creation (vision) or model load (chat): the first time and again with what the first
    one left behind (a compiled model in the cache, where the EP compiles)."""

    first_s: float
    cached_s: float
    first_status: str = ""  # compiled-model cache: "miss", "hit", "not-needed", ...
    cached_status: str = ""
    note: str = ""


@dataclass(frozen=True)
class ChatNumbers:
    """Time to first token and prefill: medians over the timed answers. Decode: every token after the
    first, the engine and a raw onnxruntime-genai loop stepping in lockstep (one engine token, one raw
    token, ...), so both see the same machine load; tokens/s at the median time per token."""

    rounds: int
    prompt_tokens: int
    generated_tokens: int  # per answer (the last answer's count; greedy decoding makes them equal)
    time_to_first_token_ms: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    decode_tokens: int = 0  # tokens timed for decode (all answers)
    raw_time_to_first_token_ms: float | None = None
    raw_prefill_tokens_per_s: float | None = None
    raw_decode_tokens_per_s: float | None = None
    decode_ratio: float | None = None  # engine / raw decode tokens/s over the same lockstep tokens (1.0 = same)


@dataclass(frozen=True)
class Resources:
    cpu_percent: float  # process CPU time / wall time over the timed calls (100 = one core busy)
    cpu_count: int
    peak_rss_mb: float  # the process's largest resident set seen while this device was measured

    @property
    def cpu_percent_of_machine(self) -> float:
        return self.cpu_percent / max(1, self.cpu_count)


@dataclass(frozen=True)
class DeviceResult:
    """One model on one device. `status` is ok, unavailable (with the reason) or failed (with the
    error); the placement says where it really ran, fallback included."""

    model: str
    kind: str  # VISION | CHAT
    device: str  # the device type asked for: NPU, GPU or CPU
    status: str
    reason: str = ""
    ep: str = ""  # the execution provider asked for
    ran_on: str = ""
    fell_back: bool = False
    fallback_reason: str = ""
    placement: dict[str, Any] = field(default_factory=dict)
    sessions: SessionTimes | None = None
    latency_unit: str = ""  # "ms per image" | "ms per token"
    latency: LatencyStats | None = None  # the engine at batch 1 (chat: time between streamed tokens)
    samples_ms: tuple[float, ...] = ()  # every timed engine call, for the distribution plot
    raw_latency: LatencyStats | None = None
    overhead_ms: float | None = None  # vision: median of engine - raw over interleaved pairs of calls
    overhead_ratio: float | None = None  # vision: (raw p50 + overhead) / raw p50; 1.0 = no overhead
    throughput_unit: str = ""  # "images/s" | "tokens/s"
    throughput_batch1: float | None = None
    throughput_batch_n: float | None = None
    batch: int = 1
    resources: Resources | None = None
    chat: ChatNumbers | None = None
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def label(self) -> str:
        """The device asked for, and where it went when it fell back: "GPU → CPU", "NPU (split)"."""
        if not self.fell_back or not self.ran_on:
            return self.device
        if self.ran_on.startswith("Split"):
            return f"{self.device} (split)"
        return f"{self.device} → {self.ran_on.split(' —', 1)[0]}"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["samples_ms"] = list(self.samples_ms)
        data["notes"] = list(self.notes)
        if self.resources is not None:
            data["resources"]["cpu_percent_of_machine"] = self.resources.cpu_percent_of_machine
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceResult:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["sessions"] = _build(SessionTimes, data.get("sessions"))
        values["latency"] = _build(LatencyStats, data.get("latency"))
        values["raw_latency"] = _build(LatencyStats, data.get("raw_latency"))
        values["resources"] = _build(Resources, data.get("resources"))
        values["chat"] = _build(ChatNumbers, data.get("chat"))
        values["samples_ms"] = tuple(float(s) for s in data.get("samples_ms", ()))
        values["notes"] = tuple(str(n) for n in data.get("notes", ()))
        values["placement"] = dict(data.get("placement") or {})
        return cls(**values)


def _build(cls: Any, data: Any) -> Any:
    if not isinstance(data, Mapping):
        return None
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class BenchRun:
    run_id: str
    started: float  # epoch seconds
    seconds: float
    machine: dict[str, Any]
    settings: dict[str, Any]
    results: tuple[DeviceResult, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "started": self.started,
            "seconds": self.seconds,
            "machine": dict(self.machine),
            "settings": dict(self.settings),
            "results": [r.as_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchRun:
        return cls(
            run_id=str(data["run_id"]),
            started=float(data["started"]),
            seconds=float(data.get("seconds", 0.0)),
            machine=dict(data.get("machine") or {}),
            settings=dict(data.get("settings") or {}),
            results=tuple(DeviceResult.from_dict(r) for r in data.get("results", ())),
        )

    def models(self) -> list[str]:
        return list(dict.fromkeys(r.model for r in self.results))

    def for_model(self, model: str) -> list[DeviceResult]:
        return [r for r in self.results if r.model == model]


