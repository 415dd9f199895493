"""Models other local-AI tools keep, made of copies of the real demo chat model (tests/fixtures/machine_home.py:
Foundry Local's cache with a CPU, a QNN and an OpenVINO NPU copy, the Hugging Face cache, AI Toolkit's folder
and the one its VS Code setting moves it to): found by `npu-studio models scan`, added by reference, chatting
from where they are, and refused once a file that steers them changes. Through the CLI, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engines.models.here import machine_devices
from engines.models.manifest import read_manifest
from engines.types import DeviceType
from tests.fixtures.machine_home import build_home

pytestmark = pytest.mark.e2e

QUESTION = "What is the capital of France? Answer in one sentence."
MOVED_AWAY = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")


def test_copies_of_the_demo_chat_model_are_found_added_by_reference_chat_and_are_refused_once_changed(
    demo_chat_model: Path, tmp_path: Path
) -> None:
    machine = build_home(tmp_path / "home", demo_chat_model)
    env = {k: v for k, v in os.environ.items() if k not in MOVED_AWAY}
    env.update(HOME=str(machine.home), USERPROFILE=str(machine.home), APPDATA=str(machine.home / "AppData" / "Roaming"))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=300, env=env
        )

    scanned = cli("models", "scan", "--no-foundry", "--json")
    assert scanned.returncode == 0, scanned.stderr
    report = json.loads(scanned.stdout)
    found = {Path(m["folder"]): m for m in report["models"]}
    assert set(found) == machine.real and report["loaded_models"] == 0
    demo = {f.path: f for f in read_manifest(demo_chat_model).files}
    qnn = found[machine.foundry_qnn]
    assert (qnn["name"], qnn["tool"], qnn["target"]) == ("smollm2-135m-instruct-qnn-npu:1", "Foundry Local", "QNN NPU")
    assert qnn["precision"] == "int4" and qnn["context_length"] == 8192
    assert qnn["size_bytes"] == sum(p.stat().st_size for p in machine.foundry_qnn.iterdir())
    qnn_here = any(
        ep == "QNNExecutionProvider" and kind == DeviceType.NPU for ep, kind in machine_devices().chat.usable
    )
    if not qnn_here:  # this Linux machine
        assert qnn["verdict"] == "needs" and qnn["runs_here"].startswith("needs the Qualcomm NPU: not on this machine")
    assert found[machine.aitk_moved]["runs_here"] == "runs here on the CPU"

    added = cli("models", "add", str(machine.foundry_qnn), "--name", "smollm-qnn", "--json")
    assert added.returncode == 0, added.stderr
    entry = json.loads(added.stdout)
    assert entry["reference"] == str(machine.foundry_qnn) and entry["origin"] == "by reference"
    hashes = {f["path"]: f["sha256"] for f in entry["files"]}
    assert hashes["model.onnx.data"] == demo["model.onnx.data"].sha256  # the demo's weights, not copied
    assert not (Path(env["NPU_STUDIO_HOME"]) / "data" / "models" / "smollm-qnn" / "model.onnx.data").exists()

    answer = cli("chat", "--model", "smollm-qnn", "--device", "cpu", "--prompt", QUESTION, "--json")
    assert answer.returncode == 0, answer.stderr
    assert "Paris" in json.loads(answer.stdout)["answer"]

    config = machine.foundry_qnn / "genai_config.json"  # a copy: the demo model's own file is never touched
    before = config.stat()
    text = config.read_text(encoding="utf-8")
    config.unlink()
    config.write_text(text.replace('"burst"', '"BURST"'), encoding="utf-8")  # the same size
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same time
    refused = cli("chat", "--model", "smollm-qnn", "--device", "cpu", "--prompt", QUESTION)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "genai_config.json: contents changed (sha256 mismatch)" in refused.stderr
    assert "does not load it" in refused.stderr and "Paris" not in refused.stdout
    verify = cli("models", "verify", "smollm-qnn")
    assert verify.returncode == 1 and "CHANGED" in verify.stdout
    assert cli("models", "verify", "smollm2-135m-instruct").returncode == 0  # the demo model itself is intact
