"""`npu-studio models scan` (the model folders other local-AI tools keep on this machine) and
`npu-studio models add FOLDER` (one of them into the library, by reference or as a copy)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app import paths

if TYPE_CHECKING:
    from app.commands import Subcommands
    from engines import FoundModel, PlaceReport, ScanReport


def register(actions: Subcommands) -> None:
    p = actions.add_parser("scan", help="find the models other tools keep here (Foundry Local, Hugging Face...)")
    p.add_argument("--folder", action="append", default=[], metavar="DIR",
                   help="also look in DIR (repeatable; the setting model_folders adds its own)")  # fmt: skip
    p.add_argument("--no-foundry", action="store_true", help="do not ask the foundry CLI where its cache is")
    p.add_argument("--seconds", type=float, default=None, metavar="S", help="stop looking after S seconds")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_scan)

    p = actions.add_parser("add", help="add a model folder found on this machine to your library, by reference")
    p.add_argument("folder", metavar="FOLDER", help="the folder (as `npu-studio models scan` lists it)")
    p.add_argument("--name", help="library name (default: from the folder)")
    p.add_argument("--copy", action="store_true", help="copy the files into your library instead of referring to them")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_add)


def machine_scan(extra: list[str], *, ask_foundry: bool = True, seconds: float | None = None) -> ScanReport:
    """The scan the CLI and `models catalog` print: the settings' folders and `extra` first, then the
    tools' own places; each model judged against this machine's devices; the ones in the library marked."""
    from app.storage.settings import settings_for_command
    from engines import ScanLimits, find_models

    folders = [*extra, *settings_for_command().model_folders]
    limits = ScanLimits() if seconds is None else ScanLimits(seconds=max(0.1, seconds))
    return find_models(folders, paths.bundled_models_dir(), paths.user_models_dir(), limits=limits,
                       ask_foundry=ask_foundry)  # fmt: skip


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def found_lines(found: FoundModel, number: int) -> list[str]:
    facts = [("chat model" if found.kind == "genai-llm" else "image classifier"), found.target.label]
    facts += [found.precision] if found.precision else []
    facts += [found.size_text]
    facts += [f"context {found.context_length:,}"] if found.context_length else []
    facts += [f"licence {found.licence}"] if found.licence else []
    where = ", ".join(x for x in (found.tool, found.publisher) if x)
    lines = [f"{number}. {found.name}  ({where})", "   " + " · ".join(facts)]
    lines += ["   " + "; ".join(found.details)] if found.details else []
    lines.append(f"   On this machine: {found.runs_here or found.problem or 'not judged'}")
    if found.in_library:
        lines.append(f"   In your library as {found.in_library}")
    lines.append(f"   Folder: {found.folder}")
    return lines


def place_line(place: PlaceReport) -> str:
    where = f"  {place.place.tool:<20} {place.place.path} ({place.place.how})"
    if not place.exists:
        return where + ": not there"
    parts = [_count(place.folders, "folder")]
    if place.links_skipped:
        parts.append(f"{_count(place.links_skipped, 'link')} out of it not followed")
    if place.loops_skipped:
        parts.append(f"{_count(place.loops_skipped, 'folder')} reached twice (a loop of links) not entered again")
    if place.downloading:
        parts.append(f"{_count(place.downloading, 'download')} still in progress")
    if place.crowded:
        parts.append(f"{_count(place.crowded, 'crowded folder')} read in part")
    if place.stopped:
        parts.append(f"stopped early: {place.stopped}")
    return where + ": " + "; ".join(parts)


def run_scan(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import StudioError

    if args.seconds is not None and not args.seconds > 0:
        raise StudioError("--seconds must be more than 0.")
    report = machine_scan(args.folder, ask_foundry=not args.no_foundry, seconds=args.seconds)
    if args.json:
        print_json(report.as_dict())
        return 0
    found = report.models
    print(f"Found {_count(len(found), 'model')} on this machine in {report.seconds:.1f} s "
          "(read-only: no model was loaded).")  # fmt: skip
    for number, model in enumerate(found, 1):
        print()
        print("\n".join(found_lines(model, number)))
    if report.broken:
        print(f"\nLook like models but cannot be read ({len(report.broken)}):")
        for broken in report.broken:
            print(f"  {broken.folder}: {broken.problem}")
    print("\nLooked in:")
    for place in report.places:
        print(place_line(place))
    for note in report.notes:
        print(f"  Note: {note}")
    if found:
        print("\nAdd one to your library with `npu-studio models add FOLDER` (by reference: nothing is copied).")
    return 0


def run_add(args: argparse.Namespace) -> int:
    from pathlib import Path

    from app.commands.progress import Progress, cancel_on_ctrl_c
    from app.terminal import print_json
    from engines import add_found_folder, format_bytes, found_model_name

    folder = Path(args.folder).expanduser()
    progress = Progress(("Copying " if args.copy else "Hashing ") + (args.name or found_model_name(folder)))
    with cancel_on_ctrl_c() as token:
        try:
            entry = add_found_folder(
                folder, paths.user_models_dir(), name=args.name, copy=args.copy,
                bundled_dir=paths.bundled_models_dir(), progress=progress, cancel=token,
            )  # fmt: skip
        finally:
            progress.finish()
    if args.json:
        print_json(entry.as_dict())
        return 0
    how = f"by reference to {entry.reference}" if entry.reference else f"as a copy in {entry.folder}"
    precision = entry.precision or "precision unknown"
    print(f"Added {entry.name} ({entry.kind}, {format_bytes(entry.size_bytes)}, {precision}, "
          f"devices {','.join(entry.devices)}) {how}")  # fmt: skip
    print(f"sha256 {entry.sha256} ({len(entry.files)} files hashed)")
    if entry.reference:
        print("If these files change or disappear, NPU Studio says so and does not load them "
              f"(`npu-studio models verify {entry.name}` re-hashes them).")  # fmt: skip
    return 0
