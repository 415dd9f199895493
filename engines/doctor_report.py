"""The doctor's report: each check as a `Step`, the whole run as a `DoctorReport` (readable text and
JSON), and the files a bug report attaches (report.txt, report.json, diagnostics.zip)."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.errors import StudioError
from engines.runtime.devices import DiscoveryReport
from engines.types import short_ep_name

LOG_TAIL_BYTES = 1_000_000  # the last MB of each attached log is enough for a bug report


@dataclass
class Step:
    """One check on one device."""

    check: str  # "strict session", "classifier", "chat"
    device: str  # EP name ("" for machine-wide checks)
    status: str  # "ok" | "fell back" | "failed" | "unavailable" | "skipped"
    summary: str  # one line, plain words
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in {"ok", "fell back"}

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "device": self.device,
            "status": self.status,
            "summary": self.summary,
            "seconds": round(self.seconds, 4),
            "details": self.details,
        }


@dataclass
class DoctorReport:
    created: str
    versions: dict[str, Any]
    discovery: DiscoveryReport
    steps: list[Step]
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for step in self.steps:
            found[step.status] = found.get(step.status, 0) + 1
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "seconds": round(self.seconds, 2),
            "versions": self.versions,
            "devices": self.discovery.as_dict(),
            "steps": [s.as_dict() for s in self.steps],
            "counts": self.counts(),
        }

    def text(self) -> str:
        v = self.versions
        lines = [
            f"NPU Studio doctor — {self.created}",
            f"Machine: {v['platform']} ({v['machine']}), Python {v['python']}",
            f"ONNX Runtime {v['onnxruntime']} ({v.get('onnxruntime_build', '')})",
            "Providers in this build: " + ", ".join(self.discovery.available_providers),
            "Packages: " + ", ".join(f"{k} {val or 'not installed'}" for k, val in v["packages"].items()),
        ]
        if v.get("qnn_sdk"):
            lines.append(f"QNN SDK (from onnxruntime-qnn): {v['qnn_sdk']}")
        if "compiled_cache" in v:
            cached = v["compiled_cache"]
            lines.append(
                f"Compiled-model cache: {len(cached['entries'])} entries, {cached['bytes'] / 1e6:.1f} MB "
                f"({cached['folder']})"
            )
        builds = v.get("onnxruntime_distributions", [])
        if len(builds) > 1:
            lines.append(
                f"PROBLEM: {len(builds)} ONNX Runtime builds are installed ({', '.join(builds)}); they overwrite "
                "each other's files. Reinstall NPU Studio."
            )
        cat = self.discovery.catalog
        if cat.available:
            offered = ", ".join(f"{p.name} {p.version} ({p.state.value})" for p in cat.providers) or "none"
            lines.append(f"Windows ML catalog (windowsml {cat.version}, Windows build {cat.windows_build}): {offered}")
            if cat.reason:
                lines.append(f"  {cat.reason}")
        else:
            lines.append(f"Windows ML catalog: not used. {cat.reason}")
        for plugin in self.discovery.plugins:
            if plugin.registered:
                state = "registered"
            elif plugin.error:
                state = "failed to load"
            elif plugin.source == "Windows ML catalog":
                state = plugin.state or "not registered"
            else:
                state = "installed, not used" if plugin.installed else "not installed"
            version = f" {plugin.version}" if plugin.version else ""
            detail = plugin.error or plugin.note
            lines.append(
                f"Plugin EP {short_ep_name(plugin.ep)}{version} from {plugin.package}: {state}"
                + (f" ({detail})" if detail else "")
            )
        lines += ["", "Devices:"]
        for d in self.discovery.devices:
            mark = "✔" if d.usable else "✘"
            extra = []
            if d.ep_version:
                extra.append(f"EP {d.ep_version}")
            if d.driver_version:
                extra.append(f"driver {d.driver_version}")
            if d.source:
                extra.insert(0, d.source)
            lines.append(f"  {mark} {d.type.value:<3} {d.title()}" + (f" — {', '.join(extra)}" if extra else ""))
            if not d.usable:
                lines.append(f"        unavailable: {d.reason}")
        lines += ["", "Checks:"]
        for s in self.steps:
            where = short_ep_name(s.device) if s.device else "-"
            lines.append(f"  [{s.status:^11}] {where:<9} {s.check:<16} {s.summary}")
        counts = self.counts()
        tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        lines += ["", f"Summary: {tally} (in {self.seconds:.1f} s)."]
        return "\n".join(lines) + "\n"


def _tail(path: Path, limit: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - limit))
        return handle.read()


def _as_is(value: Any) -> Any:
    return value


def write_outputs(
    report: DoctorReport,
    out_dir: Path,
    attachments: Mapping[str, Path | str] | None = None,
    *,
    redact: Callable[[Any], Any] = _as_is,
    contents: Sequence[str] = (),
) -> tuple[Path, Path, Path]:
    """report.txt, report.json and diagnostics.zip (both reports, versions, devices, CONTENTS.txt (what the
    zip holds: `contents`) and `attachments`: name in the zip -> a file (logs are cut to their last MB) or a
    text). Every text, the two reports beside the zip included, goes through `redact` first (engines/
    redaction.py). Returns the three paths."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        text_path = out_dir / "report.txt"
        json_path = out_dir / "report.json"
        zip_path = out_dir / "diagnostics.zip"
        text = redact(report.text())
        data = json.dumps(redact(report.as_dict()), indent=2, ensure_ascii=False, default=str)
        text_path.write_text(text, encoding="utf-8")
        json_path.write_text(data, encoding="utf-8")
        tmp_zip = zip_path.with_name(f".{zip_path.name}.p{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp_zip, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
            if contents:
                bundle.writestr("CONTENTS.txt", redact("\n".join(contents) + "\n"))
            bundle.writestr("report.txt", text)
            bundle.writestr("report.json", data)
            bundle.writestr("versions.json", json.dumps(redact(report.versions), indent=2, default=str))
            bundle.writestr("devices.json", json.dumps(redact(report.discovery.as_dict()), indent=2, default=str))
            for name, item in sorted((attachments or {}).items()):
                if isinstance(item, str):
                    bundle.writestr(name, redact(item))
                elif item.is_file():
                    bundle.writestr(name, redact(_tail(item, LOG_TAIL_BYTES).decode("utf-8", "replace")))
        tmp_zip.replace(zip_path)
    except OSError as exc:
        raise StudioError(
            f"The doctor report could not be written to {out_dir}: {exc.strerror or exc}.",
            "Choose another folder with --out.",
        ) from exc
    return text_path, json_path, zip_path
