"""The CLI's output channels, through real processes: `--json` on a stdout that is not UTF-8 (a Windows
redirect in cp1252 or cp932, a Latin-1 or ASCII locale), a reader that goes away (`| head`, `| true`), a
full stdout (`> /dev/full`) and a closed one (`>&-`). Machine output is UTF-8 whatever the locale, human
output degrades and never fails, a closed pipe ends quietly and anything else is one line; none of it is
ever reported as a device or engine failure (app/terminal.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.conftest import Recorder

CATEGORY = "Output channels"
REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "assets" / "samples" / "chelsea.png"
COMMANDS: dict[str, list[str]] = {
    "classify": ["classify", str(SAMPLE), "--device", "cpu"],
    "devices": ["devices"],
    "chat --prompt": ["chat", "--prompt", "Tell me a long story about a cat.", "--device", "cpu",
                      "--max-new-tokens", "64"],
}  # fmt: skip


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8")}
    return {**env, "PYTHONPATH": str(REPO), "NPU_STUDIO_HOME": str(home), **extra}


def _cli(args: list[str], home: Path, stdout: int | object = subprocess.PIPE, **env: str) -> tuple[int, bytes, str]:
    proc = subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, env=_env(home, **env), stdout=stdout,
                          stderr=subprocess.PIPE, timeout=300)  # fmt: skip
    return proc.returncode, proc.stdout or b"", proc.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("encoding", ["cp932", "cp1252", "latin-1", "ascii"])
def test_json_is_utf8_on_any_stdout(
    encoding: str, demo_classifier: Path, tmp_path: Path, reliability: Recorder
) -> None:
    code, out, err = _cli([*COMMANDS["classify"], "--json"], tmp_path, PYTHONIOENCODING=encoding)
    report = json.loads(out.decode("utf-8"))
    reliability.record(CATEGORY, f"classify --json with stdout in {encoding} (PYTHONIOENCODING)",
                       "one JSON document in UTF-8, exit 0", f"exit {code}; UTF-8 JSON; {err.strip() or 'no stderr'}")
    assert code == 0 and err == "" and report["results"][0]["top"]
    assert "—" in out.decode("utf-8")  # the placement text's em dash, as UTF-8 bytes, not the code page's


@pytest.mark.parametrize("encoding", ["ascii", "cp932"])
def test_human_output_degrades_and_never_fails(
    encoding: str, demo_classifier: Path, tmp_path: Path, reliability: Recorder
) -> None:
    code, out, err = _cli(COMMANDS["classify"], tmp_path, PYTHONIOENCODING=encoding)
    first = out.decode(encoding).splitlines()[0]
    reliability.record(CATEGORY, f"classify (text) with stdout in {encoding}", "the em dash degrades to '-', exit 0",
                       first)  # fmt: skip
    assert code == 0 and err == ""
    assert first == "efficientnet-lite0 ran on CPU - all 94 nodes (requested: CPU only)"


def _reader_gone() -> tuple[int, int]:
    """A pipe whose reader has already gone (`| true`): every write to it fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end, read_end


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_reader_that_goes_away_ends_the_command_quietly(
    command: str, demo_classifier: Path, demo_chat_model: Path, tmp_path: Path, reliability: Recorder
) -> None:
    write_end, _ = _reader_gone()
    try:
        code, _, err = _cli(COMMANDS[command], tmp_path, stdout=write_end)
    finally:
        os.close(write_end)
    reliability.record(CATEGORY, f"{command} | true (the reader closed the pipe before the first line)",
                       "ends quietly with 141 (128 + SIGPIPE), as a Unix tool does",
                       f"exit {code}; stderr: {err.strip() or 'nothing'}")  # fmt: skip
    assert code == 141 and err == ""


def test_head_reads_the_first_line_of_a_streamed_answer(
    demo_chat_model: Path, tmp_path: Path, reliability: Recorder
) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "app", *COMMANDS["chat --prompt"]], cwd=REPO, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.read(8)  # `| head -c 8`: read a little of the answer, then go away
    proc.stdout.close()
    err = proc.stderr.read().decode("utf-8", "replace")
    code = proc.wait(timeout=120)
    reliability.record(CATEGORY, "chat --prompt | head -c 8 (the reader leaves while the answer streams)",
                       "ends quietly; never 'The CPU failed ... export diagnostics'",
                       f"exit {code}; stderr: {err.strip() or 'nothing'}")  # fmt: skip
    assert first and code in (0, 141)  # 0 when the whole answer fit in the pipe before the reader left
    assert "failed" not in err and "error" not in err and "Traceback" not in err


@pytest.mark.parametrize("command", [*COMMANDS, "classify --json"])
def test_a_full_stdout_is_one_line(
    command: str, demo_classifier: Path, demo_chat_model: Path, tmp_path: Path, reliability: Recorder
) -> None:
    args = [*COMMANDS["classify"], "--json"] if command == "classify --json" else COMMANDS[command]
    with open("/dev/full", "wb") as full:
        code, _, err = _cli(args, tmp_path, stdout=full)
    reliability.record(CATEGORY, f"{command} > /dev/full", "one line, exit 1; the device is not blamed", err.strip())
    assert code == 1
    assert err == ("npu-studio: error: the output could not be written (no space left on device); "
                   "nothing more was written.\n")  # fmt: skip


def test_a_closed_stdout_is_one_line(tmp_path: Path, reliability: Recorder) -> None:
    proc = subprocess.run([sys.executable, "-m", "app", "devices", "--json"], cwd=REPO, env=_env(tmp_path),
                          stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
                          preexec_fn=lambda: os.close(1))  # fmt: skip
    err = proc.stderr.decode("utf-8", "replace")
    reliability.record(CATEGORY, "devices --json >&- (stdout closed)", "one line, exit 1", err.strip())
    assert proc.returncode == 1
    assert err == "npu-studio: error: the output could not be written (stdout is closed); nothing more was written.\n"
