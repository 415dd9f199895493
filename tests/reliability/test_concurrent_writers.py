"""Four real processes writing one store at the same moment: the benchmark history (below and at its cap),
the settings, the model library (its trial verdicts and two imports of one name) and the conversations.
Nothing any of them wrote may be lost, no two may share a temporary file, and every child ends cleanly
(engines/shared_files.py, app/storage/conversations.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from app.storage.bench_history import MAX_RUNS, BenchHistory
from app.storage.settings import Settings, load_settings, settings_path
from engines.bench.data import BenchRun
from tests.fixtures.writers import WRITERS, run_writers
from tests.reliability.conftest import Recorder

CATEGORY = "Concurrent writers"
RUNS_EACH = 15


def _clean(results: list[object]) -> str:
    """"" when every child ended with 0 and said nothing on stderr, else what went wrong."""
    problems = [f"child {i}: exit {r.returncode}: {r.stderr.strip()[-400:]}"  # type: ignore[attr-defined]
                for i, r in enumerate(results) if r.returncode or r.stderr.strip()]  # type: ignore[attr-defined]
    return "; ".join(problems)


HISTORY_WRITER = """
from app.storage.bench_history import BenchHistory
from engines.bench.data import BenchRun
who, path, count = ARGS[0], ARGS[1], int(ARGS[2])
history = BenchHistory(path)
for i in range(count):
    history.append(BenchRun(f"w{who}-{i}", 1.0, 2.0, {"platform": "x"}, {"runs": 5}, ()))
"""
HISTORY_IMPORTS = "from app.storage.bench_history import BenchHistory\nfrom engines.bench.data import BenchRun\n"


def _run(run_id: str) -> BenchRun:
    return BenchRun(run_id, 1.0, 2.0, {"platform": "x"}, {"runs": 5}, ())


def test_four_processes_add_benchmark_runs_and_none_is_lost(tmp_path: Path, reliability: Recorder) -> None:
    path = tmp_path / "bench_history.jsonl"
    results = run_writers(HISTORY_WRITER, [[str(path), str(RUNS_EACH)]] * WRITERS, tmp_path, imports=HISTORY_IMPORTS)
    ids = [r.run_id for r in BenchHistory(path).runs()]
    expected = {f"w{w}-{i}" for w in range(WRITERS) for i in range(RUNS_EACH)}
    reliability.record(
        CATEGORY, f"benchmark history: {WRITERS} processes add {RUNS_EACH} runs each at once",
        f"all {len(expected)} runs kept", f"{len(set(ids) & expected)} of {len(expected)} runs kept",
    )
    assert _clean(results) == ""
    assert sorted(ids) == sorted(expected)
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_four_processes_at_the_history_cap_keep_the_newest_runs(tmp_path: Path, reliability: Recorder) -> None:
    path = tmp_path / "bench_history.jsonl"
    old = MAX_RUNS - 10
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(old):
            handle.write(json.dumps(_run(f"old-{i}").as_dict()) + "\n")
    results = run_writers(HISTORY_WRITER, [[str(path), str(RUNS_EACH)]] * WRITERS, tmp_path, imports=HISTORY_IMPORTS)
    ids = [r.run_id for r in BenchHistory(path).runs()]
    new = {f"w{w}-{i}" for w in range(WRITERS) for i in range(RUNS_EACH)}
    dropped = old + len(new) - MAX_RUNS
    reliability.record(
        CATEGORY, f"benchmark history at its {MAX_RUNS}-run cap: {WRITERS} processes add {RUNS_EACH} runs each",
        f"the cap kept; every new run kept, only the {dropped} oldest dropped; no shared temporary file",
        f"{len(ids)} runs kept, {len(new & set(ids))} of {len(new)} new ones; stderr: {_clean(results) or 'nothing'}",
    )
    assert _clean(results) == ""  # (a shared .tmp name made "could not compact" warnings)
    assert len(ids) == MAX_RUNS
    assert new <= set(ids)
    assert [i for i in ids if i.startswith("old-")] == [f"old-{i}" for i in range(dropped, old)]


SETTINGS_WRITER = """
import dataclasses
from app.storage.settings import load_settings, save_settings
who, count = int(ARGS[0]), int(ARGS[1])
field = ("top_k", "last_conversation", "system_prompt", "last_open_dir")[who]
for i in range(1, count + 1):
    settings, _ = load_settings()
    value = i if field in ("top_k", "last_conversation") else f"{field} {i}"
    save_settings(dataclasses.replace(settings, **{field: value}), since=settings)
"""


def test_four_processes_change_settings_and_none_is_undone(tmp_path: Path, reliability: Recorder) -> None:
    results = run_writers(SETTINGS_WRITER, [[str(RUNS_EACH)]] * WRITERS, tmp_path,
                          imports="from app.storage.settings import load_settings, save_settings\n")
    settings, notice = load_settings()
    expected = Settings(top_k=RUNS_EACH, last_conversation=RUNS_EACH, system_prompt=f"system_prompt {RUNS_EACH}",
                        last_open_dir=f"last_open_dir {RUNS_EACH}")
    kept = [f for f in ("top_k", "last_conversation", "system_prompt", "last_open_dir")
            if getattr(settings, f) == getattr(expected, f)]
    reliability.record(
        CATEGORY, f"settings: {WRITERS} processes each save their own setting {RUNS_EACH} times at once",
        "every process's last value kept (a save writes what it changed, under the lock)",
        f"{len(kept)} of {WRITERS} last values kept",
    )
    assert _clean(results) == "" and notice is None
    assert settings == expected
    assert not list(settings_path().parent.glob(".settings.json.*.tmp"))


VERDICT_WRITER = """
from engines.models import trial
who, file, count = ARGS[0], Path(ARGS[1]), int(ARGS[2])
for i in range(count):
    trial._save_verdict(file, f"model-{who}-{i}", Path(f"/models/{who}/{i}"))
"""


def test_four_processes_record_trial_verdicts_and_none_is_lost(tmp_path: Path, reliability: Recorder) -> None:
    file = tmp_path / "trials.json"
    results = run_writers(VERDICT_WRITER, [[str(file), str(RUNS_EACH)]] * WRITERS, tmp_path,
                          imports="from engines.models import trial\n")
    passed = json.loads(file.read_text(encoding="utf-8"))["passed"]
    expected = {f"model-{w}-{i}" for w in range(WRITERS) for i in range(RUNS_EACH)}
    reliability.record(
        CATEGORY, f"model library: {WRITERS} processes record {RUNS_EACH} trial verdicts each at once",
        "every verdict kept", f"{len(expected & set(passed))} of {len(expected)} verdicts kept",
    )
    assert _clean(results) == ""
    assert set(passed) == expected


COMMIT_WRITER = """
import hashlib
from engines.errors import ModelError
from engines.models.library import commit_folder
who, user, name = ARGS[0], Path(ARGS[1]), ARGS[2]
work = user / f".import-{who}"
work.mkdir(parents=True)
(work / "model.onnx").write_bytes(b"model " + who.encode())
digest = hashlib.sha256((work / "model.onnx").read_bytes()).hexdigest()
try:
    commit_folder(work, user, name, lambda folder, n: {"schema": 1, "name": n, "kind": "image-classifier"},
                  {"model.onnx": digest})
    print("committed")
except ModelError as exc:
    print("refused:", exc.message)
"""


def test_four_imports_of_one_name_at_once_make_one_model(tmp_path: Path, reliability: Recorder) -> None:
    user = tmp_path / "models"
    user.mkdir()
    names = ["vision", "Vision", "VISION", "vision"]  # one folder on Windows and macOS
    results = run_writers(COMMIT_WRITER, [[str(user), n] for n in names], tmp_path,
                          imports="from engines.models.library import commit_folder\n")
    outcomes = [r.stdout.strip() for r in results]
    folders = [p.name for p in user.iterdir() if not p.name.startswith(".")]
    reliability.record(
        CATEGORY, f"model library: {WRITERS} imports commit 'vision', 'Vision', 'VISION', 'vision' at once",
        "one model; the others refused with the reason",
        f"{len(folders)} model folder, {outcomes.count('committed')} committed, "
        f"{sum('only in case' in o or 'already in your library' in o for o in outcomes)} refused with the reason",
    )  # (counts: which of the four wins is up to the race)
    assert _clean(results) == ""
    assert len(folders) == 1 and outcomes.count("committed") == 1
    assert all(o == "committed" or ("already in your library" in o or "only in case" in o) for o in outcomes)


CONVERSATION_WRITER = """
from app.storage.conversations import ConversationStore
who, db, count = ARGS[0], Path(ARGS[1]), int(ARGS[2])
store = ConversationStore(db)
conversation = store.create(f"writer {who}")
for i in range(count):
    store.add_message(conversation.id, "user", f"{who}-{i}")
store.close()
"""


def test_four_processes_write_one_new_conversation_database(tmp_path: Path, reliability: Recorder) -> None:
    db = tmp_path / "conversations.db"
    results = run_writers(CONVERSATION_WRITER, [[str(db), str(RUNS_EACH)]] * WRITERS, tmp_path,
                          imports="from app.storage.conversations import ConversationStore\n")
    with sqlite3.connect(db) as conn:
        texts = {row[0] for row in conn.execute("SELECT text FROM messages")}
        conversations = conn.execute("SELECT count(*) FROM conversations").fetchone()[0]
    expected = {f"{w}-{i}" for w in range(WRITERS) for i in range(RUNS_EACH)}
    reliability.record(
        CATEGORY, f"conversations: {WRITERS} processes open a new database at once and add {RUNS_EACH} messages each",
        "every conversation and message kept (the schema is created once)",
        f"{conversations} conversations, {len(texts & expected)} of {len(expected)} messages; "
        f"stderr: {_clean(results)[:200] or 'nothing'}",
    )
    assert _clean(results) == ""
    assert conversations == WRITERS and texts == expected
