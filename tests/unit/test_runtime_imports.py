"""ONNX Runtime and onnxruntime-genai are imported in one place (engines/runtime/__init__.py), which turns
their telemetry off: no other module of the app imports either by name, and in a real process the import
and the real `disable_telemetry_events` call both come from there (recorded by
tests/fixtures/runtime_watch/sitecustomize.py, which every Python process with it on its PYTHONPATH loads)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WATCH = REPO / "tests" / "fixtures" / "runtime_watch"
HELPER = REPO / "engines" / "runtime" / "__init__.py"
RUNTIME_NAMES = ("onnxruntime", "onnxruntime_genai")


def _imports_a_runtime(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [node.module]
    elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
          and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) in ("import_module",
                                                                                              "__import__")
          and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        names = [node.args[0].value]
    else:
        return None
    hits = [n for n in names if n.partition(".")[0] in RUNTIME_NAMES]
    return hits[0] if hits else None


def test_no_module_but_the_runtime_boundary_imports_a_runtime() -> None:
    found: list[str] = []
    for package in ("app", "ui", "engines", "installer"):
        for path in sorted((REPO / package).rglob("*.py")):
            if path == HELPER:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                name = _imports_a_runtime(node)
                if name is not None:
                    found.append(f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')} imports {name}")
    assert found == [], "import it through engines.runtime (load, ort, import_genai):\n" + "\n".join(found)


def watched(code: str, tmp_path: Path, **env: str) -> list[dict[str, Any]]:
    """Run `code` in a fresh Python with the runtime watch loaded; its records."""
    log = tmp_path / "runtime-watch.jsonl"
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(WATCH), str(REPO)]), "RUNTIME_WATCH_LOG": str(log),
               **env}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=environ, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def assert_quiet(records: list[dict[str, Any]], modules: tuple[str, ...]) -> None:
    """Each of `modules` imported by the runtime boundary, then its real telemetry switch called from there."""
    events = [(r["event"], r["module"], Path(r["by"])) for r in records]
    for module in modules:
        assert ("import", module, HELPER) in events, events
        assert ("telemetry-off", module, HELPER) in events, events
        assert events.index(("import", module, HELPER)) < events.index(("telemetry-off", module, HELPER))
    assert {m for _, m, _ in events} == set(modules), events


def test_the_runtime_boundary_turns_both_telemetries_off(tmp_path: Path) -> None:
    records = watched("""
        from engines import runtime
        runtime.ort()
        runtime.import_genai()
        runtime.load("onnxruntime.quantization")  # a submodule: the runtime under it comes through the boundary
        assert runtime.telemetry_off() == {"onnxruntime", "onnxruntime_genai"}
    """, tmp_path)
    assert_quiet(records, RUNTIME_NAMES)
    assert sum(r["event"] == "telemetry-off" for r in records) == 2  # once per runtime


def test_a_cpu_only_genai_process_turns_genais_off_without_loading_onnxruntime(tmp_path: Path) -> None:
    if sys.platform == "win32":
        pytest.skip("on Windows genai always comes after ONNX Runtime")  # (import_genai's rule)
    records = watched("""
        import sys
        from engines import runtime
        runtime.import_genai(runtime_first=False)
        assert "onnxruntime" not in sys.modules
    """, tmp_path)
    assert_quiet(records, ("onnxruntime_genai",))


def test_the_apps_preload_comes_through_the_boundary(tmp_path: Path) -> None:
    records = watched("""
        from app.hosts.jobs import import_serialized
        import_serialized()  # numpy, Pillow, ONNX Runtime: what the app's workers import first
        import_serialized("onnxruntime", "onnxruntime_genai")  # the chat host's
    """, tmp_path)
    assert_quiet(records, RUNTIME_NAMES)
