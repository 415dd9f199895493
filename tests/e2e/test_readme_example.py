"""The README's third-party script (classify a photo on the NPU, strict) runs as printed: on this machine
(no NPU) it refuses with the reason, and on the CPU the same lines classify the photo."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _example() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### From your own script", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README shows the script"
    return match.group(1)


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = code.replace("~/.cache/npu-studio-compiled", str(tmp_path / "compiled"))
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_the_readme_script_refuses_without_an_npu_and_classifies_on_the_cpu(
    demo_classifier: Path, tmp_path: Path
) -> None:
    code = _example()
    assert len(code.strip().splitlines()) <= 5
    strict = _run(code, tmp_path)
    assert strict.returncode != 0 and "DeviceUnavailableError: No usable NPU" in strict.stderr
    on_cpu = _run(code.replace('"npu", strict=True', '"cpu", strict=True'), tmp_path)
    assert on_cpu.returncode == 0, on_cpu.stderr
    assert "CPU — all" in on_cpu.stdout and "espresso" in on_cpu.stdout


def test_the_readme_chat_lines_answer_through_the_chat_service(demo_chat_model: Path, tmp_path: Path) -> None:
    section = (REPO / "README.md").read_text(encoding="utf-8").split("### From your own script", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2 and "engines.open_chat" in blocks[1], "the README shows the chat lines"
    result = _run("import engines\n" + blocks[1], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout and "CPU" in result.stdout
