"""`npu-studio --self-test` as a user (or CI, or the installer) runs it: a real process, offscreen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image


def test_self_test_passes_and_writes_screenshots(tmp_path: Path, demo_classifier: Path, demo_chat_model: Path) -> None:
    shots, report = tmp_path / "shots", tmp_path / "report.json"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    env.pop("NPU_STUDIO_HOME", None)  # the self-test must isolate itself from the user's data
    done = subprocess.run(
        [sys.executable, "-m", "app", "--self-test", "--screenshots", str(shots), "--report", str(report)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["passed"] is True
    steps = {s["name"]: s for s in data["steps"]}
    assert {"window", "devices", "classify", "chat", "on this machine", "views"} <= set(steps)
    assert steps["window"]["detail"]["runtime_loaded_before_window"] is False
    assert "cat" in steps["classify"]["detail"]["top5"][0] or "tabby" in steps["classify"]["detail"]["top5"][0]
    assert steps["chat"]["detail"]["answer"].strip()
    assert data["chat"]["stats"]["ep"] and data["classification"]["placement"]["summary"]
    # the Models view's "On this machine" tab, after a scan of two copies of the demo chat model
    assert steps["on this machine"]["passed"], steps["on this machine"].get("error")
    copies = steps["on this machine"]["detail"]["copies"]
    assert len(copies) == 2 and any(c.startswith("smollm2-135m-instruct-qnn-npu:1 (QNN NPU): ") for c in copies)
    assert any("models-on-this-machine" in n for n in data["screenshots"])
    names = sorted(p.name for p in shots.glob("*.png"))
    assert len(names) == len(data["screenshots"]) >= 6
    assert any("chat" in n for n in names) and any("classify" in n for n in names)
    for path in shots.glob("*.png"):
        with Image.open(path) as image:
            assert image.size[0] >= 980 and image.getextrema() != ((0, 0), (0, 0), (0, 0))
    # every view at 1280x720 and at 1.5x, light and dark, checked for controls outside and cut text
    assert steps["layouts"]["passed"], steps["layouts"].get("error")
    assert data["layouts"]["problems"] == {} and data["layouts"]["checked"] >= 60
    layouts = shots / "layouts"
    for theme in ("light", "dark"):
        for view in ("devices", "classify", "chat", "benchmark", "models", "models-found", "settings"):
            with Image.open(layouts / f"layout-1280x720-{theme}-{view}.png") as image:
                assert image.size == (1280, 720)
            with Image.open(layouts / f"layout-1.5x-1280x720-{theme}-{view}.png") as image:
                assert image.size == (1920, 1080)  # 1280x720 logical at 150 %
    assert "self-test passed" in done.stdout


def test_self_test_fails_without_the_demo_models(tmp_path: Path) -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", NPU_STUDIO_BUNDLED_MODELS=str(tmp_path / "none"))
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "app", "--self-test", "--report", str(report)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    data = json.loads(report.read_text(encoding="utf-8"))
    failed = {s["name"]: s["error"] for s in data["steps"] if not s["passed"]}
    assert "build_demo_models.py" in failed["classify"] and "build_demo_models.py" in failed["chat"]
