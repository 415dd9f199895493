"""`npu-studio bench` on the real demo models, as a user runs it (short settings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_bench_json_covers_both_demo_models_on_every_device(demo_classifier: Path, demo_chat_model: Path) -> None:
    args = ["--runs", "20", "--batch", "4", "--chat-tokens", "16", "--chat-rounds", "1", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "app", "bench", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    by_key = {(r["model"], r["device"]): r for r in run["results"]}
    assert set(by_key) == {(m, d) for m in (demo_classifier.name, demo_chat_model.name) for d in ("NPU", "GPU", "CPU")}
    for result in by_key.values():
        assert result["status"] in ("ok", "unavailable", "failed")
        if result["status"] != "ok":
            assert result["reason"], "a device that did not run says why"

    vision = by_key[(demo_classifier.name, "CPU")]
    assert vision["status"] == "ok" and vision["ran_on"].startswith("CPU — all ")
    assert vision["latency"]["count"] == 20 and vision["raw_latency"]["count"] == 20
    assert vision["latency"]["p50_ms"] <= vision["latency"]["p90_ms"] <= vision["latency"]["p99_ms"]
    assert vision["overhead_ratio"] is not None and vision["throughput_batch_n"] > 0 and vision["batch"] == 4
    assert vision["sessions"]["first_status"] == "not-needed"
    assert vision["resources"]["peak_rss_mb"] > 50

    chat = by_key[(demo_chat_model.name, "CPU")]
    assert chat["status"] == "ok" and chat["kind"] == "chat" and not chat["fell_back"]
    numbers = chat["chat"]
    assert numbers["generated_tokens"] == 16 and numbers["decode_tokens"] > 0
    assert numbers["time_to_first_token_ms"] > 0 and numbers["prefill_tokens_per_s"] > 0
    assert numbers["decode_ratio"] is not None and numbers["raw_decode_tokens_per_s"] > 0
    assert not any("differed" in note for note in chat["notes"]), "the raw loop produced the engine's tokens"
    assert "%" in done.stderr  # the progress went to stderr
