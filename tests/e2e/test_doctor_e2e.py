"""`npu-studio doctor` on this machine with the real demo models: the CPU passes every check, the NPU
and the GPU are reported unavailable with their reasons, and the report and zip are written."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_doctor_with_the_demo_models(
    demo_classifier: Path, demo_chat_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import run
    from engines.runtime import registration

    registration.reset_registrations()
    code = run(["doctor", "--out", str(tmp_path / "doctor"), "--json"])
    data = json.loads(capsys.readouterr().out)

    assert code == 0
    steps = {(s["check"], s["device"]): s for s in data["steps"]}
    classifier = steps[("classifier", "CPUExecutionProvider")]
    assert classifier["status"] == "ok"
    assert classifier["details"]["model"] == "efficientnet-lite0", "the CPU runs the float model"
    assert classifier["details"]["top1"]["coffee.png"]["label"] == "espresso"
    assert classifier["details"]["median_ms"] > 0
    chat = steps[("chat", "CPUExecutionProvider")]
    assert chat["status"] == "ok" and chat["details"]["answer"]
    assert chat["details"]["stats"]["generated_tokens"] == 8
    assert steps[("strict session", "CPUExecutionProvider")]["status"] == "ok"
    for ep in ("QNNExecutionProvider", "DmlExecutionProvider"):
        assert steps[("device", ep)]["status"] == "unavailable" and steps[("device", ep)]["summary"]
    text = Path(data["files"]["text"]).read_text()
    assert "✘ NPU" in text and "✘ GPU" in text
    with zipfile.ZipFile(data["files"]["zip"]) as bundle:
        assert {"report.txt", "report.json", "versions.json", "devices.json"} <= set(bundle.namelist())
