"""Models other tools keep on this machine: `npu-studio models scan` over a home laid out as Foundry Local
and the Hugging Face cache leave it (tests/fixtures/machine_home.py) loads nothing, which the hostile-folder
fuzz's audit hook proves (every file opened, plus every module imported), and the traps of `native_guard`
(no session, no genai model) confirm in process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.cli import run
from tests.fixtures.machine_home import MachineHome, build_home
from tests.reliability.conftest import REPO, NativeGuard, Recorder
from tests.reliability.test_hostile_folder_fuzz import DRIVER, SITECUSTOMIZE

CATEGORY = "Models found on this machine"
CHILD_SECONDS = 120
# What a scan may read in a model folder: the files that describe it, and the head of an ONNX file.
DESCRIBING = {"genai_config.json", "inference_model.json", "manifest.json", "README.md", "config.json",
              "preprocessor_config.json", "tokenizer_config.json", "settings.json"}  # settings.json: VS Code's
IMPORT_AUDIT = """
import atexit, os, sys
_imports = os.environ.get("AUDIT_IMPORT_LOG")
if _imports:
    def _modules_at_exit():
        watched = {"onnxruntime_genai", "onnx", "onnxruntime"}
        loaded = sorted({name.split(".")[0] for name in sys.modules} & watched)
        with open(_imports, "w", encoding="utf-8") as log:
            log.write("\\n".join(loaded) + "\\n")
    atexit.register(_modules_at_exit)
"""


@pytest.fixture
def machine(tiny_llm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MachineHome:
    built = build_home(tmp_path / "home", tiny_llm)
    built.use(monkeypatch)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "bin"), "/usr/bin", "/bin"]))
    return built


def _blob_names(home: Path) -> dict[str, str]:
    """Hub cache blob (real path) -> the file name a snapshot gives it."""
    names: dict[str, str] = {}
    for link in home.rglob("*"):
        if link.is_symlink() and "snapshots" in link.parts and link.is_file():
            names[os.path.realpath(link)] = link.name
    return names


def test_the_scan_opens_only_small_files_and_imports_no_model_runtime(
    machine: MachineHome, tmp_path: Path, reliability: Recorder
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "tmpdir").mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE) + textwrap.dedent(IMPORT_AUDIT))
    opened, imported = tmp_path / "opened.log", tmp_path / "imported.log"
    python_roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    studio = tmp_path / "studio"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
        PYTHONDONTWRITEBYTECODE="1",
        NPU_STUDIO_HOME=str(studio),
        FUZZ_AUDIT_LOG=str(opened),
        FUZZ_AUDIT_READ=os.pathsep.join([str(REPO), *python_roots, "/usr", "/lib", "/etc", "/proc", "/sys", "/dev",
                                         os.path.realpath(REPO / "assets" / "models")]),  # (a checkout may link it)
        FUZZ_AUDIT_WRITE=os.pathsep.join([str(studio), str(tmp_path / "tmpdir"), str(imported), "/dev/null"]),
        TMPDIR=str(tmp_path / "tmpdir"),
        AUDIT_IMPORT_LOG=str(imported),
    )
    child = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps([["models", "scan", "--json"]])], env=env, cwd=REPO,
        capture_output=True, text=True, timeout=CHILD_SECONDS,
    )  # fmt: skip
    assert child.returncode == 0 and "@@codes [0]" in child.stdout, child.stderr[-3000:]
    report = json.loads(child.stdout[: child.stdout.index("@@codes")])
    found = {Path(m["folder"]) for m in report["models"]}
    assert found == machine.real and report["loaded_models"] == 0
    blobs = _blob_names(machine.home)
    opened_files = [line.split(" ", 1) for line in opened.read_text().splitlines()] if opened.exists() else []
    names = {blobs.get(path, Path(path).name) for _, path in opened_files}
    writes = [path for mode, path in opened_files if mode == "write"]
    outside = sorted(path for _, path in opened_files if not path.startswith(str(machine.home.parent)))
    weights = sorted(n for n in names if n not in DESCRIBING and not n.endswith(".onnx"))
    modules = set(imported.read_text().split()) if imported.exists() else set()
    reliability.record(
        CATEGORY,
        "models scan: three Foundry Local models, a hub cache chat model and classifier, two AI Toolkit models (one "
        "where VS Code's settings moved them), a broken folder, a link loop, a link out, a pipe and 10,000 files",
        f"finds the {len(machine.real)} real models; opens only their describing files and ONNX heads (and VS Code's "
        "settings.json); imports no genai or onnx",
        f"{len(found)} found; opened {sorted(names)}; imported {sorted(modules) or 'nothing watched'}",
    )
    assert not writes and not outside, (writes, outside)
    assert weights == [], f"the scan opened more than the describing files: {weights}"
    assert "onnxruntime" in modules  # the audit sees imports: device discovery imports ONNX Runtime, no model
    assert not {"onnxruntime_genai", "onnx"} & modules, modules


def test_no_session_and_no_genai_model_is_made(
    machine: MachineHome, native_guard: NativeGuard, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    code = run(["models", "scan"])
    out = capsys.readouterr().out
    loads = [call for call in native_guard.calls if not call.startswith("onnxruntime.register_execution_provider")]
    reliability.record(CATEGORY, "models scan with the native load traps set", "no InferenceSession, og.Config or "
                       "og.Model is reached", f"exit {code}; traps reached: {loads or 'none'}")  # fmt: skip
    assert code == 0 and f"Found {len(machine.real)} models on this machine" in out
    assert "needs the Qualcomm NPU: not on this machine" in out
    assert loads == []


def test_a_model_added_by_reference_is_refused_once_a_file_changes(
    machine: MachineHome, native_guard: NativeGuard, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    assert run(["models", "add", str(machine.foundry_qnn), "--name", "foundry-qnn"]) == 0
    capsys.readouterr()
    config = machine.foundry_qnn / "genai_config.json"
    text = config.read_text(encoding="utf-8")
    config.unlink()  # never written through: the weights beside it are hard links to the test model
    config.write_text(text.replace('"burst"', '"balanced"'), encoding="utf-8")
    code = run(["chat", "--model", "foundry-qnn", "--device", "cpu", "--prompt", "hi"])
    err = capsys.readouterr().err.strip()
    reliability.record(CATEGORY, "models add (by reference), then its genai_config.json edited, then chat --model",
                       "refused in one line before anything native reads the folder", err)  # fmt: skip
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "'foundry-qnn' refers to" in err and "genai_config.json:" in err and "does not load it" in err
    assert native_guard.calls == []
