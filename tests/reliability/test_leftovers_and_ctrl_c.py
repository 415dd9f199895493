"""Commands killed outright (kill -9) leave work folders that the next command touching the library sweeps,
never a running command's (engines/workdirs.py: the owner's process id and start time are in the name); and
every long command stops within a second of Ctrl+C, a model being tried in a child process included
(app/commands/progress.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from app import paths
from app.cli import run
from engines.child import is_child_command
from tests.reliability.conftest import Recorder
from tests.unit.tiny_models import colour_classifier, endless_loop_classifier

CATEGORY = "Interrupted work"
REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "assets" / "samples"
# A command stops (says so, its work removed) within 1 s of Ctrl+C: 0.25 s of grace, then the interrupt. The
# process then ends when Python has unloaded what it imported (0.4-0.6 s more with the Hub client loaded).
STOP_S, EXIT_S = 1.0, 3.0


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "NPU_STUDIO_HOME": str(home), "PYTHONPATH": str(REPO), **extra}


def _start(args: list[str], home: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app", *args], cwd=REPO, env=_env(home, **env), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _wait_for(found: Callable[[], list[Path]], proc: subprocess.Popen[str], what: str) -> list[Path]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        paths_now = found()
        if paths_now:
            return paths_now
        assert proc.poll() is None, f"the command ended before {what}: {proc.communicate()[1][-2000:]}"
        time.sleep(0.01)
    raise AssertionError(f"no {what} within 120 s")


def _after_ctrl_c(proc: subprocess.Popen[str]) -> tuple[float, float, str]:
    """Send Ctrl+C; (seconds until the command said it stopped, seconds until the process ended, stderr)."""
    assert proc.stderr is not None
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    said, lines = None, []
    for line in proc.stderr:
        lines.append(line)
        if said is None and line.startswith("npu-studio:"):
            said = time.monotonic() - sent
    proc.wait(timeout=30)
    return said if said is not None else float("inf"), time.monotonic() - sent, "".join(lines)


def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


def test_a_quantize_killed_with_sigkill_is_swept_by_the_next_command(
    demo_classifier: Path, tmp_path: Path, reliability: Recorder
) -> None:
    library = tmp_path / "data" / "models"
    quantize = _start(["quantize", "efficientnet-lite0", "--calibration", str(SAMPLES)], tmp_path)
    work = _wait_for(lambda: sorted(library.glob(".efficientnet-lite0-qdq.p*")), quantize, "a work folder")
    quantize.kill()  # kill -9: no finally runs
    quantize.wait()
    assert all(w.is_dir() for w in work)  # what kill -9 leaves
    listed = subprocess.run([sys.executable, "-m", "app", "models", "list"], cwd=REPO, env=_env(tmp_path),
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    left = sorted(p.name for p in library.iterdir() if p.name.startswith("."))
    reliability.record(CATEGORY, "kill -9 of `quantize efficientnet-lite0` while it works, then `models list`",
                       "the work folder is gone after the next command; the list is unchanged",
                       f"after models list: {left or 'no work folder left'}; exit {listed.returncode}")  # fmt: skip
    assert listed.returncode == 0 and left == []


def test_a_running_commands_work_folder_is_never_swept(
    demo_classifier: Path, tmp_path: Path, reliability: Recorder
) -> None:
    library = tmp_path / "data" / "models"
    quantize = _start(["quantize", "efficientnet-lite0", "--calibration", str(SAMPLES)], tmp_path)
    work = _wait_for(lambda: sorted(library.glob(".efficientnet-lite0-qdq.p*")), quantize, "a work folder")
    os.kill(quantize.pid, signal.SIGSTOP)  # held mid-work while another command looks at the library
    try:
        listed = subprocess.run([sys.executable, "-m", "app", "models", "list"], cwd=REPO, env=_env(tmp_path),
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        kept = all(w.is_dir() for w in work)
    finally:
        os.kill(quantize.pid, signal.SIGCONT)
    _, err = quantize.communicate(timeout=600)
    reliability.record(CATEGORY, "`models list` while a quantize is working (held with SIGSTOP)",
                       "the running quantize's work folder is kept; the quantize then finishes",
                       f"work folder kept: {kept}; quantize exit {quantize.returncode}")  # fmt: skip
    assert listed.returncode == 0 and kept
    assert quantize.returncode == 0, err[-2000:]
    assert (library / "efficientnet-lite0-qdq" / "manifest.json").is_file()
    assert sorted(p.name for p in library.iterdir() if p.name.startswith(".")) == []


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "models list": lambda tmp: ["models", "list"],
    "classify": lambda tmp: ["classify", str(SAMPLES / "coffee.png"), "--device", "cpu"],
    "chat --prompt": lambda tmp: ["chat", "--prompt", "Hi", "--device", "cpu", "--max-new-tokens", "2"],
    "models import": lambda tmp: ["models", "import", str(colour_classifier(tmp / "colours"))],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_that_touches_the_library_sweeps_it(
    command: str, demo_classifier: Path, demo_chat_model: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], reliability: Recorder,
) -> None:  # fmt: skip
    pid = _dead_pid()
    library = tmp_path / "home" / "data" / "models"
    os.environ["NPU_STUDIO_HOME"] = str(tmp_path / "home")  # (the autouse fixture restores it)
    leftovers = [library / f".import-phi-p{pid}s1abc-abcdefgh", library / f".efficientnet-lite0-qdq.p{pid}s1abc-x1",
                 library / f".efficientnet-lite0-qdq.old-p{pid}s1abc-x2", library / ".removing-phi-1234abcd"]
    for folder in leftovers:
        folder.mkdir(parents=True)
        (folder / "model.onnx").write_bytes(b"x" * 1000)
    code = run(COMMANDS[command](tmp_path))
    capsys.readouterr()
    left = [p.name for p in leftovers if p.exists()]
    reliability.record(CATEGORY, f"{command} after kill -9 left an import's, a quantize's, a swap's and a removal's "
                       "work folders", "all four swept", f"exit {code}; left: {left or 'none'}")  # fmt: skip
    assert code == 0 and left == []
    assert paths.user_models_dir() == library


def _trial_started(pid: int) -> list[psutil.Process]:
    return [c for c in psutil.Process(pid).children(recursive=True) if is_child_command(c.cmdline())]


def test_ctrl_c_stops_an_import_whose_model_loops_within_a_second(tmp_path: Path, reliability: Recorder) -> None:
    folder = endless_loop_classifier(tmp_path / "loop")
    proc = _start(["models", "import", str(folder), "--name", "looping"], tmp_path / "home",
                  NPU_STUDIO_TRIAL_SECONDS="60")  # fmt: skip
    deadline = time.monotonic() + 60
    trials: list[psutil.Process] = []
    while not trials and time.monotonic() < deadline:
        trials = _trial_started(proc.pid)
        time.sleep(0.01)
    assert trials, "no trial process started"
    said, ended, err = _after_ctrl_c(proc)
    _, alive = psutil.wait_procs(trials, timeout=5)
    library = tmp_path / "home" / "data" / "models"
    reliability.record(CATEGORY, "Ctrl+C while `models import` tries a model whose ONNX Loop never ends",
                       "stops within a second, not at the trial's 60 s limit; no trial process, no work folder left",
                       err.strip().splitlines()[-1])  # fmt: skip
    assert proc.returncode == 130 and said < STOP_S and ended < EXIT_S, (proc.returncode, said, ended)
    assert not alive and sorted(library.iterdir()) == []


def test_ctrl_c_stops_a_download_waiting_to_retry(tmp_path: Path, reliability: Recorder) -> None:
    proc = _start(["models", "download", "qwen2.5-0.5b-instruct-cpu-int4", "--allow-download"], tmp_path,
                  HF_ENDPOINT="http://127.0.0.1:9")  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # the event: it is waiting before its first retry
        if "Retrying in" in line:
            break
    said, ended, err = _after_ctrl_c(proc)
    reliability.record(CATEGORY, "Ctrl+C while a download waits to retry an unreachable server",
                       "stops within a second", err.strip().splitlines()[-1] if err.strip() else "nothing")
    assert proc.returncode == 130 and said < STOP_S and ended < EXIT_S, (proc.returncode, said, ended)
