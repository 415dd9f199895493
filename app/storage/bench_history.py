"""Benchmark history: one JSON line per run in the user data folder (`bench_history.jsonl`).

JSON lines because a run is written once and read back whole: appending a line never rewrites older
runs, a crash mid-write damages at most the last line, and a damaged line is skipped (and logged)
instead of losing the history.

Several processes add runs at once (the app and `npu-studio bench` commands): each append, and the
compaction to the newest MAX_RUNS that may follow it, happens under the history's lock
(engines/shared_files.py), so no run is lost to another writer's compaction and no two writers share a
temporary file.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import types
import typing
from pathlib import Path
from typing import Any

from app import paths
from engines import BenchRun, JsonFileError, StorageError, locked_file, parse_json, read_json_bytes, write_atomically

log = logging.getLogger(__name__)

HISTORY_FILE = "bench_history.jsonl"
MAX_RUNS = 200  # older runs are dropped when the file is compacted
MAX_HISTORY_BYTES = 256 << 20  # 200 runs of a few hundred KB at most; past this the file is not ours


class BenchHistory:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else paths.data_dir() / HISTORY_FILE

    def append(self, run: BenchRun) -> None:
        line = json.dumps(run.as_dict(), ensure_ascii=False, separators=(",", ":"))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with locked_file(self.path):
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
                self._compact_if_needed()
        except OSError as exc:
            raise StorageError(
                f"The benchmark could not be saved to {self.path}: {exc.strerror or exc}.",
                "Free some disk space or check the folder's permissions; the results are still shown.",
            ) from exc

    def runs(self) -> list[BenchRun]:
        """Every readable run, oldest first; a damaged line is skipped (and logged once per read)."""
        return self._read()[0]

    def _read(self) -> tuple[list[BenchRun], list[str]]:
        """(the readable runs, the damaged lines as they are in the file)."""
        try:
            raw = read_json_bytes(self.path, max_bytes=MAX_HISTORY_BYTES)
        except JsonFileError as exc:
            if exc.missing:
                return [], []
            if exc.kind == "unreadable":
                raise StorageError(f"The benchmark history {self.path} cannot be read: {exc.detail}.") from None
            raise StorageError(
                f"The benchmark history {self.path} cannot be used: {exc.problem}.",
                "Remove the file (`npu-studio bench --clear-history` or delete it); new runs start a new history.",
            ) from None
        runs: list[BenchRun] = []
        damaged: list[str] = []
        for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                runs.append(checked_run(parse_json(line)))
            except Exception as exc:  # any damage in one line costs that line only
                damaged.append(line)
                if len(damaged) == 1:
                    log.warning("skipping damaged line %d of %s: %s", number, self.path, exc)
        if len(damaged) > 1:
            log.warning("%d damaged lines in %s were skipped", len(damaged), self.path)
        return runs, damaged

    def get(self, run_id: str) -> BenchRun | None:
        return next((run for run in self.runs() if run.run_id == run_id), None)

    def clear(self) -> None:
        try:
            with locked_file(self.path):
                self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(f"The benchmark history {self.path} cannot be removed: {exc.strerror or exc}.") from exc

    def _compact_if_needed(self) -> None:
        """Keep the newest MAX_RUNS runs (the caller holds the lock)."""
        try:
            runs, damaged = self._read()
        except StorageError as exc:
            log.warning("could not compact %s: %s", self.path, exc)
            return
        if len(runs) <= MAX_RUNS:
            return
        lines = [json.dumps(r.as_dict(), ensure_ascii=False, separators=(",", ":")) for r in runs[-MAX_RUNS:]]
        try:
            if damaged:  # set aside, not dropped: the user may want to look at what was damaged
                with open(self.path.with_name(self.path.name + ".bad"), "a", encoding="utf-8") as bad:
                    bad.write("\n".join(damaged) + "\n")
            write_atomically(self.path, ("\n".join(lines) + "\n").encode("utf-8"), mode=0o644)
        except OSError as exc:
            log.warning("could not compact %s: %s", self.path, exc)


def checked_run(data: object) -> BenchRun:
    """A run from one history line, refused (ValueError) unless every field has the type it declares:
    a line edited by hand must not reach the charts with a string where a number is drawn."""
    if not isinstance(data, dict):
        raise ValueError(f"a run is a JSON object, not {type(data).__name__}")
    run = BenchRun.from_dict(data)
    _check_types(run, "run")
    return run


def _check_types(value: object, where: str) -> None:
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return
    hints = typing.get_type_hints(type(value))
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if not _matches(item, hints[f.name]):
            raise ValueError(f"{where}.{f.name} is {item!r:.40}, not {hints[f.name]}")
        if isinstance(item, tuple):
            for element in item:
                _check_types(element, f"{where}.{f.name}[]")
        _check_types(item, f"{where}.{f.name}")


def _matches(value: object, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is bool:
        return isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is tuple:
        args = typing.get_args(hint)
        return isinstance(value, tuple) and (len(args) != 2 or args[1] is not Ellipsis
                                             or all(_matches(v, args[0]) for v in value))
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True
