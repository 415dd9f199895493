"""Offline: a download whose server is never reached says so (and that nothing was downloaded), prints
each retry warning once and leaves nothing behind (engines/models/downloads.py); and no process that
loads ONNX Runtime or onnxruntime-genai leaves their telemetry on (engines/runtime/__init__.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability.conftest import Recorder

CATEGORY = "Offline"
REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_download_that_never_reaches_its_server(tmp_path: Path, reliability: Recorder) -> None:
    port = _closed_port()
    env = {**os.environ, "NPU_STUDIO_HOME": str(tmp_path), "PYTHONPATH": str(REPO),
           "HF_ENDPOINT": f"http://127.0.0.1:{port}"}  # fmt: skip
    command = [sys.executable, "-m", "app", "models", "download", "qwen2.5-0.5b-instruct-cpu-int4", "--allow-download"]
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    last = lines[-1].replace(str(port), "PORT")
    reliability.record(CATEGORY, "models download with HF_ENDPOINT at a closed port (no network reached)",
                       "each retry warning once; 'could not reach the server ...; nothing was downloaded'; "
                       "nothing left in the library", last)  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert last == ("npu-studio: error: Could not reach the server (127.0.0.1:PORT): connection refused; nothing was "
                    "downloaded. Check the network connection (and HF_ENDPOINT, if you set it), then run the same "
                    "download again.")  # fmt: skip
    warnings = [line for line in lines[:-1] if line.strip()]
    retries = [line for line in warnings if "Retrying in" in line]
    assert retries and len(warnings) == 2 * len(retries) + 1, warnings  # a refusal and a retry each time, once each
    assert len(set(retries)) == len(retries)
    library = tmp_path / "data" / "models"
    assert not library.exists() or sorted(library.iterdir()) == []


# --- telemetry ---------------------------------------------------------------------------------------------

WATCH = REPO / "tests" / "fixtures" / "runtime_watch"
HELPER = REPO / "engines" / "runtime" / "__init__.py"


def _watched_run(args: list[str], tmp_path: Path) -> dict[int, list[tuple[str, str, Path, str]]]:
    """Run a CLI command with every Python process it starts watched; per process id, its records."""
    log = tmp_path / "runtime-watch.jsonl"
    env = {**os.environ, "NPU_STUDIO_HOME": str(tmp_path / "home"), "RUNTIME_WATCH_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(WATCH), str(REPO)])}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _by_process(log)


def _by_process(log: Path) -> dict[int, list[tuple[str, str, Path, str]]]:
    import json

    processes: dict[int, list[tuple[str, str, Path, str]]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        role = "engine child" if "npu-studio-chat" in record["argv"] else (
            "trial child" if "npu-studio-trial" in record["argv"] else "command")
        processes.setdefault(record["pid"], []).append((record["event"], record["module"], Path(record["by"]), role))
    return processes


def _verdict(processes: dict[int, list[tuple[str, str, Path, str]]]) -> tuple[bool, str]:
    """Every process: each runtime it imported came through the boundary and had its telemetry turned off there."""
    ok, said = True, []
    for records in processes.values():
        role = records[0][3]
        loaded = sorted({m for e, m, _, _ in records if e == "import"})
        for module in loaded:
            through = ("import", module, HELPER, role) in records
            off = ("telemetry-off", module, HELPER, role) in records
            ok = ok and through and off
            said.append(f"{role}: {module} {'off' if through and off else 'LEFT ON or imported elsewhere'}")
    return ok and bool(said), "; ".join(sorted(set(said)))


def _tiny_folder(tmp_path: Path) -> Path:
    from tests.unit.tiny_models import colour_classifier

    return colour_classifier(tmp_path / "colours")


def _calibration(tmp_path: Path) -> Path:
    from PIL import Image

    folder = tmp_path / "calibration"
    folder.mkdir()
    for name, colour in (("red", (240, 0, 0)), ("green", (0, 240, 0))):
        Image.new("RGB", (32, 32), colour).save(folder / f"{name}.png")
    return folder


TELEMETRY_COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "classify (ONNX Runtime in the command)": lambda tmp: ["classify", str(REPO / "assets/samples/coffee.png"),
                                                           "--device", "cpu"],
    "chat --prompt, the bundled model (genai in the command)": lambda tmp: ["chat", "--prompt", "Hi", "--device",
                                                                             "cpu", "--max-new-tokens", "2"],
    "chat --model, a user's model (a trial child, then the chat engine's child)": lambda tmp: [
        "chat", "--model", str(_user_chat_model(tmp)), "--prompt", "Hi", "--device", "cpu", "--max-new-tokens", "2"],
    "models import of a classifier (its trial child)": lambda tmp: ["models", "import", str(_tiny_folder(tmp))],
    "quantize (ONNX Runtime's quantization tools)": lambda tmp: ["quantize", str(_tiny_folder(tmp)), "--calibration",
                                                                 str(_calibration(tmp)), "--out", str(tmp / "q")],
}  # fmt: skip


def _user_chat_model(tmp_path: Path) -> Path:
    import shutil

    folder = tmp_path / "my-llm"
    shutil.copytree(REPO / "assets" / "models" / "smollm2-135m-instruct", folder)
    return folder


@pytest.mark.parametrize("command", list(TELEMETRY_COMMANDS))
def test_every_process_that_loads_a_runtime_turns_its_telemetry_off(
    command: str, demo_classifier: Path, demo_chat_model: Path, tmp_path: Path, reliability: Recorder
) -> None:
    processes = _watched_run(TELEMETRY_COMMANDS[command](tmp_path), tmp_path)
    ok, said = _verdict(processes)
    reliability.record(CATEGORY, f"telemetry: {command}",
                       "every process that loads ONNX Runtime or onnxruntime-genai turns its telemetry off, at the "
                       "one import", said)  # fmt: skip
    assert ok, said


def test_the_server_turns_telemetry_off(demo_chat_model: Path, tmp_path: Path, reliability: Recorder) -> None:
    import httpx

    from tests.fixtures.serve import ServeProcess

    log = tmp_path / "runtime-watch.jsonl"
    env = {"NPU_STUDIO_HOME": str(tmp_path / "home"), "RUNTIME_WATCH_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(WATCH), str(REPO)])}  # fmt: skip
    with ServeProcess(["--model", "smollm2-135m-instruct", "--device", "cpu"], env=env) as served:
        reply = httpx.post(f"{served.base_url}/chat/completions", timeout=120, json={
            "model": "smollm2-135m-instruct", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    ok, said = _verdict(_by_process(log))
    reliability.record(CATEGORY, "telemetry: serve, one chat completion",
                       "the server's processes turn the runtimes' telemetry off", said)  # fmt: skip
    assert reply.status_code == 200 and ok, said
