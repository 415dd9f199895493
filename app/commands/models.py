"""`npu-studio models list|import PATH|remove NAME|verify [NAME]|fit NAME|catalog|download ID` (and
`scan`, `add FOLDER`: app/commands/models_scan.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import paths
from app.commands.progress import Progress as _Progress
from app.commands.progress import cancel_on_ctrl_c as _cancel_on_ctrl_c
from engines import EP_DEVICE_TYPE, DeviceType, short_ep_name

if TYPE_CHECKING:
    from app.commands import Subcommands


def register(sub: Subcommands) -> None:
    parser = sub.add_parser("models", help="the model library: list, import, verify, remove, catalog downloads")
    actions = parser.add_subparsers(dest="models_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: _usage(parser))

    p = actions.add_parser("list", help="bundled and imported models with size, sha256, devices and fit")
    p.add_argument("--context", type=int, metavar="N", help="tokens to assume for the memory fit (default: model's)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_list)

    p = actions.add_parser("import", help="copy a genai folder or an .onnx classifier into your library")
    p.add_argument("path", metavar="PATH", help="genai model folder, classifier folder, or .onnx classifier file")
    p.add_argument("--name", help="library name (default: from the folder or file name)")
    p.add_argument("--display-name", default="", help="name shown in the app")
    p.add_argument("--licence", "--license", dest="licence", default="", help="SPDX licence id, e.g. MIT")
    p.add_argument("--precision", default="", help="fp32, fp16, int4, qdq... (default: detected)")
    p.add_argument("--devices", default="", help="comma-separated cpu,gpu,npu (default: detected)")
    group = p.add_argument_group("classifier options (for an .onnx file)")
    group.add_argument("--labels", metavar="FILE", help="class names, one per line, in output order")
    group.add_argument("--size", type=int, nargs="+", metavar="PX", help="input size: H [W] (default: from model)")
    group.add_argument("--resize", type=int, metavar="PX", help="shorter side before the centre crop")
    group.add_argument("--mean", type=float, nargs=3, metavar="M", help="per-channel mean on 0-255 pixels")
    group.add_argument("--std", type=float, nargs=3, metavar="S", help="per-channel std on 0-255 pixels")
    group.add_argument("--layout", choices=["NCHW", "NHWC"], type=str.upper, help="default: from the model")
    group.add_argument("--color", choices=["RGB", "BGR"], type=str.upper, default="RGB")
    group.add_argument("--resample", choices=["bilinear", "bicubic", "lanczos", "nearest"], default="bilinear")
    group.add_argument("--output-kind", choices=["logits", "probabilities"], help="default: detected")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_import)

    p = actions.add_parser("remove", help="delete one of your models (bundled models are read-only)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_remove)

    p = actions.add_parser("verify", help="re-hash model files and report any change")
    p.add_argument("name", nargs="?", metavar="NAME", help="one model (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_verify)

    p = actions.add_parser("fit", help="will this model fit in memory? (weights + KV cache vs free RAM)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--context", type=int, metavar="N", help="tokens of context (default: the model's max_length)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_fit)

    p = actions.add_parser("catalog", help="well-known models that can be downloaded (nothing is downloaded)")
    p.add_argument("--no-scan", action="store_true", help="do not look for NPU models other tools keep here")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_catalog)

    from app.commands import models_scan

    models_scan.register(actions)

    p = actions.add_parser("download", help="download a catalog model (needs downloads allowed)")
    p.add_argument("id", metavar="ID", help="catalog id (see `npu-studio models catalog`)")
    p.add_argument("--name", help="library name (default: the catalog id)")
    p.add_argument("--allow-download", action="store_true", help="allow this one download even if the setting forbids")
    p.add_argument("--discard-partial", action="store_true", help="start over instead of resuming")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_download)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def catalog_path() -> Path:
    return paths.assets_dir() / "catalog.json"


def _mb(size: int) -> str:
    from engines import format_bytes

    return format_bytes(size)


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


# --- list / fit ---------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import StudioError, estimate_fit, scan_library

    if args.context is not None and args.context < 1:
        raise StudioError("--context must be at least 1.")
    entries = scan_library(paths.bundled_models_dir(), paths.user_models_dir())
    fits: dict[str, Any] = {}
    for entry in entries:
        if entry.usable:
            with suppress(StudioError):  # a fit hint is a bonus: a model without one is still listed
                fits[entry.folder.as_posix()] = estimate_fit(entry.model_folder, args.context)
    if args.json:
        print_json([
            {**e.as_dict(), "fit": fits[e.folder.as_posix()].as_dict() if e.folder.as_posix() in fits else None}
            for e in entries
        ])
        return 0
    if not entries:
        print("No models. Build the demo models (bash setup.sh) or import one with `npu-studio models import PATH`.")
        return 0
    rows = [["NAME", "KIND", "ORIGIN", "SIZE", "SHA256", "PRECISION", "DEVICES", "LICENCE", "FIT", "STATUS"]]
    for e in entries:
        fit = fits.get(e.folder.as_posix())
        rows.append([
            e.name, e.kind, e.origin, _mb(e.size_bytes), e.short_sha or "-", e.precision or "-",
            ",".join(e.devices) or "-", e.licence or "unknown", fit.verdict if fit else "-",
            "ok" if e.usable else f"problem: {e.problem}",
        ])
    print(_table(rows))
    print(f"\nBundled models: {paths.bundled_models_dir()} (read-only)\nYour models:    {paths.user_models_dir()}")
    return 0


def run_fit(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import StudioError, estimate_fit, find_model

    if args.context is not None and args.context < 1:
        raise StudioError("--context must be at least 1.")
    entry = find_model(args.name, paths.bundled_models_dir(), paths.user_models_dir())
    hint = estimate_fit(entry.model_folder, args.context)
    if args.json:
        print_json({"name": entry.name, **hint.as_dict()})
    else:
        print(f"{entry.name}: {hint.message()}")
        if hint.kv_detail:
            print(f"  KV cache = {hint.kv_detail}")
    return 0 if hint.verdict != "won't fit" else 1


# --- import / remove / verify ---------------------------------------------------------------------


def _devices(text: str) -> tuple[str, ...]:
    from engines import DEVICE_CLASSES, StudioError

    devices = tuple(d.strip().lower() for d in text.split(",") if d.strip())
    unknown = [d for d in devices if d not in DEVICE_CLASSES]
    if unknown:
        raise StudioError(f"Unknown device class {', '.join(unknown)}.", "Use cpu, gpu and/or npu.")
    return devices


def run_import(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import IMAGENET_MEAN, IMAGENET_STD, ClassifierOptions, ImportDetails, StudioError, import_model

    source = Path(args.path).expanduser()
    classifier = None
    is_onnx_file = source.suffix.lower() == ".onnx"
    classifier_flags = [args.size, args.resize, args.mean, args.std, args.layout, args.output_kind]
    if not is_onnx_file and (args.labels or any(flag is not None for flag in classifier_flags)):
        raise StudioError("--labels and the preprocessing options are for an .onnx classifier file.",
                          "Give the .onnx file as PATH, or leave the options out for a model folder.")
    if is_onnx_file:
        if not args.labels:
            raise StudioError(f"{source.name} is a classifier file: NPU Studio needs its class names.",
                              "Add --labels FILE (one class name per line, in output order).")
        size = None
        if args.size:
            if len(args.size) > 2 or any(v < 1 for v in args.size):
                raise StudioError("--size takes one or two positive numbers (H, or H W).")
            size = (args.size[0], args.size[-1])
        classifier = ClassifierOptions(
            labels=Path(args.labels).expanduser(),
            input_size=size,
            resize_shorter=args.resize,
            mean=tuple(args.mean) if args.mean else IMAGENET_MEAN,
            std=tuple(args.std) if args.std else IMAGENET_STD,
            layout=args.layout,
            color=args.color,
            resample=args.resample,
            output_kind=args.output_kind,
        )
    details = ImportDetails(
        name=args.name, display_name=args.display_name, licence=args.licence, precision=args.precision,
        devices=_devices(args.devices),
    )
    progress = _Progress(f"Importing {source.name}")
    with _cancel_on_ctrl_c() as token:
        try:
            entry = import_model(source, paths.user_models_dir(), bundled_dir=paths.bundled_models_dir(),
                                 classifier=classifier, details=details, progress=progress, cancel=token)
        finally:
            progress.finish()
    if args.json:
        print_json(entry.as_dict())
    else:
        print(f"Imported {entry.name} ({entry.kind}, {_mb(entry.size_bytes)}, {entry.precision}, "
              f"devices {','.join(entry.devices)}) into {entry.folder}")
        print(f"sha256 {entry.sha256}")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import remove_model

    removed = remove_model(args.name, paths.bundled_models_dir(), paths.user_models_dir())
    if args.json:
        print_json({"removed": args.name, "folder": str(removed)})
    else:
        print(f"Removed {args.name} ({removed}).")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from app.terminal import print_json
    from engines import find_model, scan_library, verify_model

    if args.name:
        entries = [find_model(args.name, paths.bundled_models_dir(), paths.user_models_dir())]
    else:
        entries = scan_library(paths.bundled_models_dir(), paths.user_models_dir())
    reports = [verify_model(e.folder) for e in entries]
    if args.json:
        print_json([r.as_dict() for r in reports])
    else:
        if not reports:
            print("No models to verify.")
        for r in reports:
            if r.ok:
                print(f"{r.name}: ok ({r.files_checked} files, {_mb(r.bytes_checked)} re-hashed)")
            else:
                print(f"{r.name}: CHANGED")
                for problem in r.problems:
                    print(f"  {problem}")
    return 0 if all(r.ok for r in reports) else 1


# --- catalog / download ---------------------------------------------------------------------------


def run_catalog(args: argparse.Namespace) -> int:
    from app.commands.models_scan import machine_scan
    from app.storage.settings import settings_for_command
    from app.terminal import print_json
    from engines import load_catalog, load_npu_availability, npu_models, partial_bytes

    catalog = load_catalog(catalog_path())
    npus = load_npu_availability(catalog_path())
    user = paths.user_models_dir()
    allowed = settings_for_command().allow_downloads
    found = [] if args.no_scan or not npus else machine_scan([], seconds=5.0).models
    here = {n.ep: npu_models(found, n.ep) for n in npus}
    if args.json:
        print_json({
            "downloads_allowed": allowed,
            "npu_by_vendor": [vars(n) | {"downloadable": list(n.downloadable),
                                         "found_here": [m.as_dict() for m in here[n.ep]]} for n in npus],
            "models": [{**e.as_dict(), "installed": (user / e.id).is_dir(), "partial_bytes": partial_bytes(user, e.id)}
                       for e in catalog],
        })
        return 0
    rows = [["ID", "DEVICES", "PRECISION", "SIZE", "CONTEXT", "LICENCE", "STATUS"]]
    for e in catalog:
        partial = partial_bytes(user, e.id)
        status = "installed" if (user / e.id).is_dir() else f"partial {_mb(partial)}" if partial else "-"
        rows.append([e.id, ",".join(e.devices), e.precision, f"~{_mb(e.size_bytes)}" if e.size_bytes else "?",
                     f"{e.context_length:,}" if e.context_length else "?", e.licence or "?", status])
    print(_table(rows))
    print("\nDownloads are " + ("allowed." if allowed else
          "turned off (setting allow_downloads): nothing is downloaded unless you pass --allow-download."))
    print("Download one with `npu-studio models download ID`; repositories: "
          + ", ".join(sorted({e.repo_id for e in catalog})))
    if npus:
        print("\nChat on the NPU, by vendor:")
        for n in npus:
            print(f"  {n.vendor} ({short_ep_name(n.ep)})")
            listed = ", ".join(n.downloadable) if n.downloadable else "none in NPU Studio's catalog"
            print(f"    To download: {listed}")
            if not args.no_scan and EP_DEVICE_TYPE.get(n.ep) == DeviceType.NPU:
                if not here[n.ep]:
                    print("    On this machine: none found (`npu-studio models scan` says where it looked)")
                for model in here[n.ep]:
                    print(f"    On this machine: {model.name} ({model.tool}): {model.runs_here}")
            for text in (n.none_here, n.elsewhere):
                if text:
                    print(f"    {text}")
    return 0


def run_download(args: argparse.Namespace) -> int:
    from app.storage.settings import settings_for_command
    from app.terminal import print_json
    from engines import DownloadProgress, discard_partial, download_model, find_catalog_entry, load_catalog

    entry = find_catalog_entry(load_catalog(catalog_path()), args.id)
    allowed = bool(args.allow_download or settings_for_command().allow_downloads)
    user = paths.user_models_dir()
    if args.discard_partial:
        discard_partial(user, entry.id)
    line = _Progress(f"Downloading {entry.id}")

    def progress(p: DownloadProgress) -> None:
        line(p.done, p.total, f"({p.files_done}/{p.files_total} files) {p.file}")

    with _cancel_on_ctrl_c() as token:
        try:
            model = download_model(entry, user, allowed=allowed, bundled_dir=paths.bundled_models_dir(),
                                   name=args.name, progress=progress, cancel=token)
        finally:
            line.finish()
    if args.json:
        print_json(model.as_dict())
    else:
        print(f"Downloaded {model.name} ({_mb(model.size_bytes)}, {model.precision}, devices "
              f"{','.join(model.devices)}, licence {model.licence or 'unknown'}) into {model.folder}")
    return 0


