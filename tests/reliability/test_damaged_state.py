"""Damaged state repairs itself and never stops NPU Studio (engines/jsonfile.py is the one reader of
user-writable JSON): settings, model manifests and genai configs, benchmark history lines and database
values of the wrong type, deep nesting, and files that are not files."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from app import paths
from app.cli import run
from app.storage import bench_history
from app.storage.bench_history import BenchHistory
from app.storage.conversations import ConversationStore
from app.storage.settings import Settings, load_settings
from engines.bench.data import BenchRun, DeviceResult
from tests.reliability.conftest import Recorder
from tests.unit.tiny_models import colour_classifier

CATEGORY = "Damaged state"
DEEP = b"[" * 50_000 + b"]" * 50_000


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = run(args)
    captured = capsys.readouterr()
    err = "\n".join(line for line in captured.err.splitlines() if not line.startswith("Importing "))
    return code, captured.out, err.strip()


# --- settings -----------------------------------------------------------------------------------------

SETTINGS = [
    ("settings.json nested 50,000 levels deep", DEEP),
    ("settings.json an object nested 50,000 levels deep", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    ("settings.json with a 5,000-digit number", b'{"top_k": ' + b"9" * 5000 + b"}"),
]


@pytest.mark.parametrize(("name", "content"), SETTINGS, ids=[s[0] for s in SETTINGS])
def test_deeply_nested_or_absurd_settings_start_with_defaults(name: str, content: bytes, reliability: Recorder) -> None:
    path = paths.config_dir() / "settings.json"
    path.write_bytes(content)
    settings, notice = load_settings()
    reliability.record(CATEGORY, name, "defaults, a backup, one notice", notice)
    assert notice is not None
    if "number" in name:
        assert settings.top_k == Settings().top_k
    else:
        assert settings == Settings() and list(path.parent.glob("settings.json.bad-*"))


def test_settings_that_are_a_fifo_do_not_hang_start_up(reliability: Recorder) -> None:
    path = paths.config_dir() / "settings.json"
    os.mkfifo(path)
    result: list[object] = []
    reader = threading.Thread(target=lambda: result.append(load_settings()), daemon=True)
    reader.start()
    reader.join(5)
    assert result, "load_settings blocked on a FIFO"
    settings, notice = result[0]  # type: ignore[misc]
    reliability.record(CATEGORY, "settings.json is a FIFO (a named pipe)", "start-up goes on with defaults", notice)
    assert settings == Settings() and notice is not None
    assert not path.exists() or path.is_file()


def test_settings_with_every_value_of_the_wrong_type(reliability: Recorder) -> None:
    path = paths.config_dir() / "settings.json"
    path.write_text(json.dumps({"theme": {"a": [1]}, "top_k": 1e308, "chat_options": [1], "strict": "yes",
                                "device": None, "window_geometry": 5}), encoding="utf-8")  # fmt: skip
    settings, notice = load_settings()
    reliability.record(CATEGORY, "settings.json with every value of the wrong type",
                       "each bad value named and ignored", notice)
    assert notice is not None and settings == Settings()


# --- model folders ------------------------------------------------------------------------------------

MANIFESTS: list[tuple[str, bytes]] = [
    ("a user model's manifest nested 50,000 levels deep", DEEP),
    ("a user model's manifest with 'files' a string and 'kind' a number",
     json.dumps({"schema": 1, "kind": 5, "files": "model.onnx", "devices": {}}).encode()),
    ("a user model's manifest whose files are numbers and nulls",
     json.dumps({"schema": 1, "kind": "image-classifier", "files": [1, None, {"path": 3, "size": "x"}]}).encode()),
    ("a user model's manifest.json that is a folder", b""),
]  # fmt: skip


@pytest.mark.parametrize(("name", "content"), MANIFESTS, ids=[m[0] for m in MANIFESTS])
def test_one_damaged_user_model_does_not_break_the_library(
    name: str, content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    good = colour_classifier(tmp_path / "good")
    assert _cli(["models", "import", str(good), "--name", "good"], capsys)[0] == 0
    bad = paths.user_models_dir() / "damaged"
    bad.mkdir()
    if content:
        (bad / "manifest.json").write_bytes(content)
    else:
        (bad / "manifest.json").mkdir()
    code, out, _ = _cli(["models", "list", "--json"], capsys)
    listed = {e["name"]: e for e in json.loads(out)}
    problem = listed["damaged"]["problem"]
    reliability.record(CATEGORY, f"models list: {name}", "only that model is marked; the others are listed", problem)
    assert code == 0 and listed["good"]["problem"] == "" and problem
    assert _cli(["models", "verify", "good"], capsys)[0] == 0


GENAI_EDITS = [
    ('"search": []', lambda c: c.update(search=[])),
    ('"max_length": "abc"', lambda c: c["search"].update(max_length="abc")),
    ('"num_hidden_layers": "many" and "context_length" 1e300', lambda c: c["model"]["decoder"].update(
        num_hidden_layers="many") or c["model"].update(context_length=1e300)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "edit"), GENAI_EDITS, ids=[g[0] for g in GENAI_EDITS])
def test_a_genai_folder_with_odd_config_values_never_breaks_models_list(
    name: str, edit: object, demo_chat_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:  # fmt: skip
    from tests.reliability.test_model_code import chat_folder

    folder = chat_folder(demo_chat_model, tmp_path / "odd-llm")
    config_file = folder / "genai_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config_file.unlink()  # a hard link to the demo's file: write a new file, never through the link
    edit(config)  # type: ignore[operator]
    config_file.write_text(json.dumps(config), encoding="utf-8")
    code, _, err = _cli(["models", "import", str(folder), "--name", "odd"], capsys)
    listed_code, out, _ = _cli(["models", "list", "--json"], capsys)
    names = [e["name"] for e in json.loads(out)]
    reliability.record(CATEGORY, f"genai folder with {name}: import, then models list",
                       "refused with the reason, or imported; models list always works",
                       err or "imported; models list works")  # fmt: skip
    assert listed_code == 0 and "efficientnet-lite0" in names
    assert code == 0 or (code == 2 and err.startswith("npu-studio: error:"))


# --- benchmark history --------------------------------------------------------------------------------


def _run(run_id: str) -> BenchRun:
    result = DeviceResult(model="m", kind="vision", device="CPU", status="ok", ep="CPUExecutionProvider")
    return BenchRun(run_id=run_id, started=time.time(), seconds=1.0, machine={}, settings={}, results=(result,))


BAD_LINES = [
    ("a line nested 50,000 levels deep", DEEP.decode()),
    ("a line that is a JSON list", "[1, 2, 3]"),
    ("a line whose numbers are strings", json.dumps({**_run("x").as_dict(), "started": "yesterday"})),
    ("a result whose latency p50 is a string", json.dumps({**_run("y").as_dict(), "results": [
        {**_run("y").results[0].as_dict(), "latency": {"p50": "fast", "p90": 1, "p99": 1, "mean": 1, "count": 1}}]})),
    ("half a line (a crash mid-write)", json.dumps(_run("z").as_dict())[:40]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "line"), BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_a_damaged_history_line_costs_only_itself(
    name: str, line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    history = BenchHistory(tmp_path / "history.jsonl")
    history.append(_run("first"))
    with open(history.path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    history.append(_run("second"))
    runs = [r.run_id for r in history.runs()]
    monkeypatch.setattr(bench_history, "MAX_RUNS", 2)
    history.append(_run("third"))  # compaction: the damaged line is set aside, the good runs kept
    kept = [r.run_id for r in history.runs()]
    aside = history.path.with_name(history.path.name + ".bad")
    reliability.record(CATEGORY, f"benchmark history: {name}", "skipped; set aside when the file is compacted",
                       f"read {runs}; after compaction {kept}; {len(aside.read_text().splitlines())} line set aside")
    assert runs == ["first", "second"] and kept == ["second", "third"]
    assert aside.read_text(encoding="utf-8").strip() == line.strip()


# --- conversations database ---------------------------------------------------------------------------

DB_EDITS = [
    ("updated = 'tomorrow'", "UPDATE conversations SET updated = 'tomorrow'"),
    ("created 'never' and a title that is a blob", "UPDATE conversations SET created = 'never', title = x'ff00fe'"),
    ("a message created 1e300 with stats '[[[['", "UPDATE messages SET created = 1e300, stats = '[[[['"),
    ("a message text that is a number", "UPDATE messages SET text = 42"),
]


@pytest.mark.parametrize(("name", "sql"), DB_EDITS, ids=[d[0] for d in DB_EDITS])
def test_database_values_of_the_wrong_type_do_not_stop_the_app(name: str, sql: str, reliability: Recorder) -> None:
    path = paths.data_dir() / "conversations.db"
    with ConversationStore(path) as store:
        conversation = store.create("Trip")
        store.add_message(conversation.id, "user", "hello")
    connection = sqlite3.connect(path)
    connection.execute(sql)
    connection.commit()
    connection.close()
    with ConversationStore(path) as store:  # what the app does at start and when a conversation is opened
        listed = store.list()
        messages = store.messages(conversation.id)
        exported = store.export_markdown(conversation.id)
    reliability.record(CATEGORY, f"conversations.db with {name}", "listed, opened and exported with defaults",
                       f"{len(listed)} conversation, {len(messages)} message, export {len(exported)} chars")
    assert len(listed) == 1 and len(messages) == 1 and isinstance(messages[0].text, str)
    assert isinstance(listed[0].updated, float) and exported.startswith("# ")


def test_a_damaged_user_model_still_leaves_the_app_library_usable(tmp_path: Path, reliability: Recorder) -> None:
    from app.hosts.models import ModelsWorker

    good = paths.user_models_dir() / "good"
    shutil.copytree(colour_classifier(tmp_path / "good"), good)
    (paths.user_models_dir() / "deep").mkdir()
    (paths.user_models_dir() / "deep" / "manifest.json").write_bytes(DEEP)
    snapshot = ModelsWorker().snapshot()
    names = {e.name: e for e in snapshot.entries}
    reliability.record(CATEGORY, "the app's Models view: a user manifest nested 50,000 levels deep",
                       "the library loads; that model is marked", names["deep"].problem)  # fmt: skip
    assert "good" in names and names["deep"].problem and not names["deep"].usable
