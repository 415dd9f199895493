"""Hostile-folder fuzzing: seeded random mutations of the demo model folders' JSON files (the classifier's
manifest, the chat model's genai_config.json, tokenizer_config.json and manifest) — wrong types, paths out
of the folder, absurd sizes, deep nesting, missing keys — each driven through `models import`,
`classify --model` / `chat --model`, `quantize` and `bench` in one child process per mutation, bounded
in time, with a Python audit hook (installed by a `sitecustomize` in every Python process it starts,
model trials included) that records every file opened outside the places a run may touch.

A mutation passes when: no traceback, no crash signal, no hang past the bound, every command exits 0, 1
or 2 (2 with one `npu-studio: error:` line), no file read or written outside the model folder and the
run's own folders (a secret file next to the folder is the bait), and nothing left behind (no work
folder, no stray process). `NPU_STUDIO_FUZZ_CASES` and `NPU_STUDIO_FUZZ_SEED` change the count and seed.

(The hook sees opens made from Python; files onnxruntime opens natively are covered by the path rules
checked before any native load, tests/reliability/test_untrusted_models.py.)"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import psutil
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

from tests.reliability.conftest import REPO, Recorder

CATEGORY = "Hostile folders (fuzz)"
CASES = int(os.environ.get("NPU_STUDIO_FUZZ_CASES", "12"))
SEED = int(os.environ.get("NPU_STUDIO_FUZZ_SEED", "20261201"))
CHILD_SECONDS = 90

SITECUSTOMIZE = '''
import os, sys
_log = os.environ.get("FUZZ_AUDIT_LOG")
if _log:
    _fd = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    _read = tuple(p for p in os.environ["FUZZ_AUDIT_READ"].split(os.pathsep) if p)
    _write = tuple(p for p in os.environ["FUZZ_AUDIT_WRITE"].split(os.pathsep) if p)
    _busy = []

    def _inside(path, roots):
        return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)

    def _hook(event, args):
        if event != "open" or _busy or not isinstance(args[0], (str, bytes)):
            return
        _busy.append(1)
        try:
            path = os.path.realpath(os.fsdecode(args[0]))
            mode, flags = args[1], args[2] or 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
                flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            if not _inside(path, _write if writing else _read + _write):
                os.write(_fd, (("write " if writing else "read ") + path + "\\n").encode("utf-8", "replace"))
        finally:
            _busy.pop()

    sys.addaudithook(_hook)
'''

DRIVER = """
import json, sys
from app.cli import run
results = []
for args in json.loads(sys.argv[1]):
    code = run(args)
    sys.stderr.write("\\n@@end %s\\n" % args[0])
    results.append(code)
print("@@codes " + json.dumps(results))
"""


# --- the base folders ----------------------------------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def classifier_base(demo: Path, target: Path) -> Path:
    """The demo classifier's manifest and labels around a tiny model with the same contract (input
    'input' 1x3x224x224, output 'logits' x1000), so that quantize and bench take a second, not a minute."""
    target.mkdir(parents=True)
    manifest = json.loads((demo / "manifest.json").read_text(encoding="utf-8"))
    spec = manifest["classifier"]
    classes = len((demo / "labels.txt").read_text(encoding="utf-8").split("\n")) - 1
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("GlobalAveragePool", [spec["input"]], ["pooled"]),
         helper.make_node("Flatten", ["pooled"], ["flat"]),
         helper.make_node("Gemm", ["flat", "W", "B"], [spec["output"]])],
        "tiny",
        [helper.make_tensor_value_info(spec["input"], TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info(spec["output"], TensorProto.FLOAT, ["N", classes])],
        [numpy_helper.from_array(rng.normal(size=(3, classes)).astype(np.float32), "W"),
         numpy_helper.from_array(np.zeros(classes, np.float32), "B")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, target / "model.onnx")
    (target / "labels.txt").write_bytes((demo / "labels.txt").read_bytes())
    for entry in manifest["files"]:
        file = target / entry["path"]
        entry.update(size=file.stat().st_size, sha256=_sha(file))
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return target


def chat_base(demo: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for file in demo.iterdir():
        if file.suffix in (".json", ".jinja"):
            (target / file.name).write_bytes(file.read_bytes())  # mutated: real copies
        else:
            try:
                os.link(file.resolve(), target / file.name)  # weights: never written, hard links are instant
            except OSError:
                (target / file.name).write_bytes(file.read_bytes())
    return target


# --- mutations -----------------------------------------------------------------------------------------


def _values(rng: random.Random, outside: Path) -> list[Any]:
    deep: Any = 1
    for _ in range(rng.choice([60, 300, 5000])):
        deep = [deep]
    return [
        None, True, -1, 0, 2**63, 1e308, -1e308, 3.5, "", "abc", "model.onnx", [], {}, [1, "a", None],
        {"a": {"b": {}}}, "../outside/secret.txt", str(outside / "secret.txt"), "sub/../../outside/secret.txt",
        "/dev/zero", "C:\\\\Windows\\\\System32\\\\evil.dll", "con", "a" * 300, "é/ü/\u202e.onnx", "x" * 200_000,
        deep, [{"path": "../outside/secret.txt", "size": 1}], {"custom_ops_library": "libevil.so"},
    ]  # fmt: skip


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            found += _paths(item, (*prefix, index))
    return found


def mutate(data: Any, rng: random.Random, outside: Path) -> tuple[Any, str]:
    """One random edit of a parsed JSON document, and what it was."""
    data = copy.deepcopy(data)
    where = rng.choice(_paths(data))
    parent = data
    for key in where[:-1]:
        parent = parent[key]
    last = where[-1]
    label = ".".join(str(k) for k in where)
    action = rng.random()
    if action < 0.15 and isinstance(parent, dict):
        del parent[last]
        return data, f"{label} removed"
    value = rng.choice(_values(rng, outside))
    parent[last] = value
    shown = json.dumps(value)[:40] if not isinstance(value, list) or len(json.dumps(value)) < 60 else "[[[...]]]"
    return data, f"{label} = {shown}"


def _write_json(path: Path, data: Any, rng: random.Random) -> None:
    text = json.dumps(data, ensure_ascii=rng.random() < 0.5)
    if rng.random() < 0.1:
        text = text[: rng.randrange(1, max(2, len(text)))]  # cut short
    path.unlink(missing_ok=True)
    path.write_text(text, encoding="utf-8")


# --- the run -------------------------------------------------------------------------------------------


def _commands(kind: str, folder: Path, calibration: Path, out: Path, samples: Path) -> list[list[str]]:
    if kind == "classifier":
        return [
            ["models", "import", str(folder), "--name", "fuzzed"],
            ["classify", "--model", str(folder), str(samples / "chelsea.png")],
            ["quantize", str(folder), "--calibration", str(calibration), "--out", str(out), "--no-augment",
             "--runs", "2"],
            ["bench", "--model", str(folder), "--devices", "cpu", "--runs", "5", "--batch", "2", "--no-progress",
             "--no-save"],
        ]  # fmt: skip
    return [
        ["models", "import", str(folder), "--name", "fuzzed"],
        ["chat", "--model", str(folder), "--prompt", "hi", "--max-new-tokens", "3"],
        ["bench", "--model", str(folder), "--devices", "cpu", "--runs", "5", "--chat-tokens", "3",
         "--chat-rounds", "1", "--no-progress", "--no-save"],
    ]  # fmt: skip


def run_case(folder: Path, commands: list[list[str]], work: Path, audit_read: list[Path]) -> dict[str, Any]:
    site = work / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE), encoding="utf-8")
    home, tmp = work / "home", work / "tmpdir"
    tmp.mkdir(exist_ok=True)
    log = work / "audit.log"
    log.unlink(missing_ok=True)
    python_roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
        PYTHONDONTWRITEBYTECODE="1",
        NPU_STUDIO_HOME=str(home),
        NPU_STUDIO_TRIAL_SECONDS="15",
        TMPDIR=str(tmp),
        FUZZ_AUDIT_LOG=str(log),
        FUZZ_AUDIT_READ=os.pathsep.join(
            [str(folder), str(REPO), *map(str, audit_read), *python_roots, "/usr", "/lib", "/etc", "/proc", "/sys",
             "/dev/null", "/dev/urandom", os.path.realpath(str(REPO / "assets" / "models"))]),
        FUZZ_AUDIT_WRITE=os.pathsep.join([str(home), str(tmp), str(work / "outputs"), "/dev/null"]),
    )  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(commands)], env=env, cwd=REPO, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        out, err = child.communicate(timeout=CHILD_SECONDS)
        hung = False
    except subprocess.TimeoutExpired:
        for process in psutil.Process(child.pid).children(recursive=True):
            process.kill()
        child.kill()
        out, err = child.communicate()
        hung = True
    codes_line = next((line for line in out.splitlines() if line.startswith("@@codes ")), "@@codes null")
    return {
        "returncode": child.returncode,
        "hung": hung,
        "codes": json.loads(codes_line.removeprefix("@@codes ")),
        "stderr": err,
        "outside": sorted(set(log.read_text(encoding="utf-8").splitlines())) if log.exists() else [],
        "left": sorted(
            str(p.relative_to(work))
            for p in [*home.rglob(".import-*"), *(work / "outputs").glob(".*"), *tmp.iterdir()]
            if p.name != ".ses"  # onnxruntime's own session marker in TMPDIR, not work of NPU Studio's
        ),
    }


def _problems(result: dict[str, Any]) -> list[str]:
    problems = []
    if result["hung"]:
        problems.append(f"still running after {CHILD_SECONDS} s")
    if result["returncode"] != 0:
        problems.append(f"the process ended with {result['returncode']}")
    if "Traceback" in result["stderr"] or "--- Logging error ---" in result["stderr"]:
        problems.append("a traceback on stderr")
    if result["codes"] is not None and any(code not in (0, 1, 2) for code in result["codes"]):
        problems.append(f"exit codes {result['codes']}")
    for chunk in result["stderr"].split("@@end ")[:-1]:
        errors = [line for line in chunk.splitlines() if line.startswith("npu-studio: ")]
        if any("unexpected error" in line for line in errors):
            problems.append(f"an unexpected error: {errors}")
    if result["outside"]:
        problems.append(f"opened outside: {result['outside'][:5]}")
    if result["left"]:
        problems.append(f"left behind: {result['left']}")
    return problems


Base = Callable[[Path, Path], Path]


def test_hostile_folder_fuzz(
    demo_classifier: Path, demo_chat_model: Path, samples: Path, tmp_path: Path, reliability: Recorder
) -> None:
    rng = random.Random(SEED)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("root:secret-that-must-never-be-read\n", encoding="utf-8")
    calibration = tmp_path / "calibration"
    calibration.mkdir()
    Image.open(samples / "chelsea.png").convert("RGB").resize((64, 48)).save(calibration / "cat.png")
    targets: list[tuple[str, str, Base]] = [
        ("classifier", "manifest.json", lambda d, t: classifier_base(demo_classifier, t)),
        ("chat", "genai_config.json", lambda d, t: chat_base(demo_chat_model, t)),
        ("chat", "tokenizer_config.json", lambda d, t: chat_base(demo_chat_model, t)),
        ("chat", "manifest.json", lambda d, t: chat_base(demo_chat_model, t)),
    ]
    failures: list[str] = []
    outcomes: dict[int, int] = {0: 0, 1: 0, 2: 0}
    before = {p.pid for p in psutil.Process().children(recursive=True)}  # other tests' helpers, not ours
    for number in range(CASES):
        kind, file_name, make = targets[number % len(targets)] if number < len(targets) else rng.choice(targets)
        work = tmp_path / f"case-{number}"
        folder = make(Path(), work / "model")
        document = json.loads((folder / file_name).read_text(encoding="utf-8"))
        edits = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            document, edit = mutate(document, rng, outside)
            edits.append(edit)
        _write_json(folder / file_name, document, rng)
        (work / "outputs").mkdir()
        commands = _commands(kind, folder, calibration, work / "outputs" / "out", samples)
        result = run_case(folder, commands, work, [calibration, samples])
        for code in result["codes"] or []:
            outcomes[code] = outcomes.get(code, 0) + 1
        problems = _problems(result)
        if problems:
            failures.append(f"case {number} ({file_name}: {'; '.join(edits)}): {'; '.join(problems)}\n"
                            f"{result['stderr'][-1500:]}")  # fmt: skip
        leftover = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        if leftover:
            failures.append(f"case {number}: trial processes left running: {[p.pid for p in leftover]}")
    reliability.record(
        CATEGORY,
        f"{CASES} seeded mutations (seed {SEED}) of the demo folders' JSON, each through import, classify/chat, "
        "quantize and bench",
        "no traceback, crash, hang, file outside the folder, or leftover",
        f"{len(failures)} problems; command exits: {outcomes[0]} ok, {outcomes[1]} failed result, "
        f"{outcomes[2]} refused",
    )
    assert not failures, "\n\n".join(failures)
