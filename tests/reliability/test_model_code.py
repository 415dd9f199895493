"""A model's code cannot crash or hang the process that runs it (engines/models/trial.py): chat templates
that recurse, loop or allocate without end, and ONNX graphs that never finish, are tried in a bounded child
process and refused with a clear error, through `chat --model`, `classify --model`, `models import`,
`bench` and the app's chat engine; Ctrl+C and SIGTERM stop a trial at once, and a model that passed is not
tried again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.cli import run
from engines.child import is_child_command
from engines.models import trial
from tests.reliability.conftest import REPO, Recorder
from tests.unit.tiny_models import colour_classifier, endless_loop_classifier

CATEGORY = "Model code"
TRIAL_SECONDS = "8"


@pytest.fixture(autouse=True)
def _short_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPU_STUDIO_TRIAL_SECONDS", TRIAL_SECONDS)
    trial._passed.clear()  # each case starts with no verdict from another test


def chat_folder(source: Path, target: Path, template: str | None = None) -> Path:
    """A copy of a genai folder (hard links: instant) with its own chat template."""
    target.mkdir(parents=True)
    for file in source.iterdir():
        if file.name in ("manifest.json", "chat_template.jinja") or not file.is_file():
            continue
        try:
            os.link(file.resolve(), target / file.name)
        except OSError:
            (target / file.name).write_bytes(file.read_bytes())
    (target / "chat_template.jinja").write_text(
        template if template is not None else (source / "chat_template.jinja").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    return target


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = run(args)
    captured = capsys.readouterr()
    err = "\n".join(line for line in captured.err.splitlines() if not line.startswith("Importing "))
    return code, captured.out, err.strip()


TEMPLATES = [
    ("a macro that calls itself without end", "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "crashed"),
    ("nested range(100000) loops",
     "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}", "did not finish"),
    ("range(10**8) printed", "{% for a in range(100000000) %}{{ a }}{% endfor %}", "memory"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "template", "words"), TEMPLATES, ids=[t[0] for t in TEMPLATES])
def test_a_hostile_chat_template_is_refused_not_run(
    name: str, template: str, words: str, demo_chat_model: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, reliability: Recorder,
) -> None:  # fmt: skip
    if words == "memory":
        monkeypatch.setenv("NPU_STUDIO_TRIAL_SECONDS", "40")  # the memory bound must be what stops it
    folder = chat_folder(demo_chat_model, tmp_path / "evil-llm", template)
    started = time.monotonic()
    code, out, err = _cli(["chat", "--model", str(folder), "--prompt", "hi"], capsys)
    reliability.record(CATEGORY, f"chat --model: chat template with {name}", "refused; the CLI lives", err)
    assert code == 2 and out == ""
    assert words in err and "Traceback" not in err
    assert err.startswith("npu-studio: error: The model in") and err.count("\n") == 0
    assert time.monotonic() - started < 45


def test_an_endless_onnx_loop_is_stopped_in_classify_and_import(
    tmp_path: Path, samples: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = endless_loop_classifier(tmp_path / "loop")
    started = time.monotonic()
    code, out, err = _cli(["classify", "--model", str(folder), str(samples / "chelsea.png")], capsys)
    reliability.record(CATEGORY, "classify --model: an ONNX Loop with a trip count of 10^12",
                       f"stopped after {TRIAL_SECONDS} s with an error", err)  # fmt: skip
    assert code == 2 and "did not finish" in err and out == ""
    assert time.monotonic() - started < float(TRIAL_SECONDS) + 20

    code, _, err = _cli(["models", "import", str(folder), "--name", "looping"], capsys)
    reliability.record(CATEGORY, "models import: an ONNX Loop with a trip count of 10^12",
                       "refused; nothing added to the library", err)  # fmt: skip
    assert code == 2 and "did not finish" in err
    from app import paths

    assert sorted(p.name for p in paths.user_models_dir().iterdir()) == []


def test_bench_keeps_the_classifier_results_when_the_chat_model_is_hostile(
    demo_chat_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    classifier = colour_classifier(tmp_path / "colours")
    chat = chat_folder(demo_chat_model, tmp_path / "evil-llm", TEMPLATES[0][1])
    code, out, _ = _cli(["bench", "--model", str(classifier), str(chat), "--devices", "cpu", "--runs", "5",
                         "--batch", "2", "--chat-tokens", "4", "--chat-rounds", "1", "--no-progress", "--json"],
                        capsys)  # fmt: skip
    results = json.loads(out)["results"]
    by_model = {r["model"]: r for r in results if r["device"] == "CPU"}
    chat_result = by_model[chat.name]
    reliability.record(CATEGORY, "bench: a classifier and a chat model whose template crashes",
                       "the classifier's numbers are kept; the chat model is one failed row", chat_result["reason"])
    assert by_model["colours"]["status"] == "ok" and by_model["colours"]["latency"] is not None
    assert chat_result["status"] == "failed" and "crashed" in chat_result["reason"]
    assert code in (0, 1)


def _cli_child(args: list[str], home: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, NPU_STUDIO_HOME=str(home), PYTHONPATH=str(REPO), NPU_STUDIO_TRIAL_SECONDS="60")
    return subprocess.Popen([sys.executable, "-m", "app", *args], env=env, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _trial_children(pid: int, wait: float = 20.0) -> list[psutil.Process]:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        found = [c for c in psutil.Process(pid).children(recursive=True) if is_child_command(c.cmdline())]
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("no trial process started")


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["Ctrl+C", "SIGTERM"])  # fmt: skip
def test_ctrl_c_and_sigterm_stop_a_trial_at_once(
    signum: int, exit_code: int, tmp_path: Path, samples: Path, reliability: Recorder
) -> None:
    folder = endless_loop_classifier(tmp_path / "loop")
    child = _cli_child(["classify", "--model", str(folder), str(samples / "chelsea.png")], tmp_path / "home")
    trials = _trial_children(child.pid)
    time.sleep(0.5)
    child.send_signal(signum)
    started = time.monotonic()
    _, err = child.communicate(timeout=15)
    name = signal.Signals(signum).name
    reliability.record(CATEGORY, f"{name} while an endless ONNX Loop is tried", "ends at once; no process left",
                       err.strip())  # fmt: skip
    assert child.returncode == exit_code and time.monotonic() - started < 5
    assert "Traceback" not in err
    _, alive = psutil.wait_procs(trials, timeout=5)
    assert not alive, "the trial process outlived the command"


def test_a_model_that_passed_is_not_tried_again_until_it_changes(
    tmp_path: Path, samples: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    reliability: Recorder,
) -> None:  # fmt: skip
    folder = colour_classifier(tmp_path / "colours")
    tried: list[str] = []
    real = trial.run_bounded

    def counting(*args: object, **kwargs: object) -> object:
        tried.append(str(kwargs.get("what")))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(trial, "run_bounded", counting)
    photo = str(samples / "chelsea.png")
    assert _cli(["classify", "--model", str(folder), photo], capsys)[0] == 0
    trial._passed.clear()  # as in a new process: only the verdict file remembers
    assert _cli(["classify", "--model", str(folder), photo], capsys)[0] == 0
    assert len(tried) == 1
    (folder / "labels.txt").write_text("a\nb\nc\nd\n", encoding="utf-8")  # the folder changed: tried again
    assert _cli(["classify", "--model", str(folder), photo], capsys)[0] == 0
    reliability.record(CATEGORY, "the same user model classified three times, changed before the third",
                       "tried twice: once, then after the change", f"tried {len(tried)} times")  # fmt: skip
    assert len(tried) == 2
    assert _cli(["classify", str(samples / "coffee.png")], capsys)[0] == 0  # the bundled model: never tried
    assert len(tried) == 2


def test_the_apps_chat_engine_survives_a_template_that_crashes(
    demo_chat_model: Path, tmp_path: Path, reliability: Recorder
) -> None:
    from engines.chat.bounded import EngineProcess
    from engines.chat.requests import ChatRequest, Failed
    from engines.types import DeviceChoice

    folder = chat_folder(demo_chat_model, tmp_path / "evil-llm", TEMPLATES[0][1])
    engine = EngineProcess()
    try:
        event = engine.load(str(folder), DeviceChoice.parse("cpu"), lambda e: None, None)
        if isinstance(event, tuple) and event[0] == "loaded":  # the template runs at the first answer
            event = engine.request(("answer", ChatRequest.send([], "hi")), lambda e: None, None)
        assert isinstance(event, Failed)
        message = event.error.user_text()
        reliability.record(CATEGORY, "the app's chat engine: a template that crashes",
                           "an error in the view; the app lives; the engine restarts", message)  # fmt: skip
        assert "stopped unexpectedly" in message or "crashed" in message
        good = chat_folder(demo_chat_model, tmp_path / "good-llm")
        loaded = engine.load(str(good), DeviceChoice.parse("cpu"), lambda e: None, None)
        assert isinstance(loaded, tuple) and loaded[0] == "loaded"
    finally:
        engine.close()
