"""`npu-studio chat` on the tiny genai model."""

from __future__ import annotations

import io
import json
import os
import signal
from pathlib import Path

import pytest

from app.cli import run
from app.commands.chat import ctrl_c_cancels
from engines.types import CancelToken

CPU = ["--device", "cpu"]


def test_one_shot_json(tiny_llm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["chat", "--model", str(tiny_llm), *CPU, "--prompt", "Hi!", "--json", "--max-new-tokens", "5"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["prompt"] == "Hi!" and isinstance(out["answer"], str)
    stats = out["stats"]
    assert 0 < stats["generated_tokens"] <= 5 and stats["stop_reason"] in ("length", "eos")
    assert stats["ep"] == "CPUExecutionProvider" and stats["prompt_tokens"] == stats["prefill_tokens"] > 0
    assert out["placement"]["fell_back"] is False


def test_one_shot_text_streams_the_answer_and_prints_stats(tiny_llm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["chat", "--model", str(tiny_llm), *CPU, "--prompt", "Hi!", "--max-new-tokens", "4", "--sample"])
    captured = capsys.readouterr()
    assert code == 0
    assert "4 tokens" in captured.err and "tok/s" in captured.err and "stop: length" in captured.err


def test_fallback_is_announced(tiny_llm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(
        ["chat", "--model", str(tiny_llm), "--device", "qnn", "--prompt", "Hi", "--json", "--max-new-tokens", "2"]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert "note: running on the CPU" in captured.err
    assert json.loads(captured.out)["stats"]["fell_back"] is True


def test_strict_device_that_is_missing(tiny_llm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["chat", "--model", str(tiny_llm), "--device", "qnn", "--strict", "--prompt", "Hi"])
    err = capsys.readouterr().err
    assert code == 2 and "QNN is not available for chat" in err and "Traceback" not in err


def test_missing_demo_model_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NPU_STUDIO_BUNDLED_MODELS", str(tmp_path))
    code = run(["chat", "--prompt", "Hi"])
    err = capsys.readouterr().err
    assert code == 2 and "demo chat model is not built yet" in err and "build_demo_models.py --only chat" in err


def test_bad_model_folder_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["chat", "--model", str(tmp_path), "--prompt", "Hi"])
    err = capsys.readouterr().err
    assert code == 2 and "genai_config.json is missing" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--json"], "--json needs --prompt"),
        (["--prompt", "x", "--max-new-tokens", "0"], "max_new_tokens must be at least 1"),
        (["--prompt", "x", "--temperature", "-1"], "temperature must be greater than 0"),
        (["--prompt", "x", "--device", "warp-drive"], "Unknown device"),
    ],
)
def test_bad_arguments(tiny_llm: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    assert run(["chat", "--model", str(tiny_llm), *args]) == 2
    assert words in capsys.readouterr().err


def test_interactive_session(
    tiny_llm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = "hello\n/regen\n/help\n/bogus\n/system Be terse.\nagain\n/reset\n\nlast one\n/quit\nnot read\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    code = run(["chat", "--model", str(tiny_llm), *CPU, "--max-new-tokens", "3"])
    captured = capsys.readouterr()
    assert code == 0
    out = captured.out
    assert out.startswith("Chatting with ")
    assert out.count("bot> ") == 4  # hello, /regen, again, last one
    assert "Commands:" in out and "Unknown command /bogus" in out
    assert "(system prompt set; conversation cleared)" in out and "(conversation cleared)" in out
    stats_lines = [line for line in captured.err.splitlines() if "stop: " in line]
    assert len(stats_lines) == 4
    assert "(1 new," in stats_lines[1]  # /regen rewound to the question


def test_interactive_regen_without_a_question_is_an_error_line(
    tiny_llm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("/regen\n"))
    assert run(["chat", "--model", str(tiny_llm), *CPU]) == 0  # end of input leaves
    assert "error: There is no answer to regenerate yet." in capsys.readouterr().err


def test_interactive_edit_and_continue(
    tiny_llm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = "hello\n/continue\n/edit\n/edit goodbye\n/reset\n/continue\n/quit\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    code = run(["chat", "--model", str(tiny_llm), *CPU, "--max-new-tokens", "3"])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out.count("bot> ") == 4  # hello, /continue, /edit goodbye, and /continue after /reset
    assert "/edit needs the new question" in captured.out
    stats_lines = [line for line in captured.err.splitlines() if "stop: " in line]
    assert len(stats_lines) == 3, captured.err
    assert "(1 new," in stats_lines[1]  # /continue went on from the answer's last token, nothing read again
    assert "error: There is no answer to continue." in captured.err  # after /reset there is none


def test_ctrl_c_cancels_the_answer_not_the_program() -> None:
    cancel = CancelToken()
    with ctrl_c_cancels(cancel):
        os.kill(os.getpid(), signal.SIGINT)
    assert cancel.cancelled
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
