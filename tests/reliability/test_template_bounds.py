"""A chat template that misbehaves only on some input (here: a user message that is exactly "boom") passes
the model's first trial, then crashes, hangs or allocates without end on that message. Every render of a
user model's template runs in the chat engine's child process (engines/chat/bounds.py): through `chat
--prompt` and the interactive CLI the caller lives, says so in one `npu-studio: error:` line and exits 2;
nothing runs past the render bound, and Ctrl+C stops a render that hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from app.cli import run
from engines.child import is_child_command
from engines.models import trial
from tests.reliability.conftest import REPO, Recorder
from tests.reliability.test_model_code import chat_folder

CATEGORY = "Model code"
RENDER_SECONDS = 3
TRIGGER = "boom"
_ON_TRIGGER = "{% for m in messages %}{% if m['content'] == '" + TRIGGER + "' %}BODY{% endif %}{% endfor %}"
BODIES = {
    "crash": ("{% macro f(n) %}{{ f(n) }}{% endmacro %}", "{{ f(1) }}"),
    "loop": ("", "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}"),
    "alloc": ("", "{% set r = range(1000000000) %}{{ r|length }}"),
}
WORDS = {"crash": "crashed the chat engine (SIGSEGV)", "loop": f"did not finish rendering in {RENDER_SECONDS} s",
         "alloc": "ran out of memory"}  # fmt: skip
NAMES = {"crash": "recurses without end", "loop": "loops without end", "alloc": "allocates without end"}


def trigger_template(demo_chat_model: Path, kind: str) -> str:
    """The demo model's own template, with `kind`'s misbehaviour when a message is the trigger word."""
    head, body = BODIES[kind]
    return head + _ON_TRIGGER.replace("BODY", body) + (demo_chat_model / "chat_template.jinja").read_text("utf-8")


@pytest.fixture(autouse=True)
def _bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPU_STUDIO_RENDER_SECONDS", str(RENDER_SECONDS))
    monkeypatch.setenv("NPU_STUDIO_TRIAL_SECONDS", "30")
    trial._passed.clear()


@pytest.mark.parametrize("kind", list(BODIES))
def test_chat_prompt_survives_a_template_that_misbehaves_on_one_word(
    kind: str, demo_chat_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, reliability: Recorder,
) -> None:  # fmt: skip
    if kind == "alloc":
        monkeypatch.setenv("NPU_STUDIO_RENDER_SECONDS", "60")  # the memory bound must be what stops it
    folder = chat_folder(demo_chat_model, tmp_path / f"{kind}-llm", trigger_template(demo_chat_model, kind))
    assert run(["chat", "--model", str(folder), "--prompt", "hi", "--max-new-tokens", "2"]) == 0  # trial passed
    capsys.readouterr()
    started = time.monotonic()
    code = run(["chat", "--model", str(folder), "--prompt", TRIGGER, "--max-new-tokens", "2"])
    elapsed = time.monotonic() - started
    captured = capsys.readouterr()
    err = "\n".join(line for line in captured.err.splitlines() if not line.startswith("Importing ")).strip()
    reliability.record(CATEGORY, f"chat --prompt: a template that {NAMES[kind]} only on the word '{TRIGGER}'",
                       "one error line, exit 2; the CLI lives", err)  # fmt: skip
    assert code == 2 and captured.out.strip() == ""
    assert err.startswith("npu-studio: error: The model's chat template") and err.count("\n") == 0
    assert WORDS[kind] in err and "unsafe" in err and "Traceback" not in err
    assert elapsed < (RENDER_SECONDS + 20 if kind != "alloc" else 50)


class _Cli:
    """`npu-studio chat` in a child process, with its output collected as it comes."""

    def __init__(self, args: list[str], home: Path) -> None:
        env = dict(os.environ, NPU_STUDIO_HOME=str(home), PYTHONPATH=str(REPO))
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        self.process = subprocess.Popen([sys.executable, "-m", "app", "chat", *args], env=env, cwd=REPO, text=True,
                                        **pipes)  # type: ignore[call-overload]  # fmt: skip
        self.out: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        for char in iter(lambda: stream.read(1), ""):
            self.out.append(char)

    def say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def wait_for(self, text: str, count: int = 1, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while "".join(self.out).count(text) < count:
            assert time.monotonic() < deadline, f"no {text!r} in {''.join(self.out)!r}"
            assert self.process.poll() is None, f"ended early: {''.join(self.out)!r}"
            time.sleep(0.05)

    def finish(self, timeout: float = 30.0) -> tuple[int, str, str]:
        assert self.process.stderr is not None
        err = self.process.stderr.read() if self.process.wait(timeout) is not None else ""
        self._reader.join(5)
        lines = [line for line in err.splitlines() if not line.startswith("Importing ")]
        return self.process.returncode, "".join(self.out), "\n".join(lines).strip()


def _engines_of(pid: int) -> list[psutil.Process]:
    with_children = psutil.Process(pid).children(recursive=True)
    return [c for c in with_children if is_child_command(c.cmdline())]


def test_interactive_chat_keeps_the_conversation_and_exits_with_one_line_when_the_template_crashes(
    demo_chat_model: Path, tmp_path: Path, reliability: Recorder
) -> None:
    folder = chat_folder(demo_chat_model, tmp_path / "crash-llm", trigger_template(demo_chat_model, "crash"))
    cli = _Cli(["--model", str(folder), "--max-new-tokens", "3"], tmp_path / "home")
    cli.say("hello")
    cli.wait_for("you> ", 2)  # the first answer came
    engines = _engines_of(cli.process.pid)
    cli.say(TRIGGER)
    code, out, err = cli.finish()
    reliability.record(CATEGORY, f"interactive chat: a template that crashes on the word '{TRIGGER}' in the 2nd turn",
                       "the first answer stays printed; one error line, exit 2", err.splitlines()[-1])  # fmt: skip
    assert code == 2 and out.count("bot> ") == 2
    last = err.splitlines()[-1]
    assert last.startswith("npu-studio: error: The model's chat template crashed") and err.count("npu-studio") == 1
    assert "Traceback" not in err
    _, alive = psutil.wait_procs(engines, timeout=5)
    assert not alive


def test_ctrl_c_stops_a_render_that_hangs_and_the_conversation_goes_on(
    demo_chat_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    monkeypatch.setenv("NPU_STUDIO_RENDER_SECONDS", "120")  # Ctrl+C, not the bound, must stop it
    folder = chat_folder(demo_chat_model, tmp_path / "loop-llm", trigger_template(demo_chat_model, "loop"))
    cli = _Cli(["--model", str(folder), "--max-new-tokens", "3"], tmp_path / "home")
    cli.wait_for("you> ")
    cli.say(TRIGGER)
    cli.wait_for("bot> ")
    time.sleep(1.5)  # inside the render by now
    cli.process.send_signal(signal.SIGINT)
    started = time.monotonic()
    cli.wait_for("(stopped)", timeout=10)
    stopped_after = time.monotonic() - started
    cli.say("hello")  # the engine restarts with the conversation and answers
    cli.wait_for("you> ", 3)
    cli.say("/quit")
    code, out, err = cli.finish()
    reliability.record(CATEGORY, "interactive chat: Ctrl+C while a template loops without end",
                       "the render stops within 3 s; the next message is answered",
                       f"stopped within 3 s: {stopped_after < 3}; exit {code}")  # fmt: skip
    assert stopped_after < 3 and code == 0 and "Traceback" not in err
    assert out.count("bot> ") == 2
