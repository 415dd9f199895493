"""The hot paths import nothing they do not need: each runs as a real process (classify a bundled sample,
devices, a one-question chat with the demo model, the app up to its window shown), and the modules in its
`sys.modules` at the end (for the app: when the window is first shown) must include none of a listed set
of heavy packages. `python -X importtime` on the same command says what a failure costs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Never on a hot path: the model tools (onnx pulls ml_dtypes and protobuf in), the recipes' stack, and
# what only some views or commands need (charts, code highlighting, process statistics, downloads, the server).
HEAVY = frozenset(
    {
        "onnx", "ml_dtypes", "google.protobuf", "onnxscript", "onnx_ir", "onnxruntime.quantization",
        "torch", "transformers", "sympy", "scipy", "tokenizers", "safetensors", "huggingface_hub",
        "pyqtgraph", "pygments", "psutil", "importlib.metadata", "logging.handlers",
        "starlette", "uvicorn", "httpx", "openai",  # the local server's stack: only `serve` and its place need it
    }
)  # fmt: skip
CLI_HEAVY = HEAVY | {"PySide6", "sqlite3"}

RECORD = """
import atexit, json, os, runpy, sys
atexit.register(lambda: open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["npu-studio", *sys.argv[1:]]
runpy.run_module("app", run_name="__main__", alter_sys=True)
"""
# The app: the modules loaded when its window is first shown (the engines start on the next loop turn).
RECORD_AT_SHOWN = """
import json, os, runpy, sys
import app.gui
shown = app.gui.Studio._on_first_shown
def record(self):
    with open(os.environ["MODULES_OUT"], "w") as fh:
        json.dump(sorted(sys.modules), fh)
    shown(self)
app.gui.Studio._on_first_shown = record
sys.argv = ["npu-studio"]
runpy.run_module("app", run_name="__main__", alter_sys=True)
"""


def loaded_modules(tmp_path: Path, driver: str, *args: str, env: dict[str, str] | None = None) -> set[str]:
    out = tmp_path / "modules.json"
    environ = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MODULES_OUT": str(out),
        "NPU_STUDIO_HOME": str(tmp_path / "home"),
        "QT_QPA_PLATFORM": "offscreen",
        **(env or {}),
    }
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(driver), *args],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.is_file(), f"the run ended before it recorded its modules:\n{proc.stderr[-3000:]}"
    return set(json.loads(out.read_text(encoding="utf-8")))


def heavy_in(modules: set[str], heavy: frozenset[str]) -> list[str]:
    """The listed packages (or any of their submodules) that were imported."""
    return sorted(h for h in heavy if any(m == h or m.startswith(h + ".") for m in modules))


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_classify_one_bundled_photo(demo_classifier: Path, tmp_path: Path, device: str) -> None:
    photo = REPO / "assets" / "samples" / "coffee.png"
    modules = loaded_modules(tmp_path, RECORD, "classify", str(photo), "--device", device)
    assert "onnxruntime" in modules and "PIL.Image" in modules  # it really classified
    assert heavy_in(modules, CLI_HEAVY | {"onnxruntime_genai"}) == []
    if device == "cpu":  # the CPU asked for by name: no plugin EP libraries, no Windows ML catalog
        assert "onnxruntime_ep_openvino" not in modules and "multiprocessing" not in modules


def test_devices(tmp_path: Path) -> None:
    modules = loaded_modules(tmp_path, RECORD, "devices")
    assert "onnxruntime" in modules
    assert heavy_in(modules, CLI_HEAVY | {"PIL", "onnxruntime_genai"}) == []


def test_chat_one_question_on_the_cpu(demo_chat_model: Path, tmp_path: Path) -> None:
    modules = loaded_modules(tmp_path, RECORD, "chat", "--prompt", "Hi", "--device", "cpu", "--max-new-tokens", "2")
    assert "onnxruntime_genai" in modules
    # genai runs the CPU with its own ONNX Runtime library: the onnxruntime Python module is not needed
    assert heavy_in(modules, CLI_HEAVY | {"PIL", "onnxruntime", "jinja2"}) == []


def test_the_app_up_to_its_window(tmp_path: Path) -> None:
    probe = tmp_path / "probe.json"
    modules = loaded_modules(tmp_path, RECORD_AT_SHOWN, env={"NPU_STUDIO_STARTUP_PROBE": str(probe)})
    assert "PySide6.QtWidgets" in modules and json.loads(probe.read_text(encoding="utf-8"))["shown_at"]
    runtimes = {"numpy", "onnxruntime", "onnxruntime_genai", "PIL"}
    assert heavy_in(modules, HEAVY | runtimes) == []
