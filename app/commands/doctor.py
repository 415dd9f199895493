"""`npu-studio doctor [--out DIR] [--json]`: check every device and write a report and a diagnostics zip.

What the zip will hold is printed (on stderr) before anything is written; personal text and paths are
replaced in it (app/diagnostics.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app import paths

if TYPE_CHECKING:
    from app.commands import Subcommands

CLASSIFIER = "efficientnet-lite0"
CHAT_MODEL = "smollm2-135m-instruct"


def register(sub: Subcommands) -> None:
    parser = sub.add_parser(
        "doctor",
        help="check every device (strict session, classifier, chat) and write a report + diagnostics zip",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="where to write the report (default: a new folder in the user data folder)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-chat", action="store_true", help="leave out the chat check")
    parser.add_argument("--tokens", type=int, default=8, help="chat tokens per device (default 8)")
    parser.set_defaults(func=run)


def _installed(name: str) -> Path | None:
    """The model by name (the one library lookup), or None when it is not installed."""
    from engines import ModelError, has_manifest, locate_model

    try:
        folder = locate_model(name, paths.model_roots()).folder
    except ModelError:
        return None
    return folder if has_manifest(folder) else None


def run(args: argparse.Namespace) -> int:
    from app import diagnostics
    from app.terminal import print_json
    from engines import IMAGE_SUFFIXES, StudioError, run_doctor, write_doctor_report

    if args.tokens < 1:
        raise StudioError("--tokens must be at least 1.", "Use e.g. --tokens 8.")
    out = Path(args.out) if args.out else paths.data_dir() / "diagnostics" / time.strftime("doctor-%Y%m%d-%H%M%S")
    samples_dir = paths.assets_dir() / "samples"
    samples = sorted(p for p in samples_dir.glob("*") if p.suffix.lower() in IMAGE_SUFFIXES)

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    listing = diagnostics.contents()
    progress(f"The diagnostics zip ({out / 'diagnostics.zip'}) will hold:")
    for line in listing:
        progress(f"  {line}")
    report = run_doctor(
        classifier=_installed(CLASSIFIER),
        chat_model=None if args.no_chat else _installed(CHAT_MODEL),
        samples=samples,
        cache_dir=paths.compiled_cache_dir(),
        chat_tokens=args.tokens,
        on_progress=progress,
    )
    try:
        written: tuple[Path, Path, Path] | None = write_doctor_report(
            report, out, diagnostics.attachments(), redact=diagnostics.redactor().data, contents=listing
        )
        not_written = ""
    except StudioError as exc:  # a read-only or full disk: the report is still worth reading
        written, not_written = None, exc.user_text()
    if args.json:
        files = {"text": str(written[0]), "json": str(written[1]), "zip": str(written[2])} if written else {}
        print_json({**report.as_dict(), "files": files, "zip_contents": listing,
                    **({"files_error": not_written} if not_written else {})})
    else:
        print(report.text())
        if written:
            print(f"Report: {written[0]}")
            print(f"JSON:   {written[1]}")
            print(f"Zip:    {written[2]}  (attach this to a bug report)")
    if not_written:
        print(f"npu-studio: {not_written}", file=sys.stderr)
    failed = [s for s in report.steps if s.status == "failed"]
    return 1 if failed or not_written else 0
