"""`npu-studio devices [--json] [--download-eps [EP ...]] [--yes]`: the devices this machine really has,
why others are missing, and (only when asked, after consent) Windows ML's EP downloads."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import TYPE_CHECKING

from engines import EP_ALIASES, short_ep_name

if TYPE_CHECKING:
    from app.commands import Subcommands


def register(sub: Subcommands) -> None:
    parser = sub.add_parser("devices", help="list NPU / GPU / CPU devices and execution providers")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--download-eps",
        nargs="*",
        metavar="EP",
        help="download (through Windows Update) the Windows ML execution providers that are not on this PC yet: "
        "all of them, or the ones named (qnn, openvino, vitisai, ...). Asks first unless --yes.",
    )
    parser.add_argument("--yes", action="store_true", help="agree to the --download-eps download without asking")
    parser.set_defaults(func=run)


def _ep_names(names: list[str]) -> list[str]:
    return [EP_ALIASES.get(n.lower(), n) for n in names]


def _alias(ep: str) -> str:
    return next((alias for alias, name in EP_ALIASES.items() if name == ep), ep)


def _download(args: argparse.Namespace) -> int:
    from engines import EpReadyState, download_eps, read_ep_catalog

    report = read_ep_catalog()
    if not report.available:
        print(f"Nothing to download: {report.reason}", file=sys.stderr)
        return 2
    wanted = _ep_names(args.download_eps) if args.download_eps else None
    pending = [
        p for p in report.providers if p.state != EpReadyState.READY and (wanted is None or p.name in wanted)
    ]
    unknown = [n for n in (wanted or []) if report.find(n) is None]
    for name in unknown:
        print(f"Windows ML's catalog does not offer {short_ep_name(name)} for this PC.", file=sys.stderr)
    if not pending:
        print("Every execution provider Windows ML offers this PC is already ready.")
        return 1 if unknown else 0
    listing = ", ".join(f"{short_ep_name(p.name)} {p.version}" for p in pending)
    consent = args.yes
    if not consent:
        if not sys.stdin.isatty():
            print(f"Not downloading {listing}: add --yes to agree to the download.", file=sys.stderr)
            return 2
        answer = input(f"Download {listing} from Windows Update? [y/N] ").strip().lower()
        consent = answer in {"y", "yes"}
    if not consent:
        print("Nothing was downloaded.")
        return 1
    cancel = threading.Event()
    last: dict[str, int] = {}

    def progress(ep: str, value: float) -> None:
        percent = int(value * 100)
        if last.get(ep) != percent:
            last[ep] = percent
            print(f"\r{short_ep_name(ep)}: {percent:3d}%", end="", flush=True)

    try:
        results = download_eps([p.name for p in pending], consent=True, on_progress=progress, cancel=cancel)
    except KeyboardInterrupt:  # Ctrl+C cancels the download, never leaves a traceback
        cancel.set()
        print("\nCancelled: nothing else will be downloaded.")
        return 130
    print()
    for result in results:
        print(("✔ " if result.ok else "✘ ") + result.message)
    return 0 if all(r.ok for r in results) else 1


def run(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import discover

    if args.download_eps is not None:
        code = _download(args)
        if code != 0:
            return code
    report = discover()
    if args.json:
        print_json(report.as_dict())
        return 0
    print(f"ONNX Runtime {report.ort_version} on {report.platform}")
    print(f"Providers in this build: {', '.join(report.available_providers)}")
    cat = report.catalog
    if cat.available:
        offered = ", ".join(f"{short_ep_name(p.name)} {p.version} ({p.state.value})" for p in cat.providers) or "none"
        print(f"Windows ML catalog (windowsml {cat.version}, build {cat.windows_build}): {offered}")
        if cat.reason:
            print(f"  {cat.reason}")
    else:
        print(f"Windows ML catalog: not used. {cat.reason}")
    for plugin in report.plugins:
        if plugin.source != "bundled plugin":
            continue
        state = "registered" if plugin.registered else ("installed" if plugin.installed else "not installed")
        if plugin.installed and plugin.error:
            state = f"failed to load ({plugin.error})"
        version = f" {plugin.version}" if plugin.version else ""
        print(f"Bundled plugin {plugin.package}{version}: {state}" + (f"; {plugin.note}" if plugin.note else ""))
    if report.downloadable():
        names = " ".join(_alias(n) for n in report.downloadable())
        print(f"Downloadable from Windows Update (asks first): npu-studio devices --download-eps {names}")
    print()
    for device in report.devices:
        mark = "✔" if device.usable else "✘"
        print(f"{mark} {device.type.value:<3}  {device.title()}")
        details = [f"EP {device.ep}"]
        if device.source:
            details.append(device.source)
        if device.vendor:
            details.append(f"vendor {device.vendor}" + (f" (0x{device.vendor_id:04x})" if device.vendor_id else ""))
        if device.ep_version:
            details.append(f"EP version {device.ep_version}")
        if device.driver_version:
            details.append(f"driver {device.driver_version}")
        print("       " + ", ".join(details))
        note = dict(device.metadata).get("note")
        if note:
            print(f"       note: {note}")
        if not device.usable:
            print(f"       unavailable: {device.reason}")
    return 0
