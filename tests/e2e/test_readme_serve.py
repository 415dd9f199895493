"""The README's server examples run as printed: `npu-studio serve` on its default port, the curl command,
and the six-line `openai` script, whose output is what the README says it prints."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.serve import REPO, ServeProcess

pytestmark = pytest.mark.e2e


def _section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split("## A local OpenAI-compatible server", 1)[1].split("\n## ", 1)[0]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), re.S)


def test_the_readme_serve_curl_and_openai_examples_work_as_printed(demo_chat_model: Path) -> None:
    commands = _blocks("bash")
    assert commands[0].splitlines()[0].split("#")[0].strip() == ".venv/bin/npu-studio serve"
    curl, script = commands[1], _blocks("python")[0]
    assert len(script.strip().splitlines()) == 6
    printed = re.search(r"prints `(.*?)` here", _section())
    assert printed is not None
    with ServeProcess(port=None) as server:  # exactly `npu-studio serve`: the default port
        assert server.base_url == "http://127.0.0.1:6780/v1"
        ran = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        answer = json.loads(ran.stdout)
        assert "Paris" in answer["choices"][0]["message"]["content"]
        assert answer["npu_studio"]["device"] == "CPU"
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == printed.group(1)
