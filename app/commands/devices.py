"""`npu-studio devices [--json]`: the devices this machine really has, and why others are missing."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    parser = sub.add_parser("devices", help="list NPU / GPU / CPU devices and execution providers")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.cli import print_json
    from engines.runtime.devices import discover

    report = discover()
    if args.json:
        print_json(report.as_dict())
        return 0
    print(f"ONNX Runtime {report.ort_version} on {report.platform}")
    print(f"Providers in this build: {', '.join(report.available_providers)}")
    for plugin in report.plugins:
        state = (
            "registered"
            if plugin.registered
            else ("installed, failed to load" if plugin.installed else "not installed")
        )
        print(f"Plugin {plugin.package}: {state}" + (f" ({plugin.error})" if plugin.error else ""))
    print()
    for device in report.devices:
        mark = "✔" if device.usable else "✘"
        print(f"{mark} {device.type.value:<3}  {device.title()}")
        details = [f"EP {device.ep}"]
        if device.vendor:
            details.append(f"vendor {device.vendor}" + (f" (0x{device.vendor_id:04x})" if device.vendor_id else ""))
        if device.ep_version:
            details.append(f"EP version {device.ep_version}")
        if device.driver_version:
            details.append(f"driver {device.driver_version}")
        print("       " + ", ".join(details))
        if not device.usable:
            print(f"       unavailable: {device.reason}")
    return 0
