"""The reliability report: every bad input and fault the reliability tests tried, and what the user saw.

The tests record cases (tests/reliability/conftest.py); a session that ran the whole suite writes
`docs/RELIABILITY.md` with `render`. `parse` reads a committed report back, so that a test can tell when
the committed file no longer lists what the tests do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "docs" / "RELIABILITY.md"

# Report sections, in order (a case in any other category is an error in the test that records it).
CATEGORIES: dict[str, str] = {
    "Untrusted model files": (
        "Model folders from elsewhere, driven through the CLI (`classify --model`, `chat --model`, "
        "`models import`). Every refusal must happen before ONNX Runtime or onnxruntime-genai opens the "
        "model: the tests replace `InferenceSession`, `og.Config` and `og.Model` with traps that fail the "
        "case if they are reached."
    ),
    "Images": (
        "Photos a user may drop on the classifier, through the real preprocessing (and the CLI where the "
        "message matters), plus bounded fuzzing of the decoder and preprocessing."
    ),
    "Storage": "Settings and conversations: corrupt files, full or read-only disks, crashes mid-write.",
    "Faults": (
        "Failures while work is running: devices lost mid-run, generator errors mid-answer, cancel "
        "storms, the window closed during every kind of work, the model switched during an answer."
    ),
    "Wrong results": (
        "Models that run but whose answers would be wrong: an output without a batch axis, more or fewer "
        "classes than labels, NaN or infinite scores, 'probabilities' that are not, preprocessing that "
        "divides by zero. Refused with the reason (`classify --model` and `models import` alike), never "
        "printed as a result."
    ),
    "Terminal output and file names": (
        "Text that comes from a model folder, a photo's name or the model's answer, with control "
        "characters, escape sequences (clear screen, window title, OSC 52 clipboard write), bidi "
        "overrides or bytes that are not UTF-8: shown as visible escapes in text mode and in the app, "
        "valid whole JSON in `--json` mode."
    ),
    "Output channels": (
        "Where the CLI's output goes: a stdout that is not UTF-8 (a Windows redirect in cp1252 or cp932, a Latin-1 "
        "or ASCII locale), a reader that goes away (`| head`, `| true`), a full or closed stdout. Machine output "
        "is UTF-8 whatever the locale, human output degrades and never fails, a closed pipe ends quietly, "
        "anything else is one line, and none of it is reported as a device or engine failure (app/terminal.py)."
    ),
    "No display": (
        "The desktop app started where its window cannot open: no display (SSH), a DISPLAY where no X server "
        "answers, a library of Qt's xcb plugin missing. One line before Qt starts (app/display.py), never Qt's "
        "abort."
    ),
    "Options": "Command-line options out of range or malformed: refused with the option named, before any work.",
    "Message text": (
        "What a user types or pastes into a chat (a message, the system prompt, a document, an earlier "
        "answer) holding the model's own control tokens: read as text, so the only control tokens the "
        "model sees are the ones its chat template puts between the messages (engines/chat/control_tokens.py)."
    ),
    "Model code": (
        "Models whose graph or chat template never finishes, recurses until the stack overflows or allocates "
        "without end: tried once in a bounded child process (engines/models/trial.py), never in the process "
        "that asked; every later render of a user model's chat template runs in the chat engine's child "
        "process, bounded in time and memory (engines/chat/bounds.py), in the CLI and in the app alike. A user "
        "model whose graph hangs only while generating is stopped at its token bound (the trial's time "
        "limit), and Stop always stops: an engine that does not answer it is killed (engines/chat/watch.py)."
    ),
    "Damaged state": (
        "Files NPU Studio reads back (settings, model manifests and configs, benchmark history, the "
        "conversations database) damaged, deeply nested, of the wrong type, or not files at all: what is "
        "damaged is set aside or read as a default, said once, and the rest goes on."
    ),
    "Disks and errors": (
        "Read-only or full disks, and every error a command can meet: one readable line, never a traceback."
    ),
    "Memory": "Photos whose decoded size is out of proportion to their file: memory stays bounded.",
    "Interrupted work": (
        "Commands killed or interrupted half-way, and outputs that would overwrite their own input: nothing "
        "half-made is left, nothing that was there is lost."
    ),
    "Hostile folders (fuzz)": (
        "Seeded random mutations of the demo model folders' JSON files and manifest, each run through the "
        "CLI in a child process with an audit hook on every file it opens."
    ),
    "Names on disk": (
        "Model, download, quantize and export names checked against Windows' rules on every platform "
        "(engines/names.py): reserved device names, trailing dots and spaces, forbidden characters, 255-byte "
        "components, names that differ only in case."
    ),
    "Exports": (
        "CSV and Markdown exports of hostile labels, names and answers: no cell a spreadsheet runs as a formula, "
        "no message that forges a turn (engines/csvfile.py, app/storage/export.py)."
    ),
    "Diagnostics": (
        "The diagnostics zip users attach to public bug reports: bait secrets in every settings field, in "
        "paths, the environment, conversation titles and logs, none of them in the zip (app/diagnostics.py, "
        "engines/redaction.py)."
    ),
    "Concurrent writers": (
        "Several real processes (the app, a second window, CLI commands) writing one store at the same moment: "
        "nothing any of them wrote is lost, no two share a temporary file (engines/shared_files.py)."
    ),
    "Photo folders": (
        "Folders of photos with bad entries (loops of links, links to nothing, pipes, sub-folders, files that are "
        "not photos) or that cannot be read, through the CLI and the Classify view, which walk them the same way "
        "(engines/photo_folders.py): each bad entry is reported and skipped, the rest is classified."
    ),
    "Offline": (
        "No network: a download whose server is never reached says so, prints each warning once and leaves "
        "nothing behind (engines/models/downloads.py); every process that loads ONNX Runtime or "
        "onnxruntime-genai turns their telemetry off, at the one place each is imported (engines/runtime)."
    ),
    "Soak": "Long runs in one process: memory, threads and file handles after warm-up.",
    "Models found on this machine": (
        "Folders other tools keep (a Foundry Local cache, a Hugging Face cache) next to broken folders, loops "
        "of links, links out, a pipe and a 10,000-file tree: `npu-studio models scan` in a child process "
        "with the fuzz's audit hook on every file it opens and every module it imports, and models added by "
        "reference whose files then change."
    ),
}
PASS, FAIL = "pass", "FAIL"


@dataclass(frozen=True)
class Case:
    category: str
    case: str
    expected: str
    outcome: str
    result: str  # PASS or FAIL

    @property
    def key(self) -> tuple[str, str]:
        return (self.category, self.case)


def cell(text: str) -> str:
    """Text as one Markdown table cell (one line, pipes escaped)."""
    one_line = " ".join(str(text).split())
    return one_line.replace("\\", "\\\\").replace("|", "\\|")


def uncell(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text.strip())


def render(cases: Sequence[Case]) -> str:
    failed = sum(1 for c in cases if c.result != PASS)
    lines = [
        "# NPU Studio reliability report",
        "",
        "Generated by the reliability tests (`pytest tests/reliability`, see `tests/reliability/conftest.py`);",
        "do not edit by hand. Each row is one bad input or fault the tests tried, what NPU Studio must do,",
        "and what the user saw. Paths are shortened: `<tmp>` is the test's own folder. A test fails when this",
        "file no longer lists what the tests record; run the suite again and commit the file it writes.",
        "A FAIL row is a known bug whose test is marked `xfail(strict=True)` until it is fixed.",
        "",
        "The soak's measured numbers (memory, threads, files) are printed at the end of the test run; the long",
        "soak (20,000 classifications, 1,000 chat turns) runs with `pytest tests/reliability/test_soak.py",
        "--long-soak` or `NPU_STUDIO_LONG_SOAK=1`, and does not rewrite this file.",
        "",
        f"**{len(cases)} cases, {'all passed' if not failed else f'{failed} FAILED'}.**",
        "",
    ]
    for category, about in CATEGORIES.items():
        rows = [c for c in cases if c.category == category]
        if not rows:
            continue
        lines += [f"## {category}", "", about, "", "| case | expected | outcome (what the user sees) | result |"]
        lines.append("|---|---|---|---|")
        lines += [f"| {cell(c.case)} | {cell(c.expected)} | {cell(c.outcome)} | {c.result} |" for c in rows]
        lines.append("")
    return "\n".join(lines)


_ROW = re.compile(r"^\|(?P<cells>.*)\|\s*$")


def _split_row(line: str) -> list[str]:
    body = _ROW.match(line)
    if body is None:
        return []
    return [uncell(part) for part in re.split(r"(?<!\\)\|", body.group("cells"))]


def parse(text: str) -> list[Case]:
    """The cases listed in a rendered report."""
    cases: list[Case] = []
    category = ""
    for line in text.splitlines():
        if line.startswith("## "):
            category = line[3:].strip()
            continue
        cells = _split_row(line)
        if len(cells) != 4 or cells[0] == "case" or set(cells[0]) <= {"-"}:
            continue
        cases.append(Case(category, cells[0], cells[1], cells[2], cells[3]))
    return cases


def differences(recorded: Iterable[Case], committed: Iterable[Case], *, complete: bool) -> list[str]:
    """What the committed report gets wrong about the recorded cases (and, for a complete run, the cases
    it lists that no test records any more)."""
    listed = {c.key: c for c in committed}
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for case in recorded:
        seen.add(case.key)
        old = listed.get(case.key)
        if old is None:
            problems.append(f"missing: [{case.category}] {case.case}")
            continue
        for field in ("expected", "outcome", "result"):
            now, then = cell(getattr(case, field)), cell(getattr(old, field))
            if now != then:
                problems.append(f"changed {field}: [{case.category}] {case.case}: {then!r} -> {now!r}")
    if complete:
        problems += [f"no longer tried: [{c.category}] {c.case}" for key, c in listed.items() if key not in seen]
    return problems
