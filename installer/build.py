"""Build the NPU Studio MSI from one staged folder.

    python installer/build.py all   --arch arm64        # Windows: freeze + WiX v4 MSI (dist/)
    python installer/build.py all   --arch x64          # Linux: wheels payload + wixl check MSI
    python installer/build.py stage --arch x64 [--payload frozen|wheels] [--models DIR]
    python installer/build.py msi   --arch x64 [--toolset wixl|wix] [--version 0.2.0]
    python installer/build.py wxs   --arch arm64 --schema v4      # write the WiX source only
    python installer/build.py freeze-check   # any OS: freeze with the same spec, run the self-test

`stage` fills build/installer/<arch>/payload:
- frozen (Windows; the shipping MSIs): PyInstaller one-folder build of the app from installer/npu_studio.spec
  (npu-studio.exe + _internal\\ with Python, the per-architecture runtime set and assets\\ incl. models);
- wheels (any OS; what Linux CI checks): the win_arm64 / win_amd64 wheels resolved by installer/resolve.py,
  downloaded once with `pip download --platform ... --only-binary=:all:` into a cache and unpacked into
  _internal\\site-packages, the app's packages, the assets and demo models, and npu-studio.cmd, a launcher
  stub that needs an installed CPython of the resolved version.
The payload is complete: the installed app downloads nothing. Downloads happen only here, at build time,
and are cached (NPU_STUDIO_BUILD_CACHE or --cache-dir; default ~/.cache/npu-studio-build), so a repeated
build, or one with --offline, needs no network.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from installer import lockfile, resolve, targets, wix
from installer.buildenv import (
    APT_LINE,
    BUILD_DIR,
    DEFAULT_PYTHON,
    DIST_DIR,
    INSTALLER_DIR,
    REPO,
    BuildError,
    Timer,
    default_cache_dir,
    log,
    stage_dir_for,
)
from installer.payload import (
    ENTRY_FROZEN,
    ENTRY_STUB,
    copy_assets,
    copy_sources,
    make_icon,
    model_folders,
    write_launcher_stub,
    write_payload_info,
)
from installer.product import ARCH_TO_TARGET, ARCHES, Product, load_product
from installer.wheel_cache import check_one_writer_per_file, download_locked, unpack_wheel

# ---- stage ------------------------------------------------------------------------------------------------------


def stage_wheels(
    arch: str,
    payload: Path,
    models_dir: Path,
    python: str = DEFAULT_PYTHON,
    cache: Path | None = None,
    offline: bool = False,
) -> dict[str, object]:
    """Stage the wheels payload (works on any OS). Returns the payload description written with it."""
    cache = cache or default_cache_dir()
    timings: dict[str, float] = {}
    with Timer("the locked wheels (cached ones are reused)") as t:
        resolution, wheels = download_locked(arch, python, cache, offline)
    timings["resolve_download_s"] = round(t.seconds, 2)
    check_one_writer_per_file(wheels)
    if payload.exists():
        shutil.rmtree(payload)
    internal = payload / "_internal"
    site_packages = internal / "site-packages"
    site_packages.mkdir(parents=True)
    with Timer(f"unpack {len(wheels)} wheels") as t:
        files = sum(unpack_wheel(w, site_packages, internal) for w in wheels)
    timings["unpack_s"] = round(t.seconds, 2)
    with Timer("copy app sources, assets and models") as t:
        copy_sources(internal)
        models = copy_assets(internal / "assets", models_dir)
        shutil.copy2(INSTALLER_DIR / "launcher.py", internal / "launcher.py")
        write_launcher_stub(payload, arch, python)
    timings["copy_s"] = round(t.seconds, 2)
    if not models:
        log(f"warning: no finished demo models in {models_dir}; the MSI will have no offline demos")
    info: dict[str, object] = {
        "kind": "pystub",
        "entry": ENTRY_STUB,
        "arch": arch,
        "target": resolution.target,
        "python_version": python,
        "packages": resolution.versions(),
        "models": models,
        "wheel_files": files,
    }
    write_payload_info(payload, info)
    return {**info, "timings": timings}


def installed_runtime_problems(arch: str) -> list[str]:
    """Check the running environment (what PyInstaller freezes) holds exactly the target's runtime set."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    packages = [
        resolve.ResolvedPackage(
            name=canonicalize_name(dist.metadata["Name"]), version=dist.version, filename="", url="", sha256=None
        )
        for dist in metadata.distributions()
    ]
    return resolve.check_packages(targets.TARGETS[ARCH_TO_TARGET[arch]], packages)


def stage_frozen(arch: str, payload: Path, models_dir: Path, install: bool, icon: Path) -> dict[str, object]:
    """Freeze the app with PyInstaller (Windows only) into `payload`; writes the product icon to `icon`."""
    if sys.platform != "win32":
        raise BuildError(
            "the frozen payload is built on Windows (PyInstaller cannot cross-freeze); use --payload wheels"
        )
    machine = platform.machine().upper()
    native = {"AMD64": "x64", "ARM64": "arm64"}.get(machine)
    if native != arch:
        raise BuildError(f"this is a {machine} Windows: it freezes the {native} app, not {arch}")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        lock = lockfile.lock_for(ARCH_TO_TARGET[arch], python)
    except lockfile.LockError as exc:
        raise BuildError(f"{exc}: freeze with the Python the lock is for") from exc
    if install:
        pip = [sys.executable, "-m", "pip", "install", "--only-binary=:all:", "--require-hashes"]
        with Timer(f"pip install the locked runtime set (lock/{lock.main_file.name})"):
            subprocess.run([*pip, "-r", str(lock.main_file)], check=True)
        if lock.no_deps_file.exists():
            # These declare plain `onnxruntime`, which would be installed over the Windows ML build.
            with Timer("pip install --no-deps the plugin EPs"):
                subprocess.run([*pip, "--no-deps", "-r", str(lock.no_deps_file)], check=True)
        with Timer("pip install the build tools"):
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--only-binary=:all:", "-r",
                 str(INSTALLER_DIR / "requirements-build.txt")],
                check=True,
            )
    problems = installed_runtime_problems(arch) + lockfile.differences(
        lock, lockfile.installed_versions(), extras=False
    )
    if problems:
        raise BuildError(f"this environment's runtime set is wrong for {arch}: {'; '.join(problems)}")
    make_icon(icon)  # needs Pillow (and PySide6 for the SVG), installed just above
    frozen = run_pyinstaller(payload.parent / "pyinstaller", models_dir, icon)
    if payload.exists():
        shutil.rmtree(payload)
    shutil.move(str(frozen), str(payload))
    models = [p.name for p in model_folders(payload / "_internal" / "assets" / "models")]
    from importlib import metadata

    info: dict[str, object] = {
        "kind": "frozen",
        "entry": ENTRY_FROZEN,
        "arch": arch,
        "target": ARCH_TO_TARGET[arch],
        "python_version": python,
        "packages": {
            name: metadata.version(name)
            for name in sorted(targets.WHOLE_ORT_BUILDS | targets.GENAI_BUILDS | {targets.QNN_PLUGIN})
            if _installed(name)
        },
        "models": models,
    }
    write_payload_info(payload, info)
    return info


def run_pyinstaller(work: Path, models_dir: Path, icon: Path | None) -> Path:
    """Freeze the app with installer/npu_studio.spec; returns the one-folder app directory."""
    try:
        import PyInstaller  # noqa: F401
    except ImportError as exc:
        raise BuildError("PyInstaller is not installed: pip install -r installer/requirements-build.txt") from exc
    env = {**os.environ, "NPU_STUDIO_MODELS_DIR": str(models_dir), "NPU_STUDIO_ICON": str(icon or "")}
    with Timer("PyInstaller one-folder build"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "PyInstaller",
                "--noconfirm",
                "--clean",
                "--log-level",
                "WARN",
                "--distpath",
                str(work / "dist"),
                "--workpath",
                str(work / "work"),
                str(INSTALLER_DIR / "npu_studio.spec"),
            ],
            check=True,
            env=env,
            cwd=REPO,
        )
    return work / "dist" / "npu-studio"


def freeze_check(work: Path, models_dir: Path) -> dict[str, object]:
    """Freeze the app for *this* OS with the same spec and run the frozen app's self-test.

    The MSI's frozen app is built on Windows; this catches spec problems (a module imported by name, a
    missing data file, the bundled models' location) on any machine, headless.
    """
    import tempfile

    app_dir = run_pyinstaller(work, models_dir, None)
    suffix = ".exe" if sys.platform == "win32" else ""
    report = work / "self-test.json"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "NPU_STUDIO_HOME": tempfile.mkdtemp(prefix="npu-freeze-")}
    env.pop("NPU_STUDIO_ASSETS", None)
    env.pop("NPU_STUDIO_BUNDLED_MODELS", None)
    with Timer("frozen app: npu-studio-cli devices --json"):
        devices = subprocess.run(
            [str(app_dir / f"npu-studio-cli{suffix}"), "devices", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    if devices.returncode != 0:
        raise BuildError(f"the frozen app's `devices --json` failed: {devices.stderr.strip()[-1500:]}")
    with Timer("frozen app: --self-test"):
        proc = subprocess.run(
            [str(app_dir / f"npu-studio{suffix}"), "--self-test", "--report", str(report)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
    if proc.returncode != 0 or not report.is_file():
        output = (proc.stdout + proc.stderr)[-2000:]
        raise BuildError(f"the frozen app's self-test failed ({proc.returncode}): {output}")
    result = json.loads(report.read_text(encoding="utf-8"))
    return {"app": str(app_dir), "self_test_passed": result.get("passed"), "report": str(report)}


def _installed(name: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


# ---- msi ----------------------------------------------------------------------------------------------------------


def write_wxs(product: Product, payload: Path, icon: Path, arch: str, schema: str, out: Path) -> Path:
    """Write the WiX source; v3 (wixl) sources are relative to the .wxs folder, where wixl runs."""
    base = out.parent.resolve() if schema == "v3" else None
    try:
        text = wix.generate(product, payload, icon, arch, schema, base)
    except wix.PayloadError as exc:
        raise BuildError(str(exc)) from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out


def build_msi_wixl(product: Product, payload: Path, icon: Path, arch: str, out_dir: Path, work: Path) -> Path:
    if arch != "x64":
        raise BuildError("wixl builds x64 (and x86) MSIs only; build the arm64 MSI on Windows with WiX v4+")
    for tool in ("wixl", "msibuild"):
        if shutil.which(tool) is None:
            raise BuildError(f"{tool} is not installed: {APT_LINE}")
    info = wix.read_payload_info(payload)
    wxs = write_wxs(product, payload, icon, arch, "v3", work / "npu-studio.v3.wxs")
    out = out_dir / product.msi_filename(arch, info.kind)
    out.parent.mkdir(parents=True, exist_ok=True)
    with Timer("wixl"):
        proc = subprocess.run(
            ["wixl", "--arch", arch, "--output", str(out.resolve()), wxs.name],
            capture_output=True,
            text=True,
            check=False,
            cwd=wxs.parent,
        )
    if proc.returncode != 0 or not out.exists():
        raise BuildError(f"wixl failed: {proc.stderr.strip()[-2000:]}")
    # wixl schedules RemoveExistingProducts after InstallFinalize and ignores MajorUpgrade/@Schedule;
    # move it right after InstallValidate, as WiX v4's afterInstallValidate does.
    query = "UPDATE `InstallExecuteSequence` SET `Sequence` = 1401 WHERE `Action` = 'RemoveExistingProducts'"
    # msibuild writes the binary streams it touches into its working folder: keep them beside the MSI.
    proc = subprocess.run(
        ["msibuild", str(out), "-q", query], capture_output=True, text=True, check=False, cwd=out.parent
    )
    if proc.returncode != 0:
        raise BuildError(f"msibuild could not reschedule RemoveExistingProducts: {proc.stderr.strip()}")
    return out


def build_msi_wix(product: Product, payload: Path, icon: Path, arch: str, out_dir: Path, work: Path) -> Path:
    if shutil.which("wix") is None:
        raise BuildError("WiX v4+ is not installed: dotnet tool install --global wix")
    info = wix.read_payload_info(payload)
    wxs = write_wxs(product, payload, icon, arch, "v4", work / "npu-studio.v4.wxs")
    out = out_dir / product.msi_filename(arch, info.kind)
    out.parent.mkdir(parents=True, exist_ok=True)
    with Timer("wix build"):
        subprocess.run(["wix", "build", "-arch", arch, "-o", str(out), str(wxs)], check=True)
    return out


def build_msi(
    arch: str,
    payload: Path,
    out_dir: Path = DIST_DIR,
    toolset: str | None = None,
    version: str | None = None,
    icon: Path | None = None,
) -> Path:
    product = load_product(version=version)
    work = payload.parent
    icon = icon or make_icon(work / "npu-studio.ico")
    toolset = toolset or ("wix" if sys.platform == "win32" else "wixl")
    builder = {"wixl": build_msi_wixl, "wix": build_msi_wix}[toolset]
    return builder(product, payload, icon, arch, out_dir, work)


# ---- command line ----------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="installer/build.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--arch", choices=ARCHES, required=True)
        p.add_argument("--build-dir", type=Path, default=BUILD_DIR, help="staging root (default build/installer)")

    for name in ("stage", "all"):
        p = sub.add_parser(name, help="stage the payload" + (" and build the MSI" if name == "all" else ""))
        common(p)
        p.add_argument(
            "--payload", choices=("frozen", "wheels"), default="frozen" if sys.platform == "win32" else "wheels"
        )
        p.add_argument(
            "--models",
            type=Path,
            default=REPO / "assets" / "models",
            help="folder of built demo models (default assets/models)",
        )
        p.add_argument("--python-version", default=DEFAULT_PYTHON, help="wheels payload: CPython version")
        p.add_argument("--cache-dir", type=Path, default=None, help="wheel cache (default ~/.cache/npu-studio-build)")
        p.add_argument("--offline", action="store_true", help="wheels payload: use the cache only")
        p.add_argument(
            "--no-install",
            action="store_true",
            help="frozen payload: do not pip install the runtime set into this environment",
        )
    for name in ("msi", "all"):
        p = sub.choices[name] if name in sub.choices else sub.add_parser(name, help="build the MSI from the stage")
        if name == "msi":
            common(p)
        p.add_argument(
            "--toolset",
            choices=("wixl", "wix"),
            default=None,
            help="wixl (Linux, WiX v3 source, x64) or wix (Windows, WiX v4+); default by OS",
        )
        p.add_argument("--out", type=Path, default=DIST_DIR, help="where the MSI goes (default dist/)")
        p.add_argument("--version", default=None, help="override pyproject's version (upgrade testing)")
    p = sub.add_parser("freeze-check", help="freeze the app for this OS with the spec and run its self-test")
    p.add_argument("--models", type=Path, default=REPO / "assets" / "models")
    p.add_argument("--build-dir", type=Path, default=BUILD_DIR)
    p = sub.add_parser("wxs", help="write the WiX source for a staged payload")
    common(p)
    p.add_argument("--schema", choices=("v3", "v4"), required=True)
    p.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    if args.command == "freeze-check":
        try:
            log(f"freeze check: {json.dumps(freeze_check(args.build_dir / 'freeze-check', args.models))}")
        except BuildError as exc:
            print(f"installer/build.py: error: {exc}", file=sys.stderr)
            return 2
        except subprocess.CalledProcessError as exc:
            print(f"installer/build.py: error: PyInstaller exited with {exc.returncode}", file=sys.stderr)
            return 1
        return 0
    payload = stage_dir_for(args.arch, args.build_dir)
    try:
        if args.command in ("stage", "all"):
            with Timer("stage"):
                if args.payload == "wheels":
                    info = stage_wheels(
                        args.arch, payload, args.models, args.python_version, args.cache_dir, args.offline
                    )
                else:
                    info = stage_frozen(
                        args.arch, payload, args.models, not args.no_install, payload.parent / "npu-studio.ico"
                    )
            log(f"staged {payload}: {json.dumps(info, sort_keys=True)}")
        if args.command in ("msi", "all"):
            out = build_msi(args.arch, payload, args.out, args.toolset, args.version)
            log(f"built {out} ({out.stat().st_size / 1e6:.1f} MB)")
        if args.command == "wxs":
            product = load_product()
            icon = make_icon(payload.parent / "npu-studio.ico")
            out = args.out or payload.parent / f"npu-studio.{args.schema}.wxs"
            write_wxs(product, payload, icon, args.arch, args.schema, out)
            log(f"wrote {out}")
    except (BuildError, wix.PayloadError, ValueError) as exc:
        print(f"installer/build.py: error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(
            f"installer/build.py: error: {' '.join(map(str, exc.cmd[:3]))} ... exited with {exc.returncode}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
