"""Benchmark history: one JSON line per run in the user data folder (`bench_history.jsonl`).

JSON lines because a run is written once and read back whole: appending a line never rewrites older
runs, a crash mid-write damages at most the last line, and a damaged line is skipped (and logged)
instead of losing the history.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from app import paths
from engines.bench.data import BenchRun
from engines.errors import StorageError

log = logging.getLogger(__name__)

HISTORY_FILE = "bench_history.jsonl"
MAX_RUNS = 200  # older runs are dropped when the file is compacted


class BenchHistory:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else paths.data_dir() / HISTORY_FILE

    def append(self, run: BenchRun) -> None:
        line = json.dumps(run.as_dict(), ensure_ascii=False, separators=(",", ":"))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:
            raise StorageError(
                f"The benchmark could not be saved to {self.path}: {exc.strerror or exc}.",
                "Free some disk space or check the folder's permissions; the results are still shown.",
            ) from exc
        self._compact_if_needed()

    def runs(self) -> list[BenchRun]:
        """Every readable run, oldest first."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"The benchmark history {self.path} cannot be read: {exc.strerror or exc}.") from exc
        runs: list[BenchRun] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                runs.append(BenchRun.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("skipping damaged line %d of %s: %s", number, self.path, exc)
        return runs

    def get(self, run_id: str) -> BenchRun | None:
        return next((run for run in self.runs() if run.run_id == run_id), None)

    def clear(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(f"The benchmark history {self.path} cannot be removed: {exc.strerror or exc}.") from exc

    def _compact_if_needed(self) -> None:
        runs = self.runs()
        if len(runs) <= MAX_RUNS:
            return
        tmp = self.path.with_suffix(".tmp")
        lines = [json.dumps(r.as_dict(), ensure_ascii=False, separators=(",", ":")) for r in runs[-MAX_RUNS:]]
        try:
            tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not compact %s: %s", self.path, exc)
